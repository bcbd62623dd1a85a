"""The speed work behind relative_attention (attention.py), kept out of the paper's equations.

- fused_kernel_applies / fused_attention: without relative terms, PyTorch's fused
  scaled_dot_product_attention (less memory; flash / memory-efficient kernels on CUDA).
- TableWindow: the table rows r_ij = clip(j - i, k) + k can take for given query and key positions.
  Slicing w^K, w^V to them makes both position terms cheaper: a causal decoder only uses rows
  -k..0, and sequences shorter than k fewer than 2k + 1 rows.
- hidden_keys: the boolean mask of the keys a query must not see (future keys, padding).

Shape legend: as in attention.py (B batch, H heads, Tq / Tk query / key lengths, Dh head dim).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["TableWindow", "fused_attention", "fused_kernel_applies", "hidden_keys"]

# Up to this many queries per batch row take relative_attention's own path, not SDPA.
FEW_QUERIES = 8


def fused_kernel_applies(q_len: int, *, relative: bool) -> bool:
    """Whether relative_attention hands over to PyTorch's fused kernel: only without relative terms.

    a^K alone stays on relative_attention's own path: as an SDPA float mask that needs gradients
    it falls back to SDPA's unfused math path on CPU (docs/performance.md, "Attention"). A few
    queries per row (a decoding step: one per beam) stay there too: the CPU flash kernel's
    per-(row, head) set-up dominates then (2-4x slower).
    """
    return not relative and q_len > FEW_QUERIES


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    key_padding_mask: Tensor | None,
    q_offset: int,
    dropout_p: float,
    bias: Tensor | None = None,
) -> Tensor:
    """Plain attention softmax(q k^T / sqrt(Dh) + bias) v through F.scaled_dot_product_attention.

    Arguments as relative_attention's. A full causal square without padding or bias uses SDPA's
    is_causal (no mask tensor at all). A bias becomes SDPA's float mask, -inf on hidden keys, so
    that they keep exactly zero weight.

    Shapes:
        q: (B, H, Tq, Dh); k, v: (B, H, Tk, Dh); key_padding_mask: (B, Tk); bias: (H, Tq, Tk);
        returns (B, H, Tq, Dh).
    """
    Tq, Tk = q.size(-2), k.size(-2)
    plain_causal = (
        causal and key_padding_mask is None and q_offset == 0 and Tq == Tk and bias is None
    )
    hidden = None
    if not plain_causal:
        hidden = hidden_keys(
            Tq, Tk, causal=causal, key_padding_mask=key_padding_mask, q_offset=q_offset,
            device=q.device,
        )  # fmt: skip
    mask = None if hidden is None else ~hidden  # (B or 1, 1, Tq, Tk), True = visible
    if bias is not None:
        mask = bias[None]  # (1, H, Tq, Tk)
        if hidden is not None:
            mask = mask.masked_fill(hidden, float("-inf"))  # (B or 1, H, Tq, Tk)
    return F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=mask,
        dropout_p=dropout_p,
        is_causal=plain_causal,
    )  # (B, H, Tq, Dh)


class TableWindow(NamedTuple):
    """Table rows first..last: all the rows r_ij takes for the queries and keys of one call."""

    first: int
    last: int

    @classmethod
    def of(
        cls, q_len: int, k_len: int, max_relative_position: int, q_offset: int, *, causal: bool
    ) -> TableWindow:
        """The window of queries at q_offset .. q_offset + q_len - 1 and keys at 0 .. k_len - 1.

        With causal attention the rows of future keys (j > i) are left out: those keys are hidden.
        """
        k = max_relative_position
        nearest = -(q_offset + q_len - 1)  # smallest j - i: last query, first key
        farthest = k_len - 1 - q_offset  # largest j - i: first query, last key
        if causal:
            farthest = min(farthest, 0)
        first = max(-k, min(k, nearest)) + k
        last = max(-k, min(k, farthest)) + k
        return cls(first, max(first, last))

    def rows(self, table: Tensor | None) -> Tensor | None:
        """The table's rows in the window: (R, Dh) -> (R', Dh), (H, R, Dh) -> (H, R', Dh)."""
        return None if table is None else table[..., self.first : self.last + 1, :]

    def shift(self, index: Tensor) -> Tensor:
        """Table rows (Tq, Tk) counted from the window's first row.

        Rows outside the window (only those of hidden keys) are clamped into it.
        """
        return (index - self.first).clamp_(0, self.last - self.first)


def hidden_keys(
    q_len: int,
    k_len: int,
    *,
    causal: bool,
    key_padding_mask: Tensor | None,
    q_offset: int,
    device: torch.device,
) -> Tensor | None:
    """Boolean mask, True where a query must not see a key; None when every key is visible.

    Shapes:
        key_padding_mask: (B, Tk), True = padding. Returns (B or 1, 1, Tq, Tk).
    """
    hidden = None
    if causal and k_len - 1 > q_offset:  # else even the first query sees every key
        query_pos = torch.arange(q_offset, q_offset + q_len, device=device)
        future = torch.arange(k_len, device=device)[None, :] > query_pos[:, None]  # (Tq, Tk)
        hidden = future[None, None]  # (1, 1, Tq, Tk)
    if key_padding_mask is not None:
        padding = key_padding_mask[:, None, None, :]  # (B, 1, 1, Tk)
        hidden = padding if hidden is None else hidden | padding  # (B, 1, Tq, Tk)
    return hidden
