"""Trainer behaviour in-process: time limit, impossible settings."""

from __future__ import annotations

import json

import pytest

from rpr_nmt.train import SettingsError, train

from .test_resume import compose_config


def test_time_limit_stops_saves_and_finishes(corpus, cache_dir, tmp_path):
    config = compose_config(
        corpus, cache_dir, "train.max_steps=1000", "train.max_time_minutes=0.0001",
        "train.valid_bleu=false", "train.evaluate_at_end=false",
    )  # fmt: skip
    summary = train(config, tmp_path / "run")
    assert summary["stopped_by"] == "time_limit" and summary["steps"] == 1
    assert summary["best_valid_loss"] is not None  # validated at the end
    assert (tmp_path / "run" / "checkpoints" / "step_0000001.pt").is_file()
    assert json.loads((tmp_path / "run" / "train_summary.json").read_text())["steps"] == 1


def test_time_limit_counts_the_whole_run_across_resumes(corpus, cache_dir, tmp_path):
    quiet = ["train.valid_bleu=false", "train.evaluate_at_end=false"]
    first = train(compose_config(corpus, cache_dir, "train.max_steps=2", *quiet), tmp_path / "run")
    assert first["steps"] == 2 and first["train_tokens"] > 0
    # The first session took longer than this limit: a rerun must not train another session.
    limit = first["wall_seconds"] / 60 / 2
    again = train(
        compose_config(
            corpus, cache_dir, "train.max_steps=1000", f"train.max_time_minutes={limit}", *quiet
        ),
        tmp_path / "run",
    )
    assert again["stopped_by"] == "time_limit" and again["steps"] == 2
    assert again["session_steps"] == 0
    # Whole-run figures survive a session that trained nothing.
    assert again["train_tokens"] == first["train_tokens"]
    assert again["train_tokens_per_sec"] == pytest.approx(first["train_tokens_per_sec"])
    assert again["wall_seconds"] >= first["wall_seconds"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.precision=fp16"], "fp16 needs a CUDA device"),
        (["train.best_metric=bleu", "train.valid_bleu=false"], "best_metric=bleu needs"),
        (["train.best_metric=accuracy"], "use loss or bleu"),
        (["train.update_freq=0"], "update_freq=0"),
    ],
)
def test_impossible_settings_fail_before_training(corpus, cache_dir, tmp_path, overrides, message):
    with pytest.raises(SettingsError, match=message):
        train(compose_config(corpus, cache_dir, *overrides), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()
