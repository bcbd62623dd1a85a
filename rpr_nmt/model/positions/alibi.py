"""Attention with linear biases: Press, Smith & Lewis (2022), "Train Short, Test Long", sec. 3.

Shape legend: H heads, Tq / Tk query / key lengths.

ALiBi adds no position vector anywhere; each head h penalises a query-key logit linearly in their
distance, with a fixed slope m_h:

    softmax(q_i K^T / sqrt(Dh) + m_h [-(i - 1), ..., -2, -1, 0])        (sec. 3, causal)

i.e. a bias -m_h (i - j) on the keys j <= i a decoder query i sees. The paper defines only this
causal form. In the encoder, where a query sees keys on both sides, we use the symmetric
-m_h |i - j|, as OpenNMT-py does. Both are -m_h |i - j| over the visible keys, so one bias serves
both stacks; the causal mask hides the decoder's future keys.

Slopes: for H a power of two, the geometric sequence that starts at 2^(-8 / H) with that ratio
(1/2, 1/4, ..., 1/256 for 8 heads). For other H, the paper's reference code takes the slopes of
the closest smaller power of two, P, then every other slope of 2P for the remaining H - P heads.

Distances count from absolute positions: a decoding step's lone query sits at q_offset, never at
row 0 of a bias built for a training-shaped call.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["ALiBi", "alibi_slopes"]


def alibi_slopes(n_heads: int) -> list[float]:
    """The paper's slope m_h of every head (sec. 3 and its reference code)."""
    if n_heads < 1:
        raise ValueError(f"ALiBi needs at least one head, got n_heads={n_heads}")
    power = 2 ** math.floor(math.log2(n_heads))  # the closest power of two not above H
    slopes = [2.0 ** (-8.0 * (h + 1) / power) for h in range(power)]
    # The remaining heads: slopes 1, 3, 5, ... of the sequence for 2P heads (ratio 2^(-8 / 2P)).
    extra = [2.0 ** (-8.0 * (2 * h + 1) / (2 * power)) for h in range(n_heads - power)]
    return slopes + extra


class ALiBi(nn.Module):
    """ALiBi's bias for one stack: fixed slopes, no parameters."""

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.slopes = alibi_slopes(n_heads)

    def bias(self, q_len: int, k_len: int, q_offset: int, device: torch.device) -> Tensor:
        """-m_h |i - j| for queries at q_offset .. q_offset + q_len - 1 and keys at 0 .. k_len - 1.

        Returns:
            Float32 bias (H, Tq, Tk), shared by every row of the batch.
        """
        query_pos = torch.arange(q_offset, q_offset + q_len, device=device)  # (Tq,)
        key_pos = torch.arange(k_len, device=device)  # (Tk,)
        distance = (query_pos[:, None] - key_pos[None, :]).abs().float()  # (Tq, Tk)
        slopes = torch.tensor(self.slopes, device=device)  # (H,)
        return -slopes[:, None, None] * distance[None]  # (H, Tq, Tk)

    def extra_repr(self) -> str:
        return f"n_heads={len(self.slopes)}"
