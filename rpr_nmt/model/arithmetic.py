"""Which reduced-precision arithmetic the model computes with under autocast.

Arithmetic 1 is what every published bf16 run trained with: autocast casts each projection's input
to bf16 itself (q, k and v each cast the same layer-norm output), and dropout's masks come from
torch's default generator. Arithmetic 2 takes two costs out of a bf16 CPU update
(docs/performance.md, "bf16 near its ceiling"):

- an attention input that several projections read is cast once: the forward values are the same,
  but in the backward its gradients are summed in bf16 before their cast to float32;
- under CPU autocast, dropout's mask words are drawn by NumPy's SFC64 (about half the time of
  torch's Mersenne Twister), seeded by one draw of torch's default generator, so torch.manual_seed
  and a checkpoint's RNG state still decide every mask.

Both act only under autocast, so fp32 computes the same numbers under either, and only eagerly:
under torch.compile inductor fuses the casts and draws its own masks (dropout.py). The trainer
enters `use_arithmetic(train.arithmetic)` beside autocast; the model reads it through the predicates
below.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor

__all__ = [
    "ARITHMETICS", "NEWEST", "casts_shared_inputs", "current", "numpy_masks", "use_arithmetic",
]  # fmt: skip

ARITHMETICS = (1, 2)
NEWEST = ARITHMETICS[-1]  # what train.arithmetic=null gives a new run
_current: ContextVar[int] = ContextVar("rpr_nmt_arithmetic", default=1)


@contextmanager
def use_arithmetic(arithmetic: int) -> Iterator[None]:
    """Compute with `arithmetic` (1 or 2) inside the block."""
    if arithmetic not in ARITHMETICS:
        raise ValueError(f"arithmetic must be one of {ARITHMETICS}, got {arithmetic!r}")
    token = _current.set(arithmetic)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> int:
    """The arithmetic in force: 1 outside any use_arithmetic block."""
    return _current.get()


def casts_shared_inputs(x: Tensor) -> torch.dtype | None:
    """The dtype to cast an input shared by several projections to, once, or None to let autocast
    cast it per projection (arithmetic 1, autocast off, or `x` already in that dtype)."""
    device = x.device.type
    if torch.compiler.is_compiling() or _current.get() < 2 or not torch.is_autocast_enabled(device):
        return None
    dtype = torch.get_autocast_dtype(device)
    return None if x.dtype == dtype or not x.is_floating_point() else dtype


def numpy_masks() -> bool:
    """Whether CPU dropout draws its mask words with NumPy (arithmetic 2 under CPU autocast)."""
    return _current.get() >= 2 and torch.is_autocast_enabled("cpu")
