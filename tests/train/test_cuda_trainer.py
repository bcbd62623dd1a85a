"""The trainer on CUDA (pytest -m gpu on a GPU machine): bf16 with torch.compile, fp16 with its
gradient scaler, exact resume, and torchrun's NCCL process group. Skipped without CUDA."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rpr_nmt.train import train

from .conftest import REPO, compose_config, tiny_overrides

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device: run pytest -m gpu on a GPU"
    ),
]

QUIET = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.device=cuda")


@pytest.mark.parametrize(
    "settings",
    [("train.precision=bf16", "train.compile=true"), ("train.precision=fp16",)],
    ids=["bf16_compiled", "fp16_scaled"],
)
def test_training_on_cuda_runs_and_learns(corpus, cache_dir, tmp_path, settings):
    config = compose_config(corpus, cache_dir, *QUIET, "train.max_steps=30", *settings)
    summary = train(config, tmp_path / "run")
    assert summary["device"] == "cuda:0" and summary["steps"] == 30
    assert summary["skipped_updates"] <= 3  # fp16: the scaler may skip its first updates
    curve = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    losses = [m["loss"] for m in curve if m["kind"] == "train"]
    assert losses[-1] < losses[0]


def test_resume_on_cuda_is_exact(corpus, cache_dir, tmp_path):
    common = (*QUIET, "train.precision=fp32", "train.save_every=2")
    six = compose_config(corpus, cache_dir, *common, "train.max_steps=6")
    straight = train(six, tmp_path / "a")
    train(compose_config(corpus, cache_dir, *common, "train.max_steps=3"), tmp_path / "b")
    resumed = train(six, tmp_path / "b")
    assert resumed["final_train_loss"] == straight["final_train_loss"]


def test_torchrun_on_cuda_joins_an_nccl_group(corpus, cache_dir, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    torchrun = Path(sys.executable).with_name("torchrun")
    args = tiny_overrides(corpus, cache_dir, tmp_path / "run", *QUIET, "train.max_steps=3")
    cmd = [str(torchrun), "--nproc_per_node", "1", "--master_port", port, "-m", "rpr_nmt.cli.train"]
    done = subprocess.run(
        [*cmd, *args], cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "train_summary.json").read_text())
    assert summary["process_group"] == "nccl" and summary["steps"] == 3
