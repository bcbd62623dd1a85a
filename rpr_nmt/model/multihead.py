"""RelativeMultiheadAttention: projections, relative tables w^K / w^V, and the decoding cache
around relative_attention (attention.py); RelativePositions, the setting that says which tables.

Shape legend (batch-first everywhere):
    B batch, S source length, H heads, Dh head dim, D model dim (H * Dh), Tq / Tk query / key
    lengths, R = 2k + 1 relative positions (k = max_relative_position), G beams per sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor, nn

from rpr_nmt.model.arithmetic import casts_shared_inputs
from rpr_nmt.model.attention import relative_attention
from rpr_nmt.model.cache import KeyValueCache
from rpr_nmt.model.positions.terms import PositionTerms

__all__ = ["RelativeMultiheadAttention", "RelativePositions", "RelativeTables"]


@dataclass(frozen=True, kw_only=True)
class RelativePositions:
    """Which relative position representations a self-attention learns (Shaw et al. 2018, sec. 3).

    Attributes:
        k: the clipping distance (ModelConfig.max_relative_position); 0 = no relative positions.
        keys: learn w^K, the a^K term of eq. 4 (ModelConfig.relative_keys).
        values: learn w^V, the a^V term of eq. 3 (ModelConfig.relative_values).
        share_across_heads: one table (R, Dh) for all heads instead of one per head (H, R, Dh)
            (ModelConfig.share_relative_across_heads).
    """

    k: int = 0
    keys: bool = True
    values: bool = True
    share_across_heads: bool = False

    def __post_init__(self) -> None:
        if self.k < 0:
            raise ValueError(f"max_relative_position must be >= 0 (0 = off), got {self.k}")

    @property
    def enabled(self) -> bool:
        """Whether any table is learnt: k > 0 and a^K or a^V; otherwise plain attention."""
        return self.k > 0 and (self.keys or self.values)

    def new_tables(self, n_heads: int, d_head: int) -> RelativeTables:
        """Fresh w^K and w^V (drawn in that order), each None when its term is off.

        Shapes: (R, Dh) when shared across heads, (H, R, Dh) otherwise.
        """
        shape = self._table_shape(n_heads, d_head)
        return RelativeTables(
            keys=_new_table(shape) if self.k > 0 and self.keys else None,
            values=_new_table(shape) if self.k > 0 and self.values else None,
        )

    def check_tables(self, tables: RelativeTables, n_heads: int, d_head: int) -> None:
        """Raise ValueError unless `tables` (another layer's, to share) are the ones this setting
        would build: the same terms, the same shapes."""
        shape = self._table_shape(n_heads, d_head)
        want = [shape if self.k > 0 and on else None for on in (self.keys, self.values)]
        got = [None if table is None else tuple(table.shape) for table in tables]
        if got != want:
            raise ValueError(
                f"shared relative tables (w^K, w^V) have shapes {got}, this layer needs {want}"
            )

    def _table_shape(self, n_heads: int, d_head: int) -> tuple[int, ...]:
        rows = 2 * self.k + 1
        return (rows, d_head) if self.share_across_heads else (n_heads, rows, d_head)


class RelativeTables(NamedTuple):
    """w^K and w^V of one self-attention, or of every layer of a stack that shares them."""

    keys: nn.Parameter | None
    values: nn.Parameter | None


class RelativeMultiheadAttention(nn.Module):
    """Multi-head attention with optional relative position tables w^K, w^V.

    Used for self-attention (memory=None), which may use relative positions, and for
    cross-attention, which never does (the paper applies them to self-attention only): build
    cross-attention modules with the default relative=RelativePositions() (k = 0, off).

    Tables: shape (R, Dh) when shared across heads, (H, R, Dh) otherwise. Pass another layer's
    RelativeTables as `tables` to share one set of tables across layers.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        attention_dropout: float = 0.0,
        relative: RelativePositions = RelativePositions(),
        causal: bool = False,
        tables: RelativeTables | None = None,
        attention_dtype: torch.dtype | None = None,
    ) -> None:
        """Build the projections and, when relative positions are on, the relative tables.

        Args:
            d_model: model width D; must be divisible by n_heads.
            n_heads: number of heads H.
            attention_dropout: dropout on the attention weights.
            relative: k and the tables to learn; the default, k = 0, is plain attention.
            causal: each query sees only keys at its own or earlier absolute positions.
            tables: existing w^K, w^V to share (another layer's, built for the same `relative`);
                None = this module's own, created here.
            attention_dtype: precision of the attention arithmetic (scores, softmax, relative
                terms) and of the key/value cache; None = the input's dtype. A bf16 model decodes
                best with float32 here (Transformer.recast): the projections stay bf16, while the
                many small batched matmuls of a decoding step run 2x faster in float32 on CPU and
                the softmax is exact.
        """
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.attention_dropout = attention_dropout
        self.relative = relative
        self.causal = causal
        self.attention_dtype = attention_dtype
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        if tables is None:  # this module's own w^K, w^V
            tables = relative.new_tables(n_heads, self.d_head)
        else:  # another layer's, shared across the layers of a stack
            relative.check_tables(tables, n_heads, self.d_head)
        self.rel_keys, self.rel_values = tables
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform projections with zero biases, as in the reference Transformer."""
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            nn.init.xavier_uniform_(proj.weight)
            nn.init.zeros_(proj.bias)

    def split_heads(self, x: Tensor) -> Tensor:
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
        memory = _cast_shared(memory)  # read by k_proj and v_proj
        keys = self.split_heads(self.k_proj(memory)).contiguous()
        return KeyValueCache(keys, self.split_heads(self.v_proj(memory)).contiguous())

    def forward(
        self,
        x: Tensor,
        memory: Tensor | KeyValueCache | None = None,
        *,
        key_padding_mask: Tensor | None = None,
        cache: KeyValueCache | None = None,
        q_offset: int = 0,
        terms: PositionTerms | None = None,
    ) -> tuple[Tensor, KeyValueCache]:
        """Attend from x to itself (memory=None) or to a memory.

        Args:
            x: the queries' inputs; in self-attention also the new keys and values.
            memory: cross-attention only: the encoder output, or its project_memory projections.
            key_padding_mask: True where a key is padding.
            cache: self-attention only: keys and values of earlier positions, put before the new.
            q_offset: absolute position of x's first token (the cache length when decoding).
            terms: self-attention only: the relative method's rotation of the queries and new
                keys, bias on the logits, or Shaw's pair rows, at these positions
                (positions/terms.py). Keys enter the cache rotated, at their own positions.

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
        if memory is not None and terms is not None:
            raise ValueError("cross-attention takes no position terms (none in any method)")
        rotation = None if terms is None else terms.rotation
        out_dtype = x.dtype
        if memory is None:
            x = _cast_shared(x)  # read by q_proj, k_proj and v_proj
            keys = self.split_heads(self.k_proj(x))  # (B, H, Tq, Dh): the new positions' keys
            if rotation is not None:
                keys = rotation(keys)  # RoPE: rotated once, at their own positions
            kv = KeyValueCache(keys, self.split_heads(self.v_proj(x)))
            if cache is not None:
                kv = cache.append(kv.keys, kv.values)  # (B, H, Tk, Dh)
        else:
            kv = memory if isinstance(memory, KeyValueCache) else self.project_memory(memory)
            rows = kv.keys.size(0)
            if B % rows != 0:
                raise ValueError(f"{B} query rows cannot share {rows} memory rows in equal groups")
            x = x.reshape(rows, -1, D)  # (B / G, G * Tq, D): one row per memory row
        q = self.split_heads(self.q_proj(x))  # (B, H, Tq, Dh); grouped: (B / G, H, G * Tq, Dh)
        if rotation is not None:
            q = rotation(q)  # RoPE: queries at q_offset onwards
        dtype = q.dtype
        z = relative_attention(
            q,
            kv.keys,
            kv.values,
            rel_keys=None if self.rel_keys is None else self.rel_keys.to(dtype),
            rel_values=None if self.rel_values is None else self.rel_values.to(dtype),
            max_relative_position=self.relative.k,
            causal=self.causal,
            key_padding_mask=key_padding_mask,
            q_offset=q_offset,
            dropout_p=self.attention_dropout if self.training else 0.0,
            bias=None if terms is None else terms.bias,
            pairs=None if terms is None else terms.pairs,
        )  # (B, H, Tq, Dh)
        out = z.transpose(1, 2).reshape(B, Tq, D).to(out_dtype)  # (B, Tq, D), groups split again
        return self.out_proj(out), kv


def _cast_shared(x: Tensor) -> Tensor:
    """`x` cast once for the projections that share it, under arithmetic 2's autocast
    (rpr_nmt/model/arithmetic.py); as it is otherwise, for autocast to cast per projection."""
    dtype = casts_shared_inputs(x)
    return x if dtype is None else x.to(dtype)


def _new_table(shape: tuple[int, ...]) -> nn.Parameter:
    """A w^K or w^V table, Xavier-uniform over its last two axes (R, Dh)."""
    rows, d_head = shape[-2:]
    bound = math.sqrt(6.0 / (rows + d_head))
    return nn.Parameter(torch.empty(shape).uniform_(-bound, bound))
