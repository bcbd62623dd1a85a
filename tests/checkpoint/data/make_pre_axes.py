"""Tiny checkpoints of published position settings and their logits on one batch, written by the
code before the position axes existed (test_pre_axes.py). Written once, with that code first on
the path:  git archive d7f0f88 | tar -x -C /tmp/old
           PYTHONPATH=/tmp/old python tests/checkpoint/data/make_pre_axes.py tests/checkpoint/data
"""

import sys
from pathlib import Path

import torch

from rpr_nmt.checkpoint import TrainingState, save_checkpoint
from rpr_nmt.config import ModelConfig, TrainJobConfig
from rpr_nmt.model import build_model

out = Path(sys.argv[1])
settings = {
    "both": dict(max_relative_position=2, sinusoidal=True),
    "none": dict(max_relative_position=0, sinusoidal=False),
    "shared": dict(
        max_relative_position=3,
        relative_values=False,
        share_relative_across_heads=True,
        share_relative_across_layers=True,
    ),
}
torch.manual_seed(0)
src = torch.randint(1, 23, (2, 7))
src[1, -2:] = 0
tgt = torch.randint(1, 23, (2, 6))
batch = {"src": src, "tgt": tgt}
for name, fields in settings.items():
    torch.manual_seed(1)
    cfg = ModelConfig(
        d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=2, **fields
    )
    model = build_model(cfg, vocab_size=23, pad_id=0).eval()
    with torch.no_grad():
        batch[name] = model(src, tgt)
    save_checkpoint(
        TrainingState(
            config=TrainJobConfig(model=cfg), model=model.state_dict(), bpe_model=b"x", step=1
        ),
        out / f"pre_axes_{name}.pt",
    )
torch.save(batch, out / "pre_axes_logits.pt")
