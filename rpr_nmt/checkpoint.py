"""Checkpoints: atomic writes, safe loading, averaging, and loading a model for inference.

A checkpoint is a plain dict saved with torch.save and read back with torch.load(weights_only=True),
so that loading a file never executes code. Keys (docs/architecture.md): model, config, bpe_model,
bpe_sha256, step, optimizer, scheduler, scaler, data_state, rng, best.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable or foreign; the message says which and what to do."""


def save_checkpoint(state: dict[str, Any], path: str | Path) -> Path:
    """Write `state` to `path` atomically: a temporary file in the same folder, fsync, then rename.

    A crash at any moment leaves either the previous file or the new one, never a truncated one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint with weights_only=True; CheckpointError names the file on any problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(
            f"checkpoint not found: {path} (a training run writes them to RUN_DIR/checkpoints/*.pt)"
        )
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch raises several types for truncated or foreign files
        raise CheckpointError(f"cannot read checkpoint {path}: {e}") from e
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path} is not an rpr-nmt checkpoint (no 'model' entry)")
    return state


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """Average model parameters over checkpoints of one run (as the paper's big model did).

    Returns the newest checkpoint's dict (by step) with its `model` entry replaced by the average
    and its optimizer state dropped, since an averaged model has no matching optimizer state.
    """
    if not paths:
        raise CheckpointError("no checkpoints given to average")
    states = [load_checkpoint(p) for p in paths]
    reference = states[0]["model"]
    for p, s in zip(paths[1:], states[1:]):
        if s["model"].keys() != reference.keys() or any(
            s["model"][n].shape != t.shape for n, t in reference.items()
        ):
            raise CheckpointError(f"{p} holds another model than {paths[0]}: cannot average")
    averaged = {}
    for name, tensor in reference.items():
        if tensor.is_floating_point():
            total = torch.stack([s["model"][name].double() for s in states]).mean(dim=0)
            averaged[name] = total.to(tensor.dtype)
        else:
            averaged[name] = tensor.clone()
    newest = max(states, key=lambda s: s.get("step", 0))
    result = {k: v for k, v in newest.items() if k not in ("optimizer", "scheduler", "scaler")}
    result["model"] = averaged
    result["averaged_from"] = [str(p) for p in paths]
    return result


def load_for_inference(
    paths: str | Path | Sequence[str | Path], device: str | torch.device = "cpu"
) -> tuple[torch.nn.Module, Any, dict[str, Any]]:
    """Build a checkpoint's model (or several averaged) in eval mode, with its own BPE model.

    Returns:
        (model, tokenizer, config) where config is the composed job config the run was trained with.
    """
    from rpr_nmt.data import Tokenizer
    from rpr_nmt.model import build_model

    if isinstance(paths, (str, Path)):
        paths = [paths]
    state = average_checkpoints(paths) if len(paths) > 1 else load_checkpoint(paths[0])
    tokenizer = Tokenizer.from_proto(state["bpe_model"])
    vocab_size, pad_id = tokenizer.vocab_size, tokenizer.pad_id
    model = build_model(state["config"]["model"], vocab_size=vocab_size, pad_id=pad_id)
    model.load_state_dict(state["model"])
    model.to(device).eval()
    return model, tokenizer, state["config"]
