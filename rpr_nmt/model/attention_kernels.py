"""The speed work behind relative_attention (attention.py), kept out of the paper's equations.

- fused_kernel_applies / fused_attention: without relative terms, PyTorch's fused
  scaled_dot_product_attention (less memory; flash / memory-efficient kernels on CUDA).
- TableWindow: the table rows r_ij = clip(j - i, k) + k can take for given query and key positions.
  Slicing w^K, w^V to them makes both position terms cheaper: a causal decoder only uses rows
  -k..0, and sequences shorter than k fewer than 2k + 1 rows.
- hidden_keys: the boolean mask of the keys a query must not see (future keys, padding).
- dot_rows / mix_rows: the products with the tables' rows, as the one bmm that einsum would plan
  (einsum's arithmetic, bit for bit, which the published sweeps trained with), without einsum's
  host-side ops around it (an eager CUDA update waits on its host).
- Diagonals: on CUDA, above DIAGONALS_ABOVE queries, the relative terms without scatter-adds.
  Gathering q . w^K^T by r_ij and bucket-summing alpha into R columns both accumulate Tq x Tk
  values into a few columns per row (in the backward or the forward pass), which a GPU serialises
  on atomic adds (an H100, 2026-11-26: a^K + a^V took 32x plain SDPA's time at n = 2048, T5's
  bias 1,474x; see docs/performance.md). Every pair (i, j) lies on one diagonal m = j - i + Tq - 1,
  and the table row depends on m alone, so the terms can be built per diagonal: a strided view
  spreads (Tq, L) diagonals over the (Tq, Tk) pairs, padding and a view collect them back, and the
  diagonals of a clipped edge row are an expand forward and a sum backward. The same values in
  another summation order: forward logits equal bit for bit, sums equal to rounding
  (tests/model/test_diagonals.py).
- ByQuery: the terms as the paper computes them (its section 3.3), without any (B, H, Tq, Tk)
  gather or scatter-add: the rows of every pair gathered into a (Tq, Tk, Dh) tensor and each term
  a matmul batched over the queries. Its memory grows with Tq x Tk x Dh per layer, so only for
  short sequences, on BY_QUERY_DEVICES: none until a GPU sitting has timed it against gather
  (`scripts/bench_train.py --by-query`; tests/model/test_by_query.py checks the values).
- position_logits / position_output: Shaw's two terms by whichever form the pairs are in.

Shape legend: as in attention.py (B batch, H heads, Tq / Tk query / key lengths, Dh head dim).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "ByQuery",
    "Diagonals",
    "PairRows",
    "TableWindow",
    "diagonals_apply",
    "dot_rows",
    "fused_attention",
    "fused_kernel_applies",
    "hidden_keys",
    "mix_rows",
    "position_logits",
    "position_output",
]

# Up to this many queries per batch row take relative_attention's own path, not SDPA.
FEW_QUERIES = 8


# Devices whose relative terms go through Diagonals (above); elsewhere gather and scatter_add,
# which the CPU runs without atomics (and the published CPU sweeps were trained with).
DIAGONAL_DEVICES = ("cuda",)
# ... and from how many queries on. Shorter sequences keep gather and scatter-add there too: inside
# an encoder layer (an H100, bf16, the seventh sitting, 2026-11-27) gather costs less up to n = 320
# (1.69 against 1.74x the plain layer at 320, 1.59 against 1.89x at 128), the diagonal form from
# 352 on (1.88 against 2.05x; 2.07 against 3.42x at 512): docs/performance.md, "seventh sitting".
DIAGONALS_ABOVE = 320


def diagonals_apply(device: torch.device, q_len: int) -> bool:
    """Whether the relative terms of q_len queries on `device` are built per diagonal: on
    DIAGONAL_DEVICES above DIAGONALS_ABOVE queries, never for one (one row: nothing to spread)."""
    return device.type in DIAGONAL_DEVICES and q_len > max(DIAGONALS_ABOVE, 1)


# Devices whose Shaw terms take ByQuery wherever they do not take Diagonals (up to DIAGONALS_ABOVE
# queries). None: on the CPU neither form is faster (bench_train.py --by-query, bf16 and fp32,
# 2026-11-26: within the host's drift) and gather is what the published sweeps trained with; on an
# H100 (the sixth sitting, 2026-11-27) by query compiled gave relative / absolute 1.129 against
# 1.155 by gather a day earlier, and inside an eager layer it lost to gather at every n, 32 to 256.
BY_QUERY_DEVICES: tuple[str, ...] = ()


def by_query_applies(device: torch.device) -> bool:
    """Whether Shaw's terms on `device` go through ByQuery (where Diagonals do not apply)."""
    return device.type in BY_QUERY_DEVICES


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


# The products with the tables' rows. einsum("bhqd,hrd->bhqr") plans one bmm over the heads (over
# a batch of one for a shared table), batch and queries folded into its rows, and wraps it in ~37
# ops per product, forward + backward; an eager CUDA update waits on its host (the second GPU
# sitting: 78 ms of host ops, 57.5 ms of kernels). Called directly, the same bmm gives einsum's
# values bit for bit in 113 ops per relative attention against 143 (per-head tables; shared 107
# against 145). A broadcasting matmul (q @ table) was cheap to dispatch too, but copied per-head
# tables for every sentence and kept the copies for the backward (peak memory of a transformer_base
# update 9,282 -> 10,140 MiB, the third and fourth GPU sittings). test_table_products.py checks all
# three.


def dot_rows(q: Tensor, table: Tensor) -> Tensor:
    """q_i . w[r] for every query and table row r: (B, H, Tq, Dh) x (R, Dh) or (H, R, Dh), a table
    shared by the heads or one per head -> (B, H, Tq, R)."""
    return _rows_times(q, table.transpose(-1, -2))


def mix_rows(weights: Tensor, table: Tensor) -> Tensor:
    """sum_r weights_ir w[r] for every query: (B, H, Tq, R) x (R, Dh) or (H, R, Dh), as in dot_rows
    -> (B, H, Tq, Dh)."""
    return _rows_times(weights, table)


def _rows_times(x: Tensor, other: Tensor) -> Tensor:
    """x @ other as einsum's one bmm: (B, H, Tq, C) x (C, N) shared by the heads (a batch of one,
    batch, heads and queries folded into its rows) or (H, C, N) per head (the heads as its batch,
    batch and queries folded into its rows) -> (B, H, Tq, N)."""
    B, H, Tq, C = x.shape
    if other.dim() == 2:
        return torch.bmm(x.reshape(1, B * H * Tq, C), other[None]).view(B, H, Tq, -1)
    rows = torch.bmm(x.transpose(0, 1).reshape(H, B * Tq, C), other)  # (H, B * Tq, N)
    return rows.view(H, B, Tq, -1).transpose(0, 1)


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

    @classmethod
    def whole(cls, max_relative_position: int) -> TableWindow:
        """Every row, 0 .. 2k: the window torch.compile traces (see relative_attention)."""
        return cls(0, 2 * max_relative_position)

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


class PairRows(NamedTuple):
    """r_ij as an index (B, H, Tq, Tk) into the R table rows: gather and scatter_add."""

    index: Tensor

    def pick(self, per_row: Tensor) -> Tensor:
        """(B, H, Tq, R) -> (B, H, Tq, Tk): per_row[..., i, r_ij]."""
        return per_row.gather(-1, self.index)

    def bucket_sum(self, weights: Tensor, rows: int) -> Tensor:
        """(B, H, Tq, Tk) -> (B, H, Tq, R): sum over j of weights[..., i, j] at r_ij."""
        buckets = weights.new_zeros(*weights.shape[:-1], rows)
        return buckets.scatter_add(-1, self.index, weights)


class Diagonals(NamedTuple):
    """The L = Tq + Tk - 1 diagonals of a (Tq, Tk) block: pair (i, j) lies on m = j - i + Tq - 1.

    lo and hi: how many diagonals share the first and the last of the R table rows (the clipped
    offsets); every row between them has one diagonal of its own. With R = 1 all share row 0 (hi
    0). Only expand_rows, sum_rows and what calls them read lo and hi; spread and collect do not.
    """

    q_len: int
    k_len: int
    lo: int = 0
    hi: int = 0

    @classmethod
    def of_window(
        cls, q_len: int, k_len: int, max_relative_position: int, q_offset: int, window: TableWindow
    ) -> Diagonals:
        """The diagonals of queries at q_offset .. and keys at 0 .., their rows counted in `window`,
        from integers alone (no tensor read: torch.compile traces it with symbolic lengths).

        Diagonal m holds the pairs at j - (i + q_offset) = m - c, c = q_offset + Tq - 1, so its
        row clip(m - c, -k, k) + k, clamped into the window, grows with m by steps of 0 or 1: the
        diagonals up to m = c + first - k share the first row, those from m = c + last - k the
        last, and every row between has one.
        """
        if q_len < 2:
            raise ValueError(f"Diagonals need at least 2 queries, got {q_len}")
        k, length, c = max_relative_position, q_len + k_len - 1, q_offset + q_len - 1
        if window.last == window.first:  # one row: every diagonal on it
            return cls(q_len, k_len, length, 0)
        lo = min(max(c + window.first - k + 1, 0), length)
        hi = min(max(length - (c + window.last - k), 0), length)
        if lo == 0 or hi == 0 or lo + hi + window.last - window.first - 1 != length:
            raise ValueError(
                f"table rows {window.first}..{window.last} do not all occur for {q_len} queries "
                f"from {q_offset} and {k_len} keys at k = {k}"
            )
        return cls(q_len, k_len, lo, hi)

    @property
    def length(self) -> int:
        return self.q_len + self.k_len - 1

    def expand_rows(self, per_row: Tensor) -> Tensor:
        """(..., R) -> (..., L): each diagonal's row; an edge row's diagonals are an expand."""
        R, shape = per_row.size(-1), per_row.shape[:-1]
        if R == 1:
            return per_row.expand(*shape, self.length)
        first = per_row[..., :1].expand(*shape, self.lo)
        last = per_row[..., R - 1 :].expand(*shape, self.hi)
        return torch.cat([first, per_row[..., 1 : R - 1], last], dim=-1)  # (..., L)

    def sum_rows(self, per_diagonal: Tensor) -> Tensor:
        """(..., L) -> (..., R): the sum over each row's diagonals (expand_rows' transpose)."""
        if self.hi == 0:
            return per_diagonal.sum(-1, keepdim=True)
        L = self.length
        first = per_diagonal[..., : self.lo].sum(-1, keepdim=True)
        last = per_diagonal[..., L - self.hi :].sum(-1, keepdim=True)
        return torch.cat([first, per_diagonal[..., self.lo : L - self.hi], last], dim=-1)

    def spread(self, per_diagonal: Tensor) -> Tensor:
        """(..., Tq, L) -> (..., Tq, Tk): out[..., i, j] = per_diagonal[..., i, j - i + Tq - 1].

        In the flat (Tq * L) buffer that element sits at i (L - 1) + j + Tq - 1: rows of stride
        L - 1 from offset Tq - 1, a view without a copy (its backward a slice, no scatter).
        """
        Tq, Tk, L = self.q_len, self.k_len, self.length
        flat = per_diagonal.reshape(*per_diagonal.shape[:-2], Tq * L)
        return flat[..., Tq - 1 : Tq - 1 + Tq * (L - 1)].unflatten(-1, (Tq, L - 1))[..., :Tk]

    def pick(self, per_row: Tensor) -> Tensor:
        """(B, H, Tq, R) -> (B, H, Tq, Tk): per_row[..., i, r_ij], as PairRows.pick."""
        return self.spread(self.expand_rows(per_row))

    def bucket_sum(self, weights: Tensor, rows: int) -> Tensor:
        """(B, H, Tq, Tk) -> (B, H, Tq, R): as PairRows.bucket_sum, by diagonal."""
        buckets = self.sum_rows(self.collect(weights))
        assert buckets.size(-1) == rows, (buckets.shape, rows)
        return buckets

    def collect(self, pairs: Tensor) -> Tensor:
        """(..., Tq, Tk) -> (..., Tq, L): every pair on its diagonal, zeros elsewhere (spread's
        transpose), by the same flat layout built with padding."""
        Tq, Tk, L = self.q_len, self.k_len, self.length
        rows = F.pad(pairs, (0, L - 1 - Tk)).flatten(-2)  # (..., Tq * (L - 1))
        return F.pad(rows, (Tq - 1, 1)).unflatten(-1, (Tq, L))  # (..., Tq, L)


class ByQuery(NamedTuple):
    """Shaw's terms as the paper computes them (section 3.3): w[r_ij] for every pair gathered into
    one (Tq, Tk, Dh) tensor (one per head with per-head tables), then one matmul per head and
    query i, the batch as its rows: q_i . w[r_ij] for all j, and sum_j alpha_ij w[r_ij]. Forward and
    backward are matmuls and permutes; the tables' gradient is an index_add of Tq x Tk rows, not
    a scatter-add over the batch. The same values in another summation order (a^V sums alpha_ij
    w[r_ij] per key instead of alpha into buckets first): equal to rounding.
    """

    index: Tensor  # r_ij, (Tq, Tk), counted from the first row of the table it is given

    def rows_of_pairs(self, table: Tensor) -> Tensor:
        """(R, Dh) shared or (H, R, Dh) per head -> (1 or H, Tq, Tk, Dh): w[r_ij]."""
        rows = table[..., self.index, :]
        return rows if table.dim() == 3 else rows[None]

    def logits(self, q: Tensor, table: Tensor) -> Tensor:
        """(B, H, Tq, Dh) -> (B, H, Tq, Tk): q_i . w[r_ij]."""
        per_query = q.permute(1, 2, 0, 3)  # (H, Tq, B, Dh)
        return (per_query @ self.rows_of_pairs(table).transpose(-1, -2)).permute(2, 0, 1, 3)

    def mix(self, weights: Tensor, table: Tensor) -> Tensor:
        """(B, H, Tq, Tk) -> (B, H, Tq, Dh): sum_j weights_ij w[r_ij]."""
        per_query = weights.permute(1, 2, 0, 3)  # (H, Tq, B, Tk)
        return (per_query @ self.rows_of_pairs(table)).permute(2, 0, 1, 3)


def position_logits(r: PairRows | Diagonals | ByQuery, q: Tensor, table: Tensor) -> Tensor:
    """q_i . w[r_ij] for every pair: (B, H, Tq, Dh) x (R, Dh) or (H, R, Dh) -> (B, H, Tq, Tk).
    By gather or per diagonal, the products with every table row first, then picked by r_ij."""
    if isinstance(r, ByQuery):
        return r.logits(q, table)
    return r.pick(dot_rows(q, table))  # (B, H, Tq, R) -> (B, H, Tq, Tk)


def position_output(r: PairRows | Diagonals | ByQuery, alpha: Tensor, table: Tensor) -> Tensor:
    """sum_j alpha_ij w[r_ij] for every query: (B, H, Tq, Tk) -> (B, H, Tq, Dh). By gather or per
    diagonal, alpha summed into the R table rows first (bucket_ir), then times the table."""
    if isinstance(r, ByQuery):
        return r.mix(alpha, table)
    return mix_rows(r.bucket_sum(alpha, table.size(-2)), table)  # (B, H, Tq, R) x (R, Dh)
