"""Checkpoints written before the position axes (absolute_positions, relative_positions, ...)
existed load and give the logits the model gave when it was saved.

The test writes such a checkpoint itself: a model of a published setting saved by save_checkpoint,
its config then cut to the model fields of commit d7f0f88 (the last one without the axes), as
every file written before them holds it. That the published settings still build the same
parameters from the same seed as before is the 50-update bit-identity check of issue 32.
"""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.checkpoint import TrainingState, load_checkpoint, save_checkpoint
from rpr_nmt.config import ModelConfig, TrainJobConfig, position_methods
from rpr_nmt.model import build_model

# ModelConfig's fields at d7f0f88.
OLD_MODEL_FIELDS = {
    "d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers", "dropout",
    "attention_dropout", "max_relative_position", "relative_keys", "relative_values",
    "sinusoidal", "share_relative_across_heads", "share_relative_across_layers",
    "tie_embeddings", "pre_norm",
}  # fmt: skip
SETTINGS = {
    "both": dict(max_relative_position=2, sinusoidal=True),
    "none": dict(max_relative_position=0, sinusoidal=False),
    "shared": dict(
        max_relative_position=3,
        relative_values=False,
        share_relative_across_heads=True,
        share_relative_across_layers=True,
    ),  # fmt: skip
}
EXPECTED = {"both": ("sinusoid", "shaw"), "none": ("none", "none"), "shared": ("none", "shaw")}


def write_old_checkpoint(
    path, fields: dict
) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Save a tiny model of `fields` with the old config field set; returns the saved model
    config (as the file holds it), a batch (src, tgt) and the model's logits on it."""
    torch.manual_seed(0)
    src = torch.randint(1, 23, (2, 7))
    src[1, -2:] = 0
    tgt = torch.randint(1, 23, (2, 6))
    torch.manual_seed(1)
    cfg = ModelConfig(
        d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=2, **fields
    )
    model = build_model(cfg, vocab_size=23, pad_id=0).eval()
    with torch.no_grad():
        logits = model(src, tgt)
    state = TrainingState(
        config=TrainJobConfig(model=cfg), model=model.state_dict(), bpe_model=b"x", step=1
    )
    save_checkpoint(state, path)
    raw = torch.load(path, weights_only=True)
    raw["config"]["model"] = {
        k: v for k, v in raw["config"]["model"].items() if k in OLD_MODEL_FIELDS
    }
    torch.save(raw, path)
    return raw["config"]["model"], src, tgt, logits


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_an_old_checkpoint_loads_and_gives_identical_logits(tmp_path, name):
    path = tmp_path / f"pre_axes_{name}.pt"
    old_model, src, tgt, logits = write_old_checkpoint(path, SETTINGS[name])
    assert set(old_model) == OLD_MODEL_FIELDS  # truly the old field set
    state = load_checkpoint(path)
    cfg = state.config.model
    assert (cfg.absolute_positions, cfg.relative_positions) == ("sinusoid", "shaw")
    assert position_methods(cfg) == position_methods(old_model) == EXPECTED[name]
    model = build_model(cfg, vocab_size=23, pad_id=0).eval()
    model.load_state_dict(state.model, strict=True)  # the same parameters, no new ones
    with torch.no_grad():
        assert torch.equal(model(src, tgt), logits)
