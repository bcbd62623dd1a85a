"""The random-number states that make resume exact: torch (CPU and CUDA), Python and numpy.

Each rank draws its own dropout masks, so a checkpoint keeps every rank's states
(TrainingState.rng_per_rank). Everything is a tensor or a plain Python value, which
torch.load(weights_only=True) reads.
"""

from __future__ import annotations

import random
from typing import Any

import torch
import torch.distributed as dist

from rpr_nmt.train.distributed import DistributedContext


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


def gather_rng(ctx: DistributedContext) -> list[dict[str, Any]]:
    """Every rank's random states, indexed by rank (each rank draws its own dropout masks)."""
    state = rng_state()
    if not ctx.distributed:
        return [state]
    states: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(states, state)
    return states


def restore_rng(per_rank: list[dict[str, Any]], ctx: DistributedContext) -> None:
    """Restore this rank's random states (rank 0's when the world size changed)."""
    set_rng_state(per_rank[ctx.rank] if len(per_rank) == ctx.world_size else per_rank[0])
