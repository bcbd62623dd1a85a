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


def load_ensemble_members(
    members: Sequence[Sequence[str | Path]],
    device: str | torch.device = "cpu",
    *,
    use_ema: bool = True,
) -> tuple[list[Transformer], Tokenizer, list[TrainJobConfig]]:
    """Each member's model (its checkpoints averaged, as load_for_inference does), checked to
    share one BPE model: an ensemble averages probabilities of the same token ids.

    Returns:
        (models, the shared tokenizer, each member's training config)

    Raises:
        CheckpointError: two members' BPE models differ (the message names one file of each).
    """
    from rpr_nmt.checkpoint.state import CheckpointError

    if not members:
        raise ValueError("an ensemble needs at least one member")
    models, configs, first = [], [], None
    for paths in members:
        model, tokenizer, config = load_for_inference(paths, device, use_ema=use_ema)
        if first is None:
            first = (tokenizer, paths[0])
        elif tokenizer.sha256 != first[0].sha256:
            raise CheckpointError(
                f"ensemble members {first[1]} and {paths[0]} have different BPE models "
                "(vocabularies): ensemble only models trained on one prepared corpus"
            )
        models.append(model)
        configs.append(config)
    return models, first[0], configs
