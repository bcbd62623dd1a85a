"""What trained a run: each session's start, precision, arithmetic and commit, in its summary."""

from __future__ import annotations

import logging
import re
import subprocess
from pathlib import Path

import pytest
import torch

from rpr_nmt.train import train
from rpr_nmt.train.errors import SettingsError
from rpr_nmt.train.provenance import (
    ARITHMETIC,
    UNRECORDED,
    allocator_name,
    arithmetic_of,
    code_record,
    host_label,
    host_record,
    read_sessions,
)

from .conftest import REPO, compose_config

COMMON = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.save_every=2")


def test_a_resume_in_another_precision_is_warned_and_each_stretch_recorded(
    corpus, cache_dir, tmp_path, caplog
):
    run = tmp_path / "run"
    first = train(compose_config(corpus, cache_dir, *COMMON, "train.precision=fp32",
                                 "train.max_steps=2"), run)  # fmt: skip
    assert [s["precision"] for s in first["sessions"]] == ["fp32"]
    with caplog.at_level(logging.WARNING, logger="rpr_nmt.train"):
        second = train(compose_config(corpus, cache_dir, *COMMON, "train.precision=bf16",
                                      "train.max_steps=4"), run)  # fmt: skip
    assert "trained in fp32 and continues in bf16 from update 2" in caplog.text
    stretches = [(s["start_step"], s["precision"]) for s in second["sessions"]]
    assert stretches == [(0, "fp32"), (2, "bf16")]
    for session in second["sessions"]:  # and the host each stretch trained on
        assert session["host"] == host_record("cpu")
        assert host_label(session).endswith(f"thread{'' if torch.get_num_threads() == 1 else 's'}")
    assert second["precision"] == "bf16" and second["steps"] == 4
    # A finished run rerun trains nothing and adds no stretch.
    train(compose_config(corpus, cache_dir, *COMMON, "train.precision=bf16",
                         "train.max_steps=4"), run)  # fmt: skip
    assert len(read_sessions(run)) == 2


def test_the_code_record_names_this_checkout():
    record = code_record()
    assert record["arithmetic"] == ARITHMETIC
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()  # fmt: skip
    assert record["commit"] == head and re.fullmatch(r"[0-9a-f]{40}", head)
    assert isinstance(record["modified"], bool)


@pytest.mark.parametrize(
    "summary, expected",
    [
        ({}, (1,)),  # a run from before the record
        ({"code": {"arithmetic": 2}}, (2,)),
        ({"sessions": [{"arithmetic": 1}, {"arithmetic": 2}], "code": {"arithmetic": 2}}, (1, 2)),
        ({"sessions": [{}, {"arithmetic": 1}]}, (1,)),
    ],
)
def test_arithmetic_of_a_summary(summary, expected):
    assert arithmetic_of(summary) == expected


def test_read_sessions_skips_a_torn_line(tmp_path: Path):
    (tmp_path / "sessions.jsonl").write_text('{"start_step": 0, "precision": "fp32"}\n{"start_')
    assert read_sessions(tmp_path) == [{"start_step": 0, "precision": "fp32"}]
    assert read_sessions(tmp_path / "missing") == []


def test_each_run_records_the_arithmetic_it_trained_with(corpus, cache_dir, tmp_path):
    """train.arithmetic=2 is recorded where it computes differently (bf16), and 1 in fp32, where
    both arithmetics compute the same numbers (tests/model/test_arithmetic.py)."""
    for precision, recorded in (("bf16", 2), ("fp32", 1)):
        summary = train(compose_config(corpus, cache_dir, *COMMON, f"train.precision={precision}",
                                       "train.max_steps=2", "train.arithmetic=2"),
                        tmp_path / precision)  # fmt: skip
        assert [s["arithmetic"] for s in summary["sessions"]] == [recorded]
        assert summary["code"]["arithmetic"] == recorded
        assert arithmetic_of(summary) == (recorded,)


def test_an_arithmetic_that_is_none_is_refused_before_training(corpus, cache_dir, tmp_path):
    with pytest.raises(
        SettingsError, match=r"train.arithmetic=3 is not an arithmetic; use 1.* or null"
    ):
        train(compose_config(corpus, cache_dir, *COMMON, "train.arithmetic=3"), tmp_path / "run")
    assert not (tmp_path / "run" / "sessions.jsonl").exists()


def test_a_host_in_a_few_words():
    cpu = {"device": "cpu", "cpu": "Intel Xeon", "kind": "AMX-BF16", "threads": 1}
    assert host_label({"host": cpu}) == "Intel Xeon (AMX-BF16), 1 thread"
    gpu = dict(cpu, device="NVIDIA H100", threads=8)
    assert host_label({"host": gpu}) == "NVIDIA H100, Intel Xeon (AMX-BF16), 8 threads"
    assert host_label({"start_step": 0}) == UNRECORDED  # a session from before the record
    record = host_record("cpu")
    assert record["device"] == "cpu" and record["threads"] == torch.get_num_threads()
    assert record["cpu"] and record["kind"]
    assert record["allocator"] in ("system", "jemalloc", "tcmalloc")


def test_the_allocator_is_read_from_the_libraries_mapped(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    assert allocator_name(maps) == "system"
    maps.write_text("7f00-7f01 r-xp 0 08:01 2 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n")
    assert allocator_name(maps) == "jemalloc"
    assert allocator_name(tmp_path / "no maps here") == "system"
