"""Loading a checkpoint (or the average of several, or an ensemble's members) as a ready model
for translation, checked to be one translation direction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from rpr_nmt.checkpoint.run_folder import average_checkpoints, file_identity
from rpr_nmt.checkpoint.state import CheckpointError, TrainingState, load_checkpoint
from rpr_nmt.config import TrainJobConfig
from rpr_nmt.data import Tokenizer
from rpr_nmt.model import Transformer, build_model


@dataclass
class InferenceModel:
    """A checkpoint's model in eval mode, its BPE model, its training config, and which weights
    it holds: "ema" (the checkpoint's moving average) or "raw" (the trained weights)."""

    model: Transformer
    tokenizer: Tokenizer
    config: TrainJobConfig
    weights: str


def loaded_weights(state: TrainingState, use_ema: bool) -> str:
    """Which weights state.weights(use_ema) gives, as a record names them: "ema" only when they
    were asked for and the checkpoint has an average, else "raw". Records say what was loaded,
    not what was asked, so that evaluate, export and inspect agree about one file."""
    return "ema" if use_ema and state.ema is not None else "raw"


def load_inference_model(
    paths: str | Path | Sequence[str | Path],
    device: str | torch.device = "cpu",
    *,
    use_ema: bool = True,
) -> InferenceModel:
    """Build a checkpoint's model (several are averaged) in eval mode, with its own BPE model.

    The model gets the checkpoint's moving average of the weights when it has one (a run with
    train.ema_decay > 0) and `use_ema`, else the trained weights; InferenceModel.weights says
    which. Loading stays weights_only (rpr_nmt.checkpoint.state.load_checkpoint).

    Raises:
        CheckpointError: an unreadable file, or checkpoints to average that translate different
            language pairs (check_one_direction) or hold different models.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if len(paths) > 1:
        check_one_direction(paths, "average")
    state = average_checkpoints(paths) if len(paths) > 1 else load_checkpoint(paths[0])
    tokenizer = Tokenizer.from_proto(state.bpe_model)
    model = build_model(
        state.config.model, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id
    )
    model.load_state_dict(state.weights(use_ema))
    model.to(device).eval()
    return InferenceModel(model, tokenizer, state.config, loaded_weights(state, use_ema))


def load_for_inference(
    paths: str | Path | Sequence[str | Path],
    device: str | torch.device = "cpu",
    *,
    use_ema: bool = True,
) -> tuple[Transformer, Tokenizer, TrainJobConfig]:
    """load_inference_model as a tuple.

    Returns:
        (model, tokenizer, config) where config is the job config the run was trained with.
    """
    loaded = load_inference_model(paths, device, use_ema=use_ema)
    return loaded.model, loaded.tokenizer, loaded.config


def language_pair(config: TrainJobConfig) -> str:
    """The direction a model translates, e.g. "en-de"."""
    return f"{config.data.src_lang}-{config.data.tgt_lang}"


def check_one_direction(paths: Sequence[str | Path], what: str) -> None:
    """Refuse checkpoints of different language pairs: a joint BPE model is the same for en->de
    and de->en, so only the pair in each checkpoint's config tells the directions apart.

    Reads only each file's config (the tensors are memory-mapped, not read); a file that cannot
    be read that way is left to the full load, which names the problem.

    Raises:
        CheckpointError: two files translate different pairs (names both files and pairs).
    """
    first: tuple[str | Path, str] | None = None
    for path in paths:
        pair = _stored_pair(path)
        if pair is None:
            continue
        if first is None:
            first = (path, pair)
        elif pair != first[1]:
            raise CheckpointError(
                f"cannot {what} {first[0]} ({first[1]}) with {path} ({pair}): they translate "
                f"different language pairs; {what} only models of one direction"
            )


def _stored_pair(path: str | Path) -> str | None:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        data = state["config"]["data"]
        return f"{data['src_lang']}-{data['tgt_lang']}"
    except Exception:  # not a readable checkpoint: the full load says why
        return None


def load_ensemble_members(
    members: Sequence[Sequence[str | Path]],
    device: str | torch.device = "cpu",
    *,
    use_ema: bool = True,
) -> list[InferenceModel]:
    """Each member's model (its checkpoints averaged, as load_inference_model does), checked to
    be distinct, to translate one language pair and to share one BPE model: an ensemble averages
    probabilities of the same token ids for the same source language.

    Returns:
        Per member its InferenceModel; their tokenizers are one BPE model.

    Raises:
        CheckpointError: a member named twice, two members of different language pairs, or
            with different BPE models (the message names a file of each).
    """
    if not members:
        raise ValueError("an ensemble needs at least one member")
    check_distinct(members)
    loaded: list[InferenceModel] = []
    for paths in members:
        member = load_inference_model(paths, device, use_ema=use_ema)
        if loaded:
            first, first_path = loaded[0], members[0][0]
            pair, first_pair = language_pair(member.config), language_pair(first.config)
            if pair != first_pair:
                raise CheckpointError(
                    f"ensemble members {first_path} ({first_pair}) and {paths[0]} ({pair}) "
                    "translate different language pairs: ensemble only models of one direction"
                )
            if member.tokenizer.sha256 != first.tokenizer.sha256:
                raise CheckpointError(
                    f"ensemble members {first_path} and {paths[0]} have different BPE models "
                    "(vocabularies): ensemble only models trained on one prepared corpus"
                )
        loaded.append(member)
    return loaded


def check_distinct(members: Sequence[Sequence[str | Path]]) -> None:
    """Refuse a member named twice (the same files, however written): an ensemble of a model with
    itself is that model, and the record would claim more models than it used.

    Files are compared by identity (device and inode), not by name: a run's last.pt, best.pt and
    step_*.pt are hard links to one file, which no resolved path tells apart. `members` are the
    files themselves (a run folder already turned into its checkpoints).

    Raises:
        CheckpointError: two members with the same files (names both and how each was written).
    """
    seen: dict[tuple[object, ...], int] = {}
    for number, paths in enumerate(members, start=1):
        key = tuple(file_identity(p) for p in paths)
        if key in seen:
            first, again = str(members[seen[key] - 1][0]), str(paths[0])
            named = again if first == again else f"{first} and {again} are one file"
            raise CheckpointError(
                f"ensemble members {seen[key]} and {number} are the same checkpoint ({named}): "
                "name each model once"
            )
        seen[key] = number
