"""The Transformer's layers: encoder and decoder layers and their residual sublayers.

Shape legend (batch-first everywhere):
    B batch, S source length, T target length, H heads, Dh head dim, D model dim (H * Dh),
    G beams per sentence (consecutive decoder rows sharing one source sentence).

Relative positions live in encoder self-attention and causal decoder self-attention only;
encoder-decoder attention has none, as in the paper.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rpr_nmt.model.cache import KeyValueCache
from rpr_nmt.model.dropout import Dropout
from rpr_nmt.model.multihead import (
    RelativeMultiheadAttention,
    RelativePositions,
    RelativeTables,
)
from rpr_nmt.model.positions.terms import PositionTerms

__all__ = ["DecoderLayer", "EncoderLayer", "FeedForward", "SublayerNorm"]


class FeedForward(nn.Module):
    """Position-wise feed-forward: Linear(D, d_ff), ReLU, dropout, Linear(d_ff, D)."""

    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(x))))


class SublayerNorm(nn.LayerNorm):
    """LayerNorm of one residual sublayer, placed before it (pre-norm) or after the sum (post-norm).

    pre-norm:  x + dropout(f(LN(x)))   ->  x + dropout(f(n.before(x))), n.after(.) is the identity
    post-norm: LN(x + dropout(f(x)))   ->  n.after(x + dropout(f(x))), n.before(.) is the identity
    """

    def __init__(self, d_model: int, pre_norm: bool) -> None:
        super().__init__(d_model)
        self.pre_norm = pre_norm

    def before(self, x: Tensor) -> Tensor:
        return super().forward(x) if self.pre_norm else x

    def after(self, x: Tensor) -> Tensor:
        return x if self.pre_norm else super().forward(x)


class EncoderLayer(nn.Module):
    """Relative self-attention, then feed-forward, each a residual sublayer."""

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        d_ff: int,
        relative: RelativePositions,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation_dropout: float | None = None,
        pre_norm: bool = True,
        tables: RelativeTables | None = None,
        attention_dtype: torch.dtype | None = None,
    ) -> None:
        """Build the sublayers.

        Args:
            d_model: model width D.
            n_heads: attention heads H.
            d_ff: feed-forward inner width.
            relative: relative positions of self-attention; RelativePositions() (k = 0) for none.
            dropout: on the residual branches (and the feed-forward activations, by default).
            attention_dropout: on the attention weights.
            activation_dropout: on the feed-forward activations; None = `dropout`.
            pre_norm: LayerNorm before each sublayer (True) or after the residual sum.
            tables: w^K, w^V shared with other layers; None = this layer's own.
            attention_dtype: precision of the attention arithmetic; None = the input's
                (see RelativeMultiheadAttention).
        """
        super().__init__()
        self.self_attn = RelativeMultiheadAttention(
            d_model,
            n_heads,
            attention_dropout=attention_dropout,
            relative=relative,
            tables=tables,
            attention_dtype=attention_dtype,
        )
        self.ffn = FeedForward(
            d_model, d_ff, dropout if activation_dropout is None else activation_dropout
        )
        self.attn_norm = SublayerNorm(d_model, pre_norm)
        self.ffn_norm = SublayerNorm(d_model, pre_norm)
        self.dropout = Dropout(dropout)

    def forward(
        self, x: Tensor, padding_mask: Tensor | None = None, terms: PositionTerms | None = None
    ) -> Tensor:
        """Shapes: x (B, S, D), padding_mask (B, S) True = pad; returns (B, S, D).

        terms: the self-attention's relative method (Shaw's pair rows, RoPE, ALiBi, T5), or None.
        """
        h, _ = self.self_attn(self.attn_norm.before(x), key_padding_mask=padding_mask, terms=terms)
        x = self.attn_norm.after(x + self.dropout(h))
        h = self.ffn(self.ffn_norm.before(x))
        return self.ffn_norm.after(x + self.dropout(h))


class DecoderLayer(nn.Module):
    """Causal relative self-attention, encoder-decoder attention (not relative), feed-forward."""

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        d_ff: int,
        relative: RelativePositions,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation_dropout: float | None = None,
        pre_norm: bool = True,
        tables: RelativeTables | None = None,
        attention_dtype: torch.dtype | None = None,
    ) -> None:
        """Args: as EncoderLayer; relative and tables apply to self-attention only,
        attention_dtype to both attentions."""
        super().__init__()
        self.self_attn = RelativeMultiheadAttention(
            d_model,
            n_heads,
            attention_dropout=attention_dropout,
            relative=relative,
            causal=True,
            tables=tables,
            attention_dtype=attention_dtype,
        )
        self.cross_attn = RelativeMultiheadAttention(
            d_model, n_heads, attention_dropout=attention_dropout, attention_dtype=attention_dtype
        )
        self.ffn = FeedForward(
            d_model, d_ff, dropout if activation_dropout is None else activation_dropout
        )
        self.self_attn_norm = SublayerNorm(d_model, pre_norm)
        self.cross_attn_norm = SublayerNorm(d_model, pre_norm)
        self.ffn_norm = SublayerNorm(d_model, pre_norm)
        self.dropout = Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        memory: Tensor | KeyValueCache,
        memory_padding_mask: Tensor | None,
        *,
        self_cache: KeyValueCache | None = None,
        q_offset: int = 0,
        terms: PositionTerms | None = None,
    ) -> tuple[Tensor, KeyValueCache, KeyValueCache]:
        """Run the layer on new target positions q_offset .. q_offset + T - 1.

        Args:
            x: inputs at the new positions.
            memory: encoder output, or its projections cached from an earlier step.
            memory_padding_mask: True where the source is padding.
            self_cache: keys and values of positions 0 .. q_offset - 1.
            q_offset: absolute position of x's first token.
            terms: self-attention's relative method at these positions (Shaw's pair rows, RoPE,
                ALiBi, T5); None for none. Cross-attention has none.

        Returns:
            (output, self-attention keys/values of all positions so far, memory keys/values).

        Shapes:
            x: (B, T, D); memory: (B / G, S, D) and memory_padding_mask: (B / G, S), where G
            consecutive rows of x (beams) share one source sentence; output (B, T, D).
        """
        h, self_kv = self.self_attn(
            self.self_attn_norm.before(x), cache=self_cache, q_offset=q_offset, terms=terms
        )
        x = self.self_attn_norm.after(x + self.dropout(h))
        h, memory_kv = self.cross_attn(
            self.cross_attn_norm.before(x), memory, key_padding_mask=memory_padding_mask
        )
        x = self.cross_attn_norm.after(x + self.dropout(h))
        h = self.ffn(self.ffn_norm.before(x))
        x = self.ffn_norm.after(x + self.dropout(h))
        return x, self_kv, memory_kv
