"""Relation-aware self-attention: Shaw, Uszkoreit & Vaswani (2018), eq. 3 and 4.

Shape legend (batch-first everywhere):
    B batch, S source length, T target length, H heads, Dh head dim, D model dim (H * Dh),
    V vocabulary, R = 2k + 1 relative positions (k = max_relative_position), N beam.
    Tq / Tk: query / key lengths (T / T in self-attention).

The paper adds learned edge vectors to the keys and values of one head:

    e_ij     = q_i . (k_j + a^K_ij) / sqrt(Dh)              (eq. 4)
    alpha_ij = softmax_j(e_ij)
    z_i      = sum_j alpha_ij (v_j + a^V_ij)                 (eq. 3)

    a^K_ij = w^K[r_ij],  a^V_ij = w^V[r_ij]                  (edge vectors, clipped at distance k)
    r_ij   = clip(j - i, k) + k,  clip(x, k) = max(-k, min(k, x))

Each sum splits into a content term (ordinary attention) and a position term. The position terms
see only R distinct table rows, so they are computed per row, never through an (n, n, Dh) tensor:

    position logits  q_i . a^K_ij = (q_i . w^K^T)[r_ij]          gather from (B, H, Tq, R)
    position output  sum_j alpha_ij a^V_ij = sum_r bucket_ir w^V[r],
                     bucket_ir = sum_{j: r_ij = r} alpha_ij      bucket-sum alpha into (B, H, Tq, R)

Memory: O(Tq Tk) for the attention matrix (as in plain attention) plus O(Tq R); never O(Tq Tk Dh).
The speed work around these equations lives in attention_kernels.py (PyTorch's fused kernel when
no table is used, tables sliced to the rows that occur, the products with the table rows, on CUDA
both terms built per diagonal j - i instead of by gather and scatter-add, the mask of hidden
keys); projections, tables and the decoding cache in multihead.py and cache.py. r_ij is the same
for every layer of a stack: the stack builds it once per forward (ShawPairs, transformer.py).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from rpr_nmt.model.attention_kernels import (
    ByQuery,
    Diagonals,
    PairRows,
    TableWindow,
    by_query_applies,
    diagonals_apply,
    fused_attention,
    fused_kernel_applies,
    hidden_keys,
    position_logits,
    position_output,
)
from rpr_nmt.model.dropout import dropout

__all__ = ["ShawPairs", "relative_attention", "relative_position_index", "shaw_pairs"]


def relative_position_index(
    q_len: int,
    k_len: int,
    max_relative_position: int,
    q_offset: int = 0,
    *,
    device: torch.device | str | None = None,
) -> Tensor:
    """Table row of every (query, key) pair: r_ij = clip(j - (i + q_offset), k) + k.

    Args:
        q_len: number of queries; query i sits at absolute position q_offset + i.
        k_len: number of keys; key j sits at absolute position j.
        max_relative_position: k, the clipping distance.
        q_offset: absolute position of the first query (the decoder cache length when decoding).
        device: where to build the index.

    Returns:
        LongTensor (q_len, k_len) with values in [0, 2k].
    """
    query_pos = torch.arange(q_offset, q_offset + q_len, device=device)  # (Tq,)
    key_pos = torch.arange(k_len, device=device)  # (Tk,)
    distance = key_pos[None, :] - query_pos[:, None]  # (Tq, Tk)
    k = max_relative_position
    return distance.clamp(-k, k) + k


class ShawPairs(NamedTuple):
    """The table row r_ij of every (query, key) pair of one self-attention call, and the window of
    rows that occur: what both of Shaw's terms index with. A stack builds it once per forward for
    all its layers (PositionTerms.pairs); relative_attention builds it when it is given none.

    Attributes:
        window: the table rows that occur (TableWindow); the tables are sliced to it.
        rows: r_ij counted from window.first, (Tq, Tk) for gather and scatter_add, by diagonal
            j - i (Diagonals: CUDA's path for long sequences), or for the paper's own form
            (ByQuery: BY_QUERY_DEVICES).
        built_for: (Tq, Tk, k, q_offset, causal) of the calls it serves.
    """

    window: TableWindow
    rows: Tensor | Diagonals | ByQuery
    built_for: tuple[int, int, int, int, bool]

    def of_batch(self, batch: int, heads: int) -> PairRows | Diagonals | ByQuery:
        """r_ij of every pair of a (B, H, Tq, Tk) block: a view of the one (Tq, Tk) index."""
        if isinstance(self.rows, (Diagonals, ByQuery)):
            return self.rows
        return PairRows(self.rows.expand(batch, heads, *self.rows.shape))  # (B, H, Tq, Tk)


def shaw_pairs(
    q_len: int,
    k_len: int,
    max_relative_position: int,
    q_offset: int,
    *,
    causal: bool,
    device: torch.device,
) -> ShawPairs:
    """r_ij of queries at q_offset .. q_offset + q_len - 1 and keys at 0 .. k_len - 1.

    Only table rows first..last occur: the tables are sliced to them and r_ij counted from the
    first. By diagonal on CUDA above DIAGONALS_ABOVE queries (no scatter-adds), else an index,
    for gather or, on BY_QUERY_DEVICES, for the paper's form.
    """
    k = max_relative_position
    if torch.compiler.is_compiling():
        # Traced with symbolic lengths, the window's clipped bounds break inductor (torch 2.13:
        # "Exponent must be non-negative"); the whole table computes the same terms.
        window = TableWindow.whole(k)
    else:
        window = TableWindow.of(q_len, k_len, k, q_offset, causal=causal)
    if diagonals_apply(device, q_len):
        rows = Diagonals.of_window(q_len, k_len, k, q_offset, window)
    else:
        rows = window.shift(relative_position_index(q_len, k_len, k, q_offset, device=device))
        if by_query_applies(device):
            rows = ByQuery(rows)
    return ShawPairs(window, rows, (q_len, k_len, k, q_offset, causal))


def relative_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    rel_keys: Tensor | None = None,
    rel_values: Tensor | None = None,
    max_relative_position: int = 0,
    causal: bool = False,
    key_padding_mask: Tensor | None = None,
    q_offset: int = 0,
    dropout_p: float = 0.0,
    bias: Tensor | None = None,
    pairs: ShawPairs | None = None,
) -> Tensor:
    """Scaled dot-product attention with the paper's relative position terms (eq. 3 and 4).

    Args:
        q: queries, already projected and split into heads.
        k: keys.
        v: values.
        rel_keys: w^K, one table shared across heads (R, Dh) or one per head (H, R, Dh);
            None = no a^K term.
        rel_values: w^V, same shapes as rel_keys; None = no a^V term.
        max_relative_position: k, the clipping distance; 0 switches both relative terms off.
        causal: the query at absolute position q_offset + i sees only keys j <= q_offset + i.
        key_padding_mask: True where a key is padding; such keys get zero weight.
        q_offset: absolute position of the first query; keys start at position 0.
        dropout_p: dropout on the attention weights alpha (pass 0.0 in evaluation).
        bias: another relative method's term added to the logits (ALiBi, T5: positions/terms.py),
            for queries from q_offset and keys from 0; shared by the batch. None = no bias.
        pairs: r_ij for these lengths, k, q_offset and causal, built once for a stack's layers
            (shaw_pairs); None = built here. Not used under torch.compile, which builds its own.

    Returns:
        z, the attention output per head.

    Raises:
        ValueError: an argument of another shape or dtype than below (tables: R = 2k + 1 rows in
            q's dtype; key_padding_mask: bool), or q_offset < 0, naming the argument.

    Shapes:
        q: (B, H, Tq, Dh); k, v: (B, H, Tk, Dh); key_padding_mask: (B, Tk); bias: (H, Tq, Tk);
        returns (B, H, Tq, Dh).
    """
    if max_relative_position < 0:
        raise ValueError(
            f"max_relative_position must be >= 0 (0 = off), got {max_relative_position}"
        )
    if max_relative_position == 0:
        rel_keys = rel_values = None
    _check_arguments(q, k, v, rel_keys, rel_values, max_relative_position, key_padding_mask,
                     q_offset, bias)  # fmt: skip
    B, H, Tq, Dh = q.shape
    Tk = k.size(-2)
    relative = rel_keys is not None or rel_values is not None
    mask = dict(causal=causal, key_padding_mask=key_padding_mask, q_offset=q_offset)  # hidden keys
    if bias is not None:
        bias = bias.to(q.dtype)  # (H, Tq, Tk)
    # A learned bias (T5's) joins the tables on this path: as SDPA's float mask with gradients it
    # would take SDPA's unfused math path on CPU, as a^K does (fused_kernel_applies).
    learned_bias = bias is not None and bias.requires_grad
    if fused_kernel_applies(Tq, relative=relative or learned_bias):
        return fused_attention(q, k, v, **mask, dropout_p=dropout_p, bias=bias)  # (B, H, Tq, Dh)
    hidden = hidden_keys(Tq, Tk, **mask, device=q.device)  # (B or 1, 1, Tq, Tk) or None
    if relative:
        built_for = (Tq, Tk, max_relative_position, q_offset, causal)
        if torch.compiler.is_compiling() or pairs is None:  # compiled: over the whole table
            pairs = shaw_pairs(
                Tq, Tk, max_relative_position, q_offset, causal=causal, device=q.device
            )
        elif pairs.built_for != built_for:
            raise ValueError(
                f"pairs built for (Tq, Tk, k, q_offset, causal) = {pairs.built_for}, "
                f"used for {built_for}"
            )
        # Only the window's rows occur: the tables sliced to (R', Dh) or (H, R', Dh).
        rel_keys, rel_values = pairs.window.rows(rel_keys), pairs.window.rows(rel_values)
        r = pairs.of_batch(B, H)  # r_ij of every (query, key) pair

    q = q * (1.0 / math.sqrt(Dh))  # the 1 / sqrt(Dh) of eq. 4, folded into q once

    # (1) Content logits, eq. 4 first term: q_i . k_j / sqrt(Dh).
    logits = q @ k.transpose(-1, -2)  # (B, H, Tq, Tk)
    if bias is not None:  # another method's position term (ALiBi, T5), on the scaled logits
        logits += bias  # (B, H, Tq, Tk)

    # (2) Position logits, eq. 4 second term: q_i . a^K_ij / sqrt(Dh), gathered from the
    # products with every table row: (q_i . w^K^T)[r_ij] / sqrt(Dh) (or, on BY_QUERY_DEVICES,
    # as the paper computes it: q_i times the rows w^K[r_ij] gathered for each query).
    if rel_keys is not None:  # per-head tables (H, R', Dh), or one (R', Dh) shared by all heads
        logits += position_logits(r, q, rel_keys)  # (B, H, Tq, Tk); in place: one n^2 buffer less

    # (3) Softmax over keys (alpha_ij); hidden keys (future, padding) get exactly zero weight.
    if hidden is not None:
        logits = logits.masked_fill_(hidden, torch.finfo(logits.dtype).min)
    alpha = torch.softmax(logits, dim=-1)  # (B, H, Tq, Tk)
    alpha = dropout(alpha, dropout_p)  # attention dropout (tensor2tensor's); a no-op at p = 0

    # (4) Content output, eq. 3 first term: sum_j alpha_ij v_j.
    z = alpha @ v  # (B, H, Tq, Dh)

    # (5) Position output, eq. 3 second term: sum_j alpha_ij a^V_ij = sum_r bucket_ir w^V[r],
    # where bucket_ir sums alpha_ij over the keys j at table row r.
    if rel_values is not None:
        z += position_output(r, alpha, rel_values)  # (B, H, Tq, Dh)
    return z


def _check_arguments(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    rel_keys: Tensor | None,
    rel_values: Tensor | None,
    max_relative_position: int,
    key_padding_mask: Tensor | None,
    q_offset: int,
    bias: Tensor | None,
) -> None:
    """Refuse, naming the argument, what relative_attention would misread or fail on deep inside."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            f"q, k, v must be (B, H, T, Dh), got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        )
    B, H, Tq, Dh = q.shape
    Tk = k.size(-2)
    if k.shape[:2] != (B, H) or k.size(-1) != Dh or v.shape[:3] != k.shape[:3]:
        raise ValueError(
            f"k {tuple(k.shape)} and v {tuple(v.shape)} do not fit q {tuple(q.shape)}: "
            "k must be (B, H, Tk, Dh), v (B, H, Tk, Dv)"
        )
    if q_offset < 0:
        raise ValueError(f"q_offset must be >= 0 (the first query's position), got {q_offset}")
    R = 2 * max_relative_position + 1
    for name, table, width in (("rel_keys", rel_keys, Dh), ("rel_values", rel_values, v.size(-1))):
        if table is None:
            continue
        if table.shape not in ((R, width), (H, R, width)):
            raise ValueError(
                f"{name} {tuple(table.shape)} must be (R, D) or (H, R, D) with "
                f"R = 2k + 1 = {R} (max_relative_position={max_relative_position}), H = {H}, "
                f"D = {width}"
            )
        if table.dtype != q.dtype:
            raise ValueError(f"{name} is {table.dtype}, q is {q.dtype}: cast the table to q's")
    if key_padding_mask is not None and (
        key_padding_mask.dtype != torch.bool or key_padding_mask.shape != (B, Tk)
    ):
        raise ValueError(
            f"key_padding_mask must be bool (B, Tk) = ({B}, {Tk}), True at padding; got "
            f"{key_padding_mask.dtype} {tuple(key_padding_mask.shape)}"
        )
    if bias is not None and (bias.dim() > 3 or bias.shape[-2:] != (Tq, Tk)
                             or (bias.dim() == 3 and bias.size(0) not in (1, H))):  # fmt: skip
        raise ValueError(f"bias {tuple(bias.shape)} must be (H, Tq, Tk) = ({H}, {Tq}, {Tk})")
