"""Faults that lose nothing: leftovers of a killed session, a full disk, skipped updates."""

from __future__ import annotations

import json
import socket
from dataclasses import replace

import pytest

from rpr_nmt.checkpoint import CheckpointError, load_checkpoint
from rpr_nmt.train import train
from rpr_nmt.train import trainer as trainer_module

from ..data.test_cache import dead_pid
from .conftest import compose_config

QUIET = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.save_every=2")


def run(corpus, cache_dir, run_dir, steps: int, *extra: str) -> dict:
    return train(
        compose_config(corpus, cache_dir, *QUIET, f"train.max_steps={steps}", *extra), run_dir
    )


def test_leftovers_of_a_killed_session_are_removed_and_resume_is_exact(corpus, cache_dir, tmp_path):
    straight = run(corpus, cache_dir, tmp_path / "a", 4)
    run(corpus, cache_dir, tmp_path / "b", 2)
    # What SIGKILL in the middle of a save, a link and a summary write leaves behind.
    owner = f"owner={socket.gethostname()}={dead_pid()}="
    left = [
        tmp_path / "b" / "checkpoints" / f".step_0000003.pt.{owner}k1.tmp",
        tmp_path / "b" / "checkpoints" / f".last.pt.{owner}k2.tmp",
        tmp_path / "b" / f".train_summary.json.{owner}k3.tmp",
    ]
    for path in left:
        path.write_bytes(b"half")
    resumed = run(corpus, cache_dir, tmp_path / "b", 4)
    assert not any(path.exists() for path in left)
    assert resumed["final_train_loss"] == straight["final_train_loss"]
    assert resumed["session_steps"] == 2


def test_a_full_disk_at_a_save_stops_with_one_error_and_the_rerun_resumes(
    corpus, cache_dir, tmp_path, monkeypatch
):
    import torch

    real_save = torch.save

    def full_at_step_4(obj, f):
        if obj.get("step") == 4:
            raise OSError(28, "No space left on device")
        real_save(obj, f)

    monkeypatch.setattr("rpr_nmt.checkpoint.state.torch.save", full_at_step_4)
    with pytest.raises(CheckpointError, match="No space left on device.*MiB free"):
        run(corpus, cache_dir, tmp_path / "run", 6)
    monkeypatch.undo()
    folder = tmp_path / "run" / "checkpoints"
    assert load_checkpoint(folder / "last.pt").step == 2  # the previous checkpoint, intact
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    again = run(corpus, cache_dir, tmp_path / "run", 6)
    assert again["steps"] == 6 and again["session_steps"] == 4  # resumed from update 2


def test_skipped_updates_are_counted_in_the_summary_and_the_metrics(
    corpus, cache_dir, tmp_path, monkeypatch
):
    real_step, calls = trainer_module.train_step, []

    def second_is_skipped(*args, **kwargs):
        calls.append(1)
        result = real_step(*args, **kwargs)
        return replace(result, applied=False) if len(calls) == 2 else result

    monkeypatch.setattr(trainer_module, "train_step", second_is_skipped)
    summary = run(corpus, cache_dir, tmp_path / "run", 3)
    assert summary["steps"] == 3 and summary["skipped_updates"] == 1 and len(calls) == 4
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [(r["step"], r["skipped_updates"]) for r in rows if r["kind"] == "skipped"] == [(2, 1)]
    assert (
        load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt").progress.skipped_updates == 1
    )
