"""train.compile=true on the CPU: the compiled model trains as the eager one does."""

from __future__ import annotations

import pytest

from rpr_nmt.train import train

from .conftest import compose_config, train_curve

QUIET = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.precision=fp32",
         "train.max_steps=8", "train.log_every=1", "model.dropout=0.0",
         "model.attention_dropout=0.0")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("positions", ["relative", "rope", "t5"])
def test_compiled_training_follows_the_eager_losses(corpus, cache_dir, tmp_path, positions):
    """Batches of many shapes (the corpus's length buckets) through one compiled model: without
    dropout, whose random stream inductor draws otherwise, the losses are the eager run's."""
    settings = (*QUIET, f"positions={positions}", "model=transformer_tiny")
    eager = train(compose_config(corpus, cache_dir, *settings), tmp_path / "eager")
    compiled = train(
        compose_config(corpus, cache_dir, *settings, "train.compile=true"), tmp_path / "compiled"
    )
    assert compiled["steps"] == eager["steps"] == 8
    want, got = train_curve(tmp_path / "eager"), train_curve(tmp_path / "compiled")
    assert [step for step, _ in got] == [step for step, _ in want] == list(range(1, 9))
    assert [loss for _, loss in got] == pytest.approx([loss for _, loss in want], rel=1e-4)
