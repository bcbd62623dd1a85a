"""Dropout whose masks cost a quarter of the random numbers on CPU.

PyTorch's CPU dropout draws one Bernoulli sample per element from its Mersenne Twister, which made
mask generation 17% of a bf16 transformer_small training step (docs/performance.md, "Training").
Here one 64-bit random word decides four elements: each 16-bit lane is compared with
round(p * 65536), so an element is dropped with probability p rounded to a multiple of 1/65536
(0.1 becomes 0.100006). As with F.dropout, the backward pass multiplies by the saved mask.
Draws come from torch's default generator, so seeding and checkpointed RNG states cover them.
Under arithmetic 2's CPU autocast (arithmetic.py) NumPy's SFC64 draws the words instead, about twice
as fast, from a seed that is one draw of torch's default generator.
On CUDA, F.dropout's fused Philox kernel is already cheap and is used as it is, and so is F.dropout
under torch.compile, whose inductor generates the masks inside its fused kernels.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rpr_nmt.model.arithmetic import numpy_masks

__all__ = ["Dropout", "dropout", "dropout_mask", "keep_mask", "numpy_words", "words_for"]

_LANES = 4  # 16-bit lanes per 64-bit random word
_INT16_MIN = -(2**15)


def _check_rate(p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")


def words_for(numel: int) -> int:
    """How many 64-bit random words a mask of `numel` elements draws: one per four elements."""
    return -(-numel // _LANES)


def keep_mask(words: Tensor, shape: torch.Size | tuple[int, ...], p: float) -> Tensor:
    """Bool mask of `shape` from uniformly random int64 `words` (words_for its size): True (keep)
    with probability 1 - p, p rounded to a multiple of 2^-16.

    Each int16 lane of a word is uniform on [-2^15, 2^15); it is dropped when it falls among the
    round(p * 2^16) lowest values.
    """
    numel = math.prod(shape)
    lanes = words.view(torch.int16)[:numel].view(shape)
    return lanes >= _INT16_MIN + round(p * 2**16)


def dropout_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device) -> Tensor:
    """Bool mask of `shape`, True (keep) with probability 1 - p: keep_mask of words drawn from
    torch's default generator, or under arithmetic 2's CPU autocast by numpy_words."""
    words = words_for(math.prod(shape))
    if device.type == "cpu" and numpy_masks():
        return keep_mask(numpy_words(words), shape, p)
    bits = torch.empty(words, dtype=torch.int64, device=device).random_(-(2**63), None)
    return keep_mask(bits, shape, p)


def numpy_words(n: int) -> Tensor:
    """`n` uniformly random int64 words from NumPy's SFC64, seeded by one 63-bit draw of torch's
    default CPU generator (so torch.manual_seed and torch's RNG state decide them)."""
    seed = int(torch.randint(2**63 - 1, (), dtype=torch.int64))
    raw = np.random.Generator(np.random.SFC64(seed)).bit_generator.random_raw(n)  # uint64
    return torch.from_numpy(raw.view(np.int64))


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Inverted dropout: zero each element with probability p, scale the rest by 1 / (1 - p).

    Same contract as F.dropout; on CPU the mask comes from dropout_mask.
    """
    if not training or p == 0.0:
        return x
    _check_rate(p)
    if x.device.type != "cpu" or torch.compiler.is_compiling():
        # CUDA's fused Philox kernel is cheap; under torch.compile inductor draws its own masks in
        # the fused kernel, where dropout_mask's int64 draw would break the graph at every dropout.
        return F.dropout(x, p, training=True)
    keep = dropout_mask(x.shape, p, x.device)
    # bool -> uint8 is a free view, and uint8 -> float a fast cast, where bool arithmetic and
    # torch.where take CPU paths 5-8x slower than a multiply. Autograd keeps the multiplier.
    multiplier = keep.view(torch.uint8).to(x.dtype).mul_(1.0 / (1.0 - p))
    return x * multiplier


class Dropout(nn.Module):
    """nn.Dropout with the cheaper CPU masks of `dropout`."""

    def __init__(self, p: float) -> None:
        super().__init__()
        _check_rate(p)
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
