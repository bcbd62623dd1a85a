"""Relation-aware self-attention (Shaw, Uszkoreit & Vaswani 2018), without (n, n, d) tensors.

Shape legend (batch-first everywhere):
    B batch, S source length, T target length, H heads, Dh head dim, D model dim (H * Dh),
    V vocabulary, R = 2k + 1 relative positions (k = max_relative_position), N beam.
    In relative_attention, Tq / Tk are the query / key lengths (T / T in self-attention).

The paper (eq. 3 and 4, restated in ../shared/docs/PAPER.md) adds learned edge vectors to one head:

    e_ij     = q_i . (k_j + a^K_ij) / sqrt(Dh)       a^K_ij = w^K[clip(j - i, k) + k]
    alpha_ij = softmax_j(e_ij)
    z_i      = sum_j alpha_ij (v_j + a^V_ij)          a^V_ij = w^V[clip(j - i, k) + k]

Each sum splits into a content term (ordinary attention) and a position term. The position terms
only ever see R distinct table rows r_ij = clip(j - i, k) + k, so they are computed per row instead
of per (i, j) pair:

    position logits  q_i . a^K_ij = (q_i . w^K^T)[r_ij]          gather from (B, H, Tq, R)
    position output  sum_j alpha_ij a^V_ij = sum_r bucket_ir w^V[r],
                     bucket_ir = sum_{j: r_ij = r} alpha_ij      bucket-sum alpha into (B, H, Tq, R)

Memory: O(Tq Tk) for the attention matrix (as in plain attention) plus O(Tq R); never O(Tq Tk Dh).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rpr_nmt.model.dropout import dropout

__all__ = [
    "KeyValueCache",
    "RelativeMultiheadAttention",
    "relative_attention",
    "relative_position_index",
]


# Up to this many queries per batch row take manual attention, not SDPA (see relative_attention).
_FEW_QUERIES = 8


def relative_position_index(
    q_len: int,
    k_len: int,
    max_relative_position: int,
    q_offset: int = 0,
    *,
    device: torch.device | str | None = None,
) -> Tensor:
    """Table row of every (query, key) pair: clip(j - (i + q_offset), k) + k.

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


def _table_window(
    q_len: int, k_len: int, max_relative_position: int, q_offset: int, causal: bool
) -> tuple[int, int]:
    """First and last table row that can occur (PERF_NOTES: slice the tables to the rows in use).

    A causal decoder only uses rows -k..0; short sequences use fewer than 2k + 1 rows.
    """
    k = max_relative_position
    nearest = -(q_offset + q_len - 1)  # smallest j - i: last query, first key
    farthest = k_len - 1 - q_offset  # largest j - i: first query, last key
    if causal:
        farthest = min(farthest, 0)
    first = max(-k, min(k, nearest)) + k
    last = max(-k, min(k, farthest)) + k
    return first, max(first, last)


def _hidden_keys(
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

    Returns:
        z, the attention output per head.

    Shapes:
        q: (B, H, Tq, Dh); k, v: (B, H, Tk, Dh); key_padding_mask: (B, Tk); returns (B, H, Tq, Dh).
    """
    B, H, Tq, Dh = q.shape
    Tk = k.size(-2)
    if max_relative_position < 0:
        raise ValueError(
            f"max_relative_position must be >= 0 (0 = off), got {max_relative_position}"
        )
    if max_relative_position == 0:
        rel_keys = rel_values = None
    hidden = _hidden_keys(
        Tq, Tk, causal=causal, key_padding_mask=key_padding_mask, q_offset=q_offset, device=q.device
    )
    relative = rel_keys is not None or rel_values is not None
    if not relative and Tq > _FEW_QUERIES:
        # Plain attention: PyTorch's fused kernel (less memory; flash/efficient kernels on CUDA).
        # a^K alone stays on the manual path below: as an SDPA float mask that needs gradients it
        # falls back to SDPA's unfused math path on CPU (docs/performance.md, "Attention").
        # A few queries per row (a decoding step: one per beam) take the manual path too: there
        # the CPU flash kernel's per-(row, head) set-up dominates (2-4x slower there).
        plain_causal = causal and key_padding_mask is None and q_offset == 0 and Tq == Tk
        return F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=None if hidden is None or plain_causal else ~hidden,
            dropout_p=dropout_p,
            is_causal=plain_causal,
        )  # (B, H, Tq, Dh)

    if relative:
        # Only table rows first..last can occur: slice both tables, shift the index to match.
        first, last = _table_window(Tq, Tk, max_relative_position, q_offset, causal)
        index = relative_position_index(Tq, Tk, max_relative_position, q_offset, device=q.device)
        index = (index - first).clamp_(0, last - first)  # (Tq, Tk); clamped ones are masked
        index = index.expand(B, H, Tq, Tk)  # a view: one index for every batch row and head

    q = q * (1.0 / math.sqrt(Dh))  # fold the 1/sqrt(Dh) of eq. 4 into q once

    # Content logits, eq. 4 first term: q_i . k_j / sqrt(Dh).
    logits = q @ k.transpose(-1, -2)  # (B, H, Tq, Tk)

    # Position logits, eq. 4 second term: q_i . a^K_ij / sqrt(Dh) = (q_i . w^K^T)[r_ij] / sqrt(Dh).
    if rel_keys is not None:
        w_k = rel_keys[..., first : last + 1, :]  # (R', Dh) or (H, R', Dh)
        heads = "h" if w_k.dim() == 3 else ""  # per-head tables, or one shared by all heads
        q_dot_wk = torch.einsum(f"bhqd,{heads}rd->bhqr", q, w_k)  # (B, H, Tq, R')
        logits += q_dot_wk.gather(-1, index)  # (B, H, Tq, Tk); in place: one n^2 buffer less

    # Softmax over keys; hidden keys (future, padding) get exactly zero weight.
    if hidden is not None:
        logits = logits.masked_fill_(hidden, torch.finfo(logits.dtype).min)
    alpha = torch.softmax(logits, dim=-1)  # (B, H, Tq, Tk)
    alpha = dropout(alpha, dropout_p)  # attention dropout (tensor2tensor's); a no-op at p = 0

    # Content output, eq. 3 first term: sum_j alpha_ij v_j.
    z = alpha @ v  # (B, H, Tq, Dh)

    # Position output, eq. 3 second term: sum_j alpha_ij a^V_ij = sum_r bucket_ir w^V[r],
    # where bucket_ir sums alpha_ij over the keys j at relative row r.
    if rel_values is not None:
        w_v = rel_values[..., first : last + 1, :]  # (R', Dh) or (H, R', Dh)
        heads = "h" if w_v.dim() == 3 else ""
        buckets = alpha.new_zeros(B, H, Tq, last - first + 1)  # (B, H, Tq, R')
        buckets = buckets.scatter_add(-1, index, alpha)  # (B, H, Tq, R')
        z += torch.einsum(f"bhqr,{heads}rd->bhqd", buckets, w_v)  # (B, H, Tq, Dh)
    return z


@dataclass
class KeyValueCache:
    """Projected keys and values of the positions attended so far (one attention module).

    Shapes:
        keys, values: (B, H, Tk, Dh).
    """

    keys: Tensor
    values: Tensor
    # Buffers (B, H, Tk + 1, Dh) whose first Tk positions are keys / values: room for one append.
    _room: tuple[Tensor, Tensor] | None = field(default=None, repr=False, compare=False)

    @property
    def length(self) -> int:
        """Number of cached key positions."""
        return self.keys.size(2)

    def index_select(self, index: Tensor) -> KeyValueCache:
        """Rows `index` (B',) of the batch, for beam expansion and reordering.

        The copies leave room for one more position, so that the next step's `append` writes its
        keys and values in place instead of copying the whole cache again.
        """
        B, (_, H, T, Dh) = index.numel(), self.keys.shape
        room = self.keys.new_empty(B, H, T + 1, Dh), self.values.new_empty(B, H, T + 1, Dh)
        torch.index_select(self.keys, 0, index, out=room[0][:, :, :T])
        torch.index_select(self.values, 0, index, out=room[1][:, :, :T])
        return KeyValueCache(room[0][:, :, :T], room[1][:, :, :T], room)

    def append(self, keys: Tensor, values: Tensor) -> KeyValueCache:
        """The cache extended by new positions (B, H, Tnew, Dh); this cache stays as it is.

        One position written into the room left by `index_select` costs no copy of the cache;
        the room serves one append only (a second append to this cache copies, as any other).
        """
        if self._room is not None and keys.size(2) == 1:
            room, self._room = self._room, None
            room[0][:, :, -1:] = keys
            room[1][:, :, -1:] = values
            return KeyValueCache(*room)
        return KeyValueCache(
            torch.cat([self.keys, keys], dim=2), torch.cat([self.values, values], dim=2)
        )


class RelativeMultiheadAttention(nn.Module):
    """Multi-head attention with optional relative position tables w^K, w^V.

    Used for self-attention (memory=None), which may use relative positions, and for
    cross-attention, which never does (the paper applies them to self-attention only): build
    cross-attention modules with max_relative_position=0.

    Tables: shape (R, Dh) when shared across heads, (H, R, Dh) otherwise. Pass existing Parameters
    through rel_keys / rel_values to share one set of tables across layers.

    `attention_dtype` (None = the input's dtype) sets the precision of the attention arithmetic:
    scores, softmax, the relative terms and the decoding cache. A bf16 model decodes best with
    float32 here (rpr_nmt.decode.translate.decoding_model sets it): the projections stay bf16,
    while the many small batched matmuls of a decoding step run 2x faster in float32 on CPU and
    the softmax is exact.
    """

    attention_dtype: torch.dtype | None = None

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        attention_dropout: float = 0.0,
        max_relative_position: int = 0,
        relative_keys: bool = True,
        relative_values: bool = True,
        share_relative_across_heads: bool = False,
        causal: bool = False,
        rel_keys: nn.Parameter | None = None,
        rel_values: nn.Parameter | None = None,
    ) -> None:
        """Build the projections and, when max_relative_position > 0, the relative tables.

        Args:
            d_model: model width D; must be divisible by n_heads.
            n_heads: number of heads H.
            attention_dropout: dropout on the attention weights.
            max_relative_position: k; 0 = no relative positions.
            relative_keys: learn w^K (the a^K term of eq. 4).
            relative_values: learn w^V (the a^V term of eq. 3).
            share_relative_across_heads: tables of shape (R, Dh) instead of (H, R, Dh).
            causal: each query sees only keys at its own or earlier absolute positions.
            rel_keys: an existing w^K to share (another layer's); created here when None.
            rel_values: an existing w^V to share; created here when None.
        """
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.attention_dropout = attention_dropout
        self.max_relative_position = max_relative_position
        self.causal = causal
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        shape = relative_table_shape(
            max_relative_position, n_heads, self.d_head, share_relative_across_heads
        )
        use = max_relative_position > 0
        self.rel_keys = _table_or_new(rel_keys, shape) if use and relative_keys else None
        self.rel_values = _table_or_new(rel_values, shape) if use and relative_values else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform projections with zero biases, as in the reference Transformer."""
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            nn.init.xavier_uniform_(proj.weight)
            nn.init.zeros_(proj.bias)

    def _heads(self, x: Tensor) -> Tensor:
        """Split a projection into heads, in the attention dtype: (B, T, D) -> (B, H, T, Dh)."""
        B, T, _ = x.shape
        x = x.to(self.attention_dtype or x.dtype)
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, H, T, Dh)

    def project_memory(self, memory: Tensor) -> KeyValueCache:
        """Keys and values of a fixed memory (the encoder output), computed once per sentence.

        Contiguous, so that the batched matmuls of every decoding step read them in place (a
        head-split view made each step's q k^T copy the keys: twice as slow).

        Shapes:
            memory: (B, S, D); returns keys and values (B, H, S, Dh).
        """
        keys = self._heads(self.k_proj(memory)).contiguous()
        return KeyValueCache(keys, self._heads(self.v_proj(memory)).contiguous())

    def forward(
        self,
        x: Tensor,
        memory: Tensor | KeyValueCache | None = None,
        *,
        key_padding_mask: Tensor | None = None,
        cache: KeyValueCache | None = None,
        q_offset: int = 0,
    ) -> tuple[Tensor, KeyValueCache]:
        """Attend from x to itself (memory=None) or to a memory.

        Args:
            x: the queries' inputs; in self-attention also the new keys and values.
            memory: cross-attention only: the encoder output, or its project_memory projections.
            key_padding_mask: True where a key is padding.
            cache: self-attention only: keys and values of earlier positions, put before the new.
            q_offset: absolute position of x's first token (the cache length when decoding).

        Returns:
            (output, keys_values): the attention output, and the keys and values attended over (in
            self-attention the cache for the next step; in cross-attention the memory projections).

        Cross-attention may serve G consecutive rows of x from one memory row (the G beams of a
        sentence in beam search): the memory then has B / G rows, and each group's G * Tq queries
        attend to their shared memory together, so memory keys and values are neither copied per
        beam nor reordered when beams are.

        Shapes:
            x: (B, Tq, D); memory: (B / G, S, D); key_padding_mask: (B / G, Tk) in
            cross-attention, (B, Tk) in self-attention; output (B, Tq, D).
        """
        B, Tq, D = x.shape
        if memory is None:
            kv = KeyValueCache(self._heads(self.k_proj(x)), self._heads(self.v_proj(x)))
            if cache is not None:
                kv = cache.append(kv.keys, kv.values)  # (B, H, Tk, Dh)
        else:
            kv = memory if isinstance(memory, KeyValueCache) else self.project_memory(memory)
            rows = kv.keys.size(0)
            if B % rows != 0:
                raise ValueError(f"{B} query rows cannot share {rows} memory rows in equal groups")
            x = x.reshape(rows, -1, D)  # (B / G, G * Tq, D): one row per memory row
        q = self._heads(self.q_proj(x))  # (B, H, Tq, Dh); grouped: (B / G, H, G * Tq, Dh)
        dtype = q.dtype
        z = relative_attention(
            q,
            kv.keys,
            kv.values,
            rel_keys=None if self.rel_keys is None else self.rel_keys.to(dtype),
            rel_values=None if self.rel_values is None else self.rel_values.to(dtype),
            max_relative_position=self.max_relative_position,
            causal=self.causal,
            key_padding_mask=key_padding_mask,
            q_offset=q_offset,
            dropout_p=self.attention_dropout if self.training else 0.0,
        )  # (B, H, Tq, Dh)
        out = z.transpose(1, 2).reshape(B, Tq, D).to(x.dtype)  # (B, Tq, D), groups split again
        return self.out_proj(out), kv


def relative_table_shape(
    max_relative_position: int, n_heads: int, d_head: int, share_across_heads: bool
) -> tuple[int, ...]:
    """(R, Dh) for one table shared by all heads, (H, R, Dh) for one table per head."""
    rows = 2 * max_relative_position + 1
    return (rows, d_head) if share_across_heads else (n_heads, rows, d_head)


def new_relative_table(shape: tuple[int, ...]) -> nn.Parameter:
    """A w^K or w^V table, Xavier-uniform over (R, Dh) like the other weight matrices."""
    rows, d_head = shape[-2:]
    bound = math.sqrt(6.0 / (rows + d_head))
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound))


def _table_or_new(table: nn.Parameter | None, shape: tuple[int, ...]) -> nn.Parameter:
    """The shared table passed in (after checking its shape), or a fresh one."""
    if table is None:
        return new_relative_table(shape)
    if tuple(table.shape) != shape:
        raise ValueError(
            f"shared relative table has shape {tuple(table.shape)}, this layer needs {shape}"
        )
    return table
