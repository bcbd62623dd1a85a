"""Exact resume: N updates straight equal N/2 updates, then a rerun extended to N (CPU, fp32)."""

from __future__ import annotations

import json

import pytest

from rpr_nmt.checkpoint import CheckpointError
from rpr_nmt.train import train

from .conftest import compose_config, train_curve


def test_resumed_losses_equal_an_uninterrupted_run(corpus, cache_dir, tmp_path):
    # Validation every 3 updates: the interrupted run also validates at its end (update 4), which
    # must not disturb the random state the resumed run continues from.
    common = ("train.valid_every=3", "train.save_every=2", "train.valid_bleu=false")
    common += ("train.evaluate_at_end=false",)
    straight = train(
        compose_config(corpus, cache_dir, *common, "train.max_steps=8"), tmp_path / "a"
    )
    first = train(compose_config(corpus, cache_dir, *common, "train.max_steps=4"), tmp_path / "b")
    assert first["steps"] == 4
    # A crash after update 4's checkpoint: updates 5-6 were logged, never saved, and the last
    # line was torn. The resumed run logs them again, from the checkpoint, once.
    with (tmp_path / "b" / "metrics.jsonl").open("a") as log:
        for step in (5, 6):
            log.write(json.dumps({"kind": "train", "step": step, "loss": -1.0}) + "\n")
        log.write('{"kind": "train", "st')
    resumed = train(compose_config(corpus, cache_dir, *common, "train.max_steps=8"), tmp_path / "b")
    assert resumed["steps"] == 8 and resumed["session_steps"] == 4
    a, b = train_curve(tmp_path / "a"), train_curve(tmp_path / "b")
    assert [s for s, _ in a] == list(range(1, 9)) == [s for s, _ in b]
    assert a == b  # exactly equal, not approximately
    assert resumed["final_train_loss"] == straight["final_train_loss"]
    assert resumed["best_valid_loss"] == straight["best_valid_loss"]

    # A finished run rerun with the same max_steps trains nothing and keeps its checkpoint.
    again = train(compose_config(corpus, cache_dir, *common, "train.max_steps=8"), tmp_path / "b")
    assert again["steps"] == 8 and again["session_steps"] == 0

    # Another model in the same run directory is refused with a clear message.
    other = compose_config(corpus, cache_dir, *common, "train.max_steps=9", "model.d_ff=48")
    with pytest.raises(CheckpointError, match=r"another model config \(differs in \['d_ff'\]\)"):
        train(other, tmp_path / "b")


def test_arithmetic_2_resumes_exactly_and_trains_its_own_numbers(corpus, cache_dir, tmp_path):
    """train.arithmetic=2 in bf16: its NumPy masks come from torch's saved RNG state, so a resumed
    run equals an uninterrupted one; and it trains other numbers than arithmetic 1."""
    common = ("train.save_every=3", "train.valid_bleu=false", "train.evaluate_at_end=false",
              "train.precision=bf16", "model.dropout=0.3")  # fmt: skip
    two = (*common, "train.arithmetic=2")
    train(compose_config(corpus, cache_dir, *two, "train.max_steps=6"), tmp_path / "a")
    train(compose_config(corpus, cache_dir, *two, "train.max_steps=3"), tmp_path / "b")
    train(compose_config(corpus, cache_dir, *two, "train.max_steps=6"), tmp_path / "b")
    train(compose_config(corpus, cache_dir, *common, "train.max_steps=6"), tmp_path / "one")
    a, b, one = (train_curve(tmp_path / name) for name in ("a", "b", "one"))
    assert a == b and len(a) == 6  # exactly equal, not approximately
    assert a[0] != one[0] and a != one  # the masks differ from the first update on
