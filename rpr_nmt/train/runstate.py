"""A run directory's checkpoints/ folder, and the random-number states that make resume exact.

    checkpoints/step_0001000.pt  every train.save_every updates, at a new best and at the end;
                                 the newest max(keep_last, average_last) stay
    checkpoints/last.pt          the newest step checkpoint (a hard link, or a copy)
    checkpoints/best.pt          the best one by train.best_metric
    checkpoints/averaged.pt      the average of the last train.average_last step checkpoints

Everything stored is a tensor or a plain Python value: torch.load(weights_only=True) reads it.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import tempfile
from copy import deepcopy
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from rpr_nmt.checkpoint import CheckpointError, average_checkpoints, save_checkpoint
from rpr_nmt.train.distributed import DistributedContext

log = logging.getLogger("rpr_nmt.train")

STEP_PATTERN = re.compile(r"^step_(\d+)\.pt$")


def rng_state() -> dict[str, Any]:
    """The torch CPU, CUDA, Python and numpy random states as tensors and plain lists."""
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": _to_lists(random.getstate()),
    }
    try:
        import numpy as np

        name, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = [name, keys.tolist(), int(pos), int(has_gauss), float(cached)]
    except ImportError:  # numpy is optional for training itself
        pass
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what rng_state() captured (CUDA states only when the same devices exist)."""
    torch.set_rng_state(state["torch"].cpu())
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])
    random.setstate(_to_tuples(state["python"]))
    if "numpy" in state:
        import numpy as np

        name, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))


def _to_lists(value: Any) -> Any:
    return [_to_lists(v) for v in value] if isinstance(value, (tuple, list)) else value


def _to_tuples(value: Any) -> Any:
    return tuple(_to_tuples(v) for v in value) if isinstance(value, list) else value


def step_path(checkpoint_dir: Path, step: int) -> Path:
    """checkpoints/step_XXXXXXX.pt for an update number."""
    return checkpoint_dir / f"step_{step:07d}.pt"


def step_checkpoints(checkpoint_dir: Path) -> list[Path]:
    """The step checkpoints of a folder, oldest first."""
    if not checkpoint_dir.is_dir():
        return []
    found = [
        (int(m.group(1)), p) for p in checkpoint_dir.iterdir() if (m := STEP_PATTERN.match(p.name))
    ]
    return [p for _, p in sorted(found)]


def link_atomically(source: Path, target: Path) -> None:
    """Make `target` name the same file as `source` (hard link, else a copy), atomically."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    os.unlink(tmp)
    try:
        try:
            os.link(source, tmp)
        except OSError:  # file systems without hard links
            shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def prune_step_checkpoints(checkpoint_dir: Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` step checkpoints; returns the deleted paths.

    last.pt and best.pt are separate links: they survive the deletion of their step file.
    """
    old = step_checkpoints(checkpoint_dir)[: -max(keep_last, 1)]
    for path in old:
        path.unlink(missing_ok=True)
    return old


def is_better(metric: str, value: float, best: float | None) -> bool:
    """Whether a validation figure beats the best so far: lower loss, or higher BLEU."""
    if value != value:  # NaN never wins
        return False
    if best is None:
        return True
    return value < best if metric == "loss" else value > best


def write_checkpoint(
    state: dict[str, Any], checkpoint_dir: Path, *, keep_last: int, is_best: bool
) -> Path:
    """Save step_XXXXXXX.pt atomically, point last.pt (and best.pt) at it, prune old steps."""
    path = save_checkpoint(state, step_path(checkpoint_dir, state["step"]))
    link_atomically(path, checkpoint_dir / "last.pt")
    if is_best:
        link_atomically(path, checkpoint_dir / "best.pt")
    prune_step_checkpoints(checkpoint_dir, keep_last)
    return path


def check_compatible(
    state: dict[str, Any], config: dict[str, Any], bpe_sha256: str, path: Path
) -> None:
    """Refuse to resume a checkpoint of another model or BPE model (CheckpointError says how)."""
    saved = state.get("config") or {}
    if saved.get("model") != config["model"]:
        changed = sorted(
            k for k in config["model"] if (saved.get("model") or {}).get(k) != config["model"][k]
        )
        raise CheckpointError(
            f"{path} was trained with another model config (differs in {changed}); "
            "use a new run directory (hydra.run.dir=...) or the original model settings"
        )
    if state.get("bpe_sha256") != bpe_sha256:
        raise CheckpointError(
            f"{path} was trained with another BPE model (sha256 {state.get('bpe_sha256')}, now "
            f"{bpe_sha256}); use a new run directory or the original data settings"
        )


def gather_rng(ctx: DistributedContext) -> list[dict[str, Any]]:
    """Every rank's random states, indexed by rank (each rank draws its own dropout masks)."""
    state = rng_state()
    if not ctx.distributed:
        return [state]
    states: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(states, state)
    return states


def restore_rng(state: dict[str, Any], ctx: DistributedContext) -> None:
    """Restore this rank's random states (rank 0's when the world size changed)."""
    per_rank = state.get("rng_per_rank") or [state["rng"]]
    set_rng_state(per_rank[ctx.rank] if len(per_rank) == ctx.world_size else per_rank[0])


def average_last(
    checkpoint_dir: Path, n: int, model: torch.nn.Module
) -> tuple[Path, torch.nn.Module]:
    """Average the newest `n` step checkpoints into checkpoints/averaged.pt.

    Args:
        checkpoint_dir: the run's checkpoints/ folder.
        n: how many of the newest step checkpoints to average (fewer when fewer are kept).
        model: a model of the run's architecture; a copy receives the averaged weights.

    Returns:
        (path of averaged.pt, the copy of `model` holding the averaged weights).
    """
    paths = step_checkpoints(checkpoint_dir)[-n:]
    if len(paths) < n:
        log.warning(
            "train.average_last=%d but only %d step checkpoints are kept (train.keep_last); "
            "averaging those", n, len(paths),
        )  # fmt: skip
    averaged = average_checkpoints(paths)
    out = save_checkpoint(averaged, checkpoint_dir / "averaged.pt")
    log.info("averaged %d checkpoints into %s", len(paths), out)
    copy = deepcopy(model)
    copy.load_state_dict(averaged["model"])
    return out, copy
