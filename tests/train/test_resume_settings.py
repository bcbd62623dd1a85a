"""A resumed run told what changed: a rerun with other settings (best metric, label smoothing,
learning-rate schedule, moving-average decay, fewer updates, averaging) says each change and what
becomes of the run's figures, and compares only what is comparable."""

from __future__ import annotations

import json
import logging

import pytest

from rpr_nmt.checkpoint import load_checkpoint
from rpr_nmt.train import train

from .conftest import compose_config

QUIET = ("train.valid_bleu=false", "train.evaluate_at_end=false")


def test_a_resume_with_another_best_metric_picks_best_pt_by_the_new_one(
    corpus, cache_dir, tmp_path
):
    # The loss-best value was compared with BLEU: best.pt stayed at the first session's update.
    run = tmp_path / "run"
    quick = ("train.evaluate_at_end=false", "train.valid_every=2", "train.save_every=2")
    train(compose_config(corpus, cache_dir, *quick, "train.max_steps=4"), run)
    summary = train(
        compose_config(corpus, cache_dir, *quick, "train.max_steps=8", "train.best_metric=bleu"),
        run,
    )
    assert summary["best_step"] > 4
    assert load_checkpoint(run / "checkpoints" / "best.pt").step == summary["best_step"]


def test_a_rerun_with_fewer_max_steps_says_the_run_is_past_them(
    corpus, cache_dir, tmp_path, caplog
):
    train(compose_config(corpus, cache_dir, "train.max_steps=3", *QUIET), tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="rpr_nmt.train"):
        again = train(
            compose_config(corpus, cache_dir, "train.max_steps=2", *QUIET), tmp_path / "run"
        )
    assert again["steps"] == 3 and again["session_steps"] == 0
    assert "at update 3, past train.max_steps=2" in caplog.text


def test_a_resume_with_another_label_smoothing_compares_only_its_own_losses(
    corpus, cache_dir, tmp_path
):
    # Smoothed validation losses of 0.0 and 0.5 were compared as one figure.
    run = tmp_path / "run"
    quick = (*QUIET, "train.valid_every=2", "train.save_every=2")
    train(
        compose_config(corpus, cache_dir, *quick, "train.max_steps=4", "train.label_smoothing=0"),
        run,
    )
    summary = train(
        compose_config(corpus, cache_dir, *quick, "train.max_steps=8", "train.label_smoothing=0.5"),
        run,
    )
    valid = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    later = {r["step"]: r["loss"] for r in valid if r["kind"] == "valid" and r["step"] > 4}
    assert summary["best_step"] > 4
    assert summary["best_valid_loss"] == min(later.values()) == later[summary["best_step"]]


def test_a_resume_with_another_learning_rate_schedule_says_each_change(
    corpus, cache_dir, tmp_path, caplog
):
    # A resume with another lr, warmup, schedule or cool-down changed the rate without a word.
    first = ("train.lr=0.003", "train.warmup_steps=4", "train.schedule=inverse_sqrt")
    train(compose_config(corpus, cache_dir, *QUIET, "train.max_steps=2", *first), tmp_path / "run")
    now = ("train.lr=0.5", "train.warmup_steps=8", "train.schedule=noam", "train.cooldown=0.5")
    with caplog.at_level(logging.WARNING, logger="rpr_nmt.train"):
        train(
            compose_config(corpus, cache_dir, *QUIET, "train.max_steps=4", *now), tmp_path / "run"
        )
    lines = [r.getMessage() for r in caplog.records]
    changes = [
        "train.lr was 0.003 and is now 0.5", "train.warmup_steps was 4 and is now 8",
        "train.schedule was inverse_sqrt and is now noam", "train.cooldown was 0.0 and is now 0.5",
        "train.max_steps was 2 and is now 4",  # the cool-down moves with it
    ]  # fmt: skip
    for said in changes:
        assert sum(said in line for line in lines) == 1, (said, lines)
    assert any("learning rate of update 3 is" in line for line in lines)


@pytest.mark.parametrize(
    ("before", "now", "what"),
    [
        ("0", "0.9", "starts now"),
        ("0.9", "0.5", "goes on with the new decay"),
        ("0.9", "0", "is dropped"),
    ],  # fmt: skip
)
def test_a_resume_with_another_ema_decay_says_what_becomes_of_the_average(
    corpus, cache_dir, tmp_path, caplog, before, now, what
):
    # A changed or removed decay was taken silently (the saved average was dropped without a word).
    run = tmp_path / "run"
    train(
        compose_config(corpus, cache_dir, *QUIET, "train.max_steps=2", f"train.ema_decay={before}"),
        run,
    )
    with caplog.at_level(logging.WARNING, logger="rpr_nmt.train"):
        train(
            compose_config(
                corpus, cache_dir, *QUIET, "train.max_steps=3", f"train.ema_decay={now}"
            ),
            run,
        )
    said = [r.getMessage() for r in caplog.records if "train.ema_decay" in r.getMessage()]
    assert len(said) == 1 and f"was {float(before)} and is now {float(now)}" in said[0], said
    assert what in said[0]


def test_a_resume_with_the_same_settings_warns_of_no_change(corpus, cache_dir, tmp_path, caplog):
    config = (*QUIET, "train.ema_decay=0.9")
    train(compose_config(corpus, cache_dir, *config, "train.max_steps=2"), tmp_path / "run")
    with caplog.at_level(logging.WARNING, logger="rpr_nmt.train"):
        train(compose_config(corpus, cache_dir, *config, "train.max_steps=3"), tmp_path / "run")
    assert " was " not in caplog.text


def test_too_few_saves_to_average_blame_save_every_not_keep_last(
    corpus, cache_dir, tmp_path, caplog
):
    # One save in 4 updates at save_every=4 was blamed on train.keep_last (which is not the cause).
    config = compose_config(
        corpus, cache_dir, *QUIET, "train.max_steps=4", "train.save_every=4",
        "train.average_last=3", "train.keep_last=5",
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="rpr_nmt.train"):
        summary = train(config, tmp_path / "run")
    said = [r.getMessage() for r in caplog.records if "train.average_last=3" in r.getMessage()]
    assert len(said) == 1 and "only 1 step checkpoints" in said[0], said
    assert "train.save_every=4" in said[0] and "keep_last" not in said[0]
    assert summary["averaged_checkpoint"].endswith("averaged.pt")


def test_checkpoints_deleted_by_an_earlier_session_are_named_as_the_cause(
    corpus, cache_dir, tmp_path, caplog
):
    quick = (*QUIET, "train.save_every=2", "train.valid_every=100", "train.keep_last=1")
    train(compose_config(corpus, cache_dir, *quick, "train.max_steps=8"), tmp_path / "run")
    again = compose_config(corpus, cache_dir, *quick, "train.max_steps=10", "train.average_last=3")
    with caplog.at_level(logging.WARNING, logger="rpr_nmt.train"):
        train(again, tmp_path / "run")
    said = [r.getMessage() for r in caplog.records if "train.average_last=3" in r.getMessage()]
    assert len(said) == 1 and "only 2 step checkpoints" in said[0], said
    assert "an earlier session" in said[0] and "save_every" not in said[0]
