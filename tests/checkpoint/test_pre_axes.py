"""Checkpoints written before the position axes (absolute_positions, relative_positions) existed
load and give the logits they gave then.

tests/checkpoint/data/pre_axes_*.pt were written by save_checkpoint at commit d7f0f88 (the last one
without the axes) with data/make_pre_axes.py, together with each model's logits on one batch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rpr_nmt.checkpoint import load_checkpoint
from rpr_nmt.config import position_methods
from rpr_nmt.model import build_model

DATA = Path(__file__).resolve().parent / "data"
EXPECTED = {"both": ("sinusoid", "shaw"), "none": ("none", "none"), "shared": ("none", "shaw")}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_old_checkpoint_loads_and_gives_identical_logits(name):
    raw = torch.load(DATA / f"pre_axes_{name}.pt", weights_only=True)
    assert "relative_positions" not in raw["config"]["model"]  # truly the old field set
    state = load_checkpoint(DATA / f"pre_axes_{name}.pt")
    cfg = state.config.model
    assert (cfg.absolute_positions, cfg.relative_positions) == ("sinusoid", "shaw")
    assert position_methods(cfg) == position_methods(raw["config"]["model"]) == EXPECTED[name]
    model = build_model(cfg, vocab_size=23, pad_id=0).eval()
    model.load_state_dict(state.model, strict=True)  # the same parameters, no new ones
    batch = torch.load(DATA / "pre_axes_logits.pt", weights_only=True)
    with torch.no_grad():
        logits = model(batch["src"], batch["tgt"])
    assert torch.equal(logits, batch[name])
