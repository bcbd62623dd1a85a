"""scripts/peer_news.sh: OpenNMT-py on the news corpus. Bad input is one line and exit 2 before
the peer is installed or anything is written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "scripts" / "peer_news.sh"


def peer_news(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    peer = tmp_path / "peer"
    peer.mkdir(exist_ok=True)
    (peer / "train_bench.sh").write_text("exit 99\n")  # must never be reached here
    environment = {**os.environ, "PEER": str(peer), "PEERS": str(tmp_path / "peers"), **env}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], env=environment, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        ([], {}, "usage: peer_news.sh NAME"),
        (["a/b"], {}, "NAME 'a/b'"),
        (["base"], {"MINUTES": "0"}, "MINUTES '0'"),
        (["base"], {"MINUTES": "ten"}, "MINUTES 'ten'"),
        (["base"], {"VOCAB": "8k"}, "VOCAB '8k'"),
        (["base"], {"SAVE_EVERY": "0"}, "SAVE_EVERY '0'"),
    ],
)
def test_bad_input_is_one_line_before_anything_runs(args, env, named, tmp_path):
    done = peer_news(args, tmp_path, **env)
    assert done.returncode == 2 and named in done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == ""
    assert not (tmp_path / "peers").exists()


def test_a_missing_peer_is_named(tmp_path):
    done = peer_news(["base"], tmp_path, PEER=str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert f"{tmp_path / 'nowhere'}/train_bench.sh not found" in done.stderr


def test_a_split_scored_for_this_checkpoint_is_not_decoded_again(tmp_path):
    peers = tmp_path / "peers"
    work = peers / "news_v16000"
    run = work / "runs" / "base_rpr_1000000"
    for path in (peers / "venv" / "bin", work / "data" / "spm", run):
        path.mkdir(parents=True)
    for tool in ("onmt_train", "python"):  # a stand-in venv whose python loads any checkpoint
        (peers / "venv" / "bin" / tool).write_text("#!/bin/sh\nexit 0\n")
        (peers / "venv" / "bin" / tool).chmod(0o755)
    (work / "data" / "spm" / "vocab.shared").write_text("")
    (run / "done").write_text("")
    checkpoint = run / "model_step_300.pt"
    checkpoint.write_text("")
    summary = work / "trans" / "base_rpr_1000000_model_step_300_val_b4" / "summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text("{}")
    os.utime(checkpoint, (1, 1))  # older than its decoding
    scored = {"name": "base", "split": "newstest2013", "steps": 300, "bleu": 1.0}  # its key order
    (work / "scores.jsonl").write_text(json.dumps(scored) + "\n")
    done = peer_news(["base"], tmp_path)  # train_bench.sh and translate_bench.sh would exit 99
    assert done.returncode == 0, done.stderr
    assert "val: this checkpoint is decoded and scored already" in done.stdout
    assert (work / "scores.jsonl").read_text().count("\n") == 1
    os.utime(checkpoint)  # a newer checkpoint than its decoding is decoded again
    (peer := tmp_path / "peer").mkdir(exist_ok=True)
    (peer / "translate_bench.sh").write_text("exit 99\n")
    assert peer_news(["base"], tmp_path).returncode != 0
