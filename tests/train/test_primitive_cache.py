"""oneDNN's primitive cache: rpr-nmt-train sets its capacity before any bf16 product unless the
user has, and each session records the capacity it trained under."""

from __future__ import annotations

import subprocess
import sys

import pytest

import rpr_nmt.cli.train as train_cli
from rpr_nmt.train.primitive_cache import (
    CAPACITY,
    ONEDNN_DEFAULT,
    limit_primitive_cache,
    primitive_cache_capacity,
)
from rpr_nmt.train.provenance import host_record


def test_the_capacity_is_set_only_where_the_user_has_not():
    env: dict[str, str] = {}
    assert primitive_cache_capacity(env) == ONEDNN_DEFAULT
    limit_primitive_cache(env)
    assert env == {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(CAPACITY)}
    assert primitive_cache_capacity(env) == CAPACITY
    for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY"):
        users = {name: "7"}
        limit_primitive_cache(users)
        assert users == {name: "7"} and primitive_cache_capacity(users) == 7


def test_the_capacity_is_read_as_onednn_reads_it():
    both = {"DNNL_PRIMITIVE_CACHE_CAPACITY": "5", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "9"}
    assert primitive_cache_capacity(both) == 9  # the ONEDNN_ name first
    assert primitive_cache_capacity({"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "lots"}) == "lots"


def test_rpr_nmt_train_sets_it_before_composing_its_config(monkeypatch):
    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "x")  # restored after the test
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY")
    monkeypatch.delenv("DNNL_PRIMITIVE_CACHE_CAPACITY", raising=False)
    seen = []

    def refuse(*_args):
        seen.append(primitive_cache_capacity())
        raise SystemExit(2)

    monkeypatch.setattr(train_cli, "refuse_bad_overrides", refuse)
    with pytest.raises(SystemExit):
        train_cli.main()
    assert seen == [CAPACITY]
    assert host_record("cpu")["primitive_cache"] == CAPACITY


PROBE = """
import os, torch
from rpr_nmt.train.primitive_cache import limit_primitive_cache
limit_primitive_cache(capacity=0)  # after torch's import, before its first bf16 product
a = torch.ones(64, 64, dtype=torch.bfloat16)
for _ in range(2):
    a @ a
"""


def test_onednn_reads_a_capacity_set_after_torch_is_imported():
    env = {"ONEDNN_VERBOSE": "all", "OMP_NUM_THREADS": "1", "PATH": ""}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    created = [line for line in done.stdout.splitlines() if ",primitive,create:" in line]
    if not created:
        pytest.skip("torch runs bf16 products here without oneDNN")
    assert len(created) == 2 and all("create:cache_miss" in line for line in created)
