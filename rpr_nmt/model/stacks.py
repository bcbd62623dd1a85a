"""The encoder and decoder stacks: an embedding, the layers, and each layer's position terms.

Shape legend (batch-first everywhere):
    B batch, S source length, T target length, H heads, Dh head dim, D model dim (H * Dh),
    V vocabulary, R = 2k + 1 relative positions (k = max_relative_position), N beam.

A stack asks once per forward for every layer's self-attention terms (positions/terms.py): RoPE's
rotation, ALiBi's or T5's bias, or the rows of Shaw's tables each (query, key) pair reads. The
Transformer (transformer.py) builds one Encoder and one Decoder and sets their position methods.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rpr_nmt.model.attention import shaw_pairs
from rpr_nmt.model.cache import DecoderCache
from rpr_nmt.model.embeddings import TokenEmbedding
from rpr_nmt.model.positions.terms import PositionTerms, RelativeTerms

__all__ = ["Decoder", "Encoder", "EncoderOutput"]


@dataclass
class EncoderOutput:
    """What the decoder needs from the encoder.

    Shapes:
        memory: (B, S, D); padding_mask: (B, S) bool, True = padding.
    """

    memory: Tensor
    padding_mask: Tensor

    def index_select(self, index: Tensor) -> EncoderOutput:
        """Batch rows `index` (B',): expands sentences into beams or reorders them."""
        return EncoderOutput(
            self.memory.index_select(0, index), self.padding_mask.index_select(0, index)
        )


class _Stack(nn.Module):
    """Embedding, the layers, for pre-norm a final LayerNorm, and the relative method's terms."""

    causal = False  # whether self-attention is causal (the decoder's)

    def __init__(
        self,
        *,
        embedding: TokenEmbedding,
        layers: list[nn.Module],
        pre_norm: bool,
        relative_terms: RelativeTerms | None = None,
        shaw_k: int = 0,
    ) -> None:
        """relative_terms: RoPE's, ALiBi's or T5's; shaw_k: Shaw's k where the layers learn w^K
        or w^V, else 0."""
        super().__init__()
        self.embed = embedding
        self.layers = nn.ModuleList(layers)
        # Pre-norm leaves the residual stream unnormalised: normalise once at the top of the stack.
        d_model = embedding.table.embedding_dim
        self.final_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.relative_terms = relative_terms  # a submodule only for rope, alibi and t5
        self.shaw_k = shaw_k

    def position_terms(
        self, q_len: int, k_len: int, q_offset: int, device: torch.device
    ) -> list[PositionTerms | None]:
        """Each layer's self-attention terms of this forward, built once (positions/terms.py)."""
        if self.relative_terms is not None:
            return self.relative_terms(q_len, k_len, q_offset, device)
        if self.shaw_k > 0:  # every layer indexes its own tables by the same pair rows
            pairs = shaw_pairs(
                q_len, k_len, self.shaw_k, q_offset, causal=self.causal, device=device
            )
            return [PositionTerms(pairs=pairs)] * len(self.layers)
        return [None] * len(self.layers)


class Encoder(_Stack):
    """Embeddings, then n_encoder_layers EncoderLayers."""

    def forward(self, src: Tensor, padding_mask: Tensor) -> Tensor:
        """Shapes: src (B, S), padding_mask (B, S) True = pad; returns memory (B, S, D)."""
        x = self.embed(src)  # (B, S, D)
        S = src.size(1)
        for layer, terms in zip(self.layers, self.position_terms(S, S, 0, src.device)):
            x = layer(x, padding_mask, terms)
        return self.final_norm(x)


class Decoder(_Stack):
    """Embeddings, then n_decoder_layers DecoderLayers; whole targets or positions after a cache."""

    causal = True

    def forward(
        self, tgt: Tensor, encoder_out: EncoderOutput, cache: DecoderCache | None = None
    ) -> tuple[Tensor, DecoderCache]:
        """Decode target positions cache.length .. cache.length + T - 1 (0 .. T - 1 without cache).

        Args:
            tgt: the new target tokens.
            encoder_out: the encoded source; G consecutive rows of tgt may share one of its rows.
            cache: state after the earlier positions, or None to start at position 0.

        Returns:
            (hidden states of the new positions, the cache extended by them).

        Shapes:
            tgt: (B, T); encoder_out: B / G rows; returns hidden (B, T, D).
        """
        start = 0 if cache is None else cache.length
        x = self.embed(tgt, first_position=start)  # (B, T, D)
        T = tgt.size(1)
        all_terms = self.position_terms(T, start + T, start, tgt.device)  # keys: cache + new
        self_kvs, memory_kvs = [], []
        for i, (layer, terms) in enumerate(zip(self.layers, all_terms)):
            x, self_kv, memory_kv = layer(
                x,
                encoder_out.memory if cache is None else cache.cross_attn[i],
                encoder_out.padding_mask,
                self_cache=None if cache is None else cache.self_attn[i],
                q_offset=start,
                terms=terms,
            )
            self_kvs.append(self_kv)
            memory_kvs.append(memory_kv)
        return self.final_norm(x), DecoderCache(self_kvs, memory_kvs, start + tgt.size(1))
