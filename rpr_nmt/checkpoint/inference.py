"""Loading a checkpoint (or the average of several) as a ready model for translation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from rpr_nmt.checkpoint.run_folder import average_checkpoints
from rpr_nmt.checkpoint.state import load_checkpoint
from rpr_nmt.config import TrainJobConfig
from rpr_nmt.data import Tokenizer
from rpr_nmt.model import Transformer, build_model


def load_for_inference(
    paths: str | Path | Sequence[str | Path],
    device: str | torch.device = "cpu",
    *,
    use_ema: bool = True,
) -> tuple[Transformer, Tokenizer, TrainJobConfig]:
    """Build a checkpoint's model (several are averaged) in eval mode, with its own BPE model.

    The model gets the checkpoint's moving average of the weights when it has one (a run with
    train.ema_decay > 0) and `use_ema`, else the trained weights. Loading stays weights_only
    (rpr_nmt.checkpoint.state.load_checkpoint).

    Returns:
        (model, tokenizer, config) where config is the job config the run was trained with.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    state = average_checkpoints(paths) if len(paths) > 1 else load_checkpoint(paths[0])
    tokenizer = Tokenizer.from_proto(state.bpe_model)
    model = build_model(
        state.config.model, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id
    )
    model.load_state_dict(state.weights(use_ema))
    model.to(device).eval()
    return model, tokenizer, state.config
