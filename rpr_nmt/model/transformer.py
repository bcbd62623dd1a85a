"""The encoder-decoder Transformer with relative position representations.

Shape legend (batch-first everywhere):
    B batch, S source length, T target length, H heads, Dh head dim, D model dim (H * Dh),
    V vocabulary, R = 2k + 1 relative positions (k = max_relative_position), N beam.

Relative positions (attention.py) live in encoder self-attention and causal decoder self-attention
only; encoder-decoder attention has none. Without them, and without the sinusoid, the model sees no
word order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rpr_nmt.model.attention import (
    KeyValueCache,
    RelativeMultiheadAttention,
    new_relative_table,
    relative_table_shape,
)
from rpr_nmt.model.dropout import Dropout
from rpr_nmt.model.embeddings import TokenEmbedding

__all__ = [
    "Decoder",
    "DecoderCache",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "EncoderOutput",
    "Transformer",
    "build_model",
]


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


@dataclass
class _RelativeSpec:
    """Relative-position settings of a self-attention stack (attention keyword arguments)."""

    max_relative_position: int
    relative_keys: bool
    relative_values: bool
    share_relative_across_heads: bool
    share_relative_across_layers: bool

    def shared_tables(self, d_model: int, n_heads: int) -> dict[str, nn.Parameter | None]:
        """One w^K / w^V for a whole stack when shared across layers, else Nones (one per layer)."""
        tables: dict[str, nn.Parameter | None] = {"rel_keys": None, "rel_values": None}
        if self.share_relative_across_layers and self.max_relative_position > 0:
            shape = relative_table_shape(
                self.max_relative_position,
                n_heads,
                d_model // n_heads,
                self.share_relative_across_heads,
            )
            tables["rel_keys"] = new_relative_table(shape) if self.relative_keys else None
            tables["rel_values"] = new_relative_table(shape) if self.relative_values else None
        return tables

    def attention_kwargs(self) -> dict[str, Any]:
        return {
            "max_relative_position": self.max_relative_position,
            "relative_keys": self.relative_keys,
            "relative_values": self.relative_values,
            "share_relative_across_heads": self.share_relative_across_heads,
        }


class EncoderLayer(nn.Module):
    """Relative self-attention, then feed-forward, each a residual sublayer."""

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        pre_norm: bool = True,
        **relative: Any,
    ) -> None:
        """Build the sublayers.

        Args:
            d_model: model width D.
            n_heads: attention heads H.
            d_ff: feed-forward inner width.
            dropout: on the residual branches and feed-forward activations.
            attention_dropout: on the attention weights.
            pre_norm: LayerNorm before each sublayer (True) or after the residual sum.
            **relative: relative-position keywords of RelativeMultiheadAttention
                (max_relative_position, relative_keys, relative_values, share_relative_across_heads,
                and rel_keys / rel_values to share tables across layers).
        """
        super().__init__()
        self.self_attn = RelativeMultiheadAttention(
            d_model, n_heads, attention_dropout=attention_dropout, **relative
        )
        self.ffn = FeedForward(d_model, d_ff, dropout)
        self.attn_norm = SublayerNorm(d_model, pre_norm)
        self.ffn_norm = SublayerNorm(d_model, pre_norm)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, padding_mask: Tensor | None = None) -> Tensor:
        """Shapes: x (B, S, D), padding_mask (B, S) True = pad; returns (B, S, D)."""
        h, _ = self.self_attn(self.attn_norm.before(x), key_padding_mask=padding_mask)
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
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        pre_norm: bool = True,
        **relative: Any,
    ) -> None:
        """Args: as EncoderLayer."""
        super().__init__()
        self.self_attn = RelativeMultiheadAttention(
            d_model, n_heads, attention_dropout=attention_dropout, causal=True, **relative
        )
        self.cross_attn = RelativeMultiheadAttention(
            d_model, n_heads, attention_dropout=attention_dropout
        )
        self.ffn = FeedForward(d_model, d_ff, dropout)
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
    ) -> tuple[Tensor, KeyValueCache, KeyValueCache]:
        """Run the layer on new target positions q_offset .. q_offset + T - 1.

        Args:
            x: inputs at the new positions.
            memory: encoder output, or its projections cached from an earlier step.
            memory_padding_mask: True where the source is padding.
            self_cache: keys and values of positions 0 .. q_offset - 1.
            q_offset: absolute position of x's first token.

        Returns:
            (output, self-attention keys/values of all positions so far, memory keys/values).

        Shapes:
            x: (B, T, D); memory: (B / G, S, D) and memory_padding_mask: (B / G, S), where G
            consecutive rows of x (beams) share one source sentence; output (B, T, D).
        """
        h, self_kv = self.self_attn(
            self.self_attn_norm.before(x), cache=self_cache, q_offset=q_offset
        )
        x = self.self_attn_norm.after(x + self.dropout(h))
        h, memory_kv = self.cross_attn(
            self.cross_attn_norm.before(x), memory, key_padding_mask=memory_padding_mask
        )
        x = self.cross_attn_norm.after(x + self.dropout(h))
        h = self.ffn(self.ffn_norm.before(x))
        x = self.ffn_norm.after(x + self.dropout(h))
        return x, self_kv, memory_kv


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


@dataclass
class DecoderCache:
    """State of incremental decoding: per-layer keys/values and the number of target positions fed.

    Attributes:
        self_attn: per layer, keys and values of target positions 0 .. length - 1,
            (B, H, length, Dh).
        cross_attn: per layer, the projected encoder memory (B, H, S, Dh), computed once.
        length: target positions fed so far, i.e. the absolute position of the next token.
    """

    self_attn: list[KeyValueCache]
    cross_attn: list[KeyValueCache]
    length: int

    def index_select(self, index: Tensor, memory_index: Tensor | None = None) -> DecoderCache:
        """Follow the surviving beams: target rows `index`, source sentences `memory_index`.

        Args:
            index: (B',) the decoder row each new row continues (beams expand and reorder).
            memory_index: (A',) the source sentences kept, when some have finished; None keeps
                the projected memory as it is (it has one row per sentence, shared by its beams,
                so reordering beams never copies it).
        """
        cross_attn = self.cross_attn
        if memory_index is not None:
            cross_attn = [kv.index_select(memory_index) for kv in cross_attn]
        return DecoderCache(
            [kv.index_select(index) for kv in self.self_attn], cross_attn, self.length
        )


class _Stack(nn.Module):
    """Embedding, the layers, and for pre-norm a final LayerNorm."""

    def __init__(
        self, *, embedding: TokenEmbedding, layers: list[nn.Module], pre_norm: bool
    ) -> None:
        super().__init__()
        self.embed = embedding
        self.layers = nn.ModuleList(layers)
        # Pre-norm leaves the residual stream unnormalised: normalise once at the top of the stack.
        d_model = embedding.table.embedding_dim
        self.final_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()


class Encoder(_Stack):
    """Embeddings, then n_encoder_layers EncoderLayers."""

    def forward(self, src: Tensor, padding_mask: Tensor) -> Tensor:
        """Shapes: src (B, S), padding_mask (B, S) True = pad; returns memory (B, S, D)."""
        x = self.embed(src)  # (B, S, D)
        for layer in self.layers:
            x = layer(x, padding_mask)
        return self.final_norm(x)


class Decoder(_Stack):
    """Embeddings, then n_decoder_layers DecoderLayers; whole targets or positions after a cache."""

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
        self_kvs, memory_kvs = [], []
        for i, layer in enumerate(self.layers):
            x, self_kv, memory_kv = layer(
                x,
                encoder_out.memory if cache is None else cache.cross_attn[i],
                encoder_out.padding_mask,
                self_cache=None if cache is None else cache.self_attn[i],
                q_offset=start,
            )
            self_kvs.append(self_kv)
            memory_kvs.append(memory_kv)
        return self.final_norm(x), DecoderCache(self_kvs, memory_kvs, start + tgt.size(1))


class Transformer(nn.Module):
    """Encoder-decoder Transformer with relative position representations (Shaw et al. 2018).

    Keyword arguments are the ModelConfig fields (rpr_nmt/config.py) plus vocab_size and pad_id; see
    build_model. The defaults are ModelConfig's.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        pad_id: int,
        d_model: int = 512,
        n_heads: int = 8,
        d_ff: int = 2048,
        n_encoder_layers: int = 6,
        n_decoder_layers: int = 6,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        max_relative_position: int = 16,
        relative_keys: bool = True,
        relative_values: bool = True,
        sinusoidal: bool = False,
        share_relative_across_heads: bool = False,
        share_relative_across_layers: bool = False,
        tie_embeddings: bool = True,
        pre_norm: bool = False,
    ) -> None:
        """Args: see ModelConfig in rpr_nmt/config.py (one argument per field), and
        vocab_size: V, the joint source/target vocabulary; pad_id: the padding token id."""
        super().__init__()
        if max_relative_position < 0:
            raise ValueError(
                f"max_relative_position must be >= 0 (0 = off), got {max_relative_position}"
            )
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.pad_id = pad_id
        self.vocab_size = vocab_size
        relative = _RelativeSpec(
            max_relative_position,
            relative_keys,
            relative_values,
            share_relative_across_heads,
            share_relative_across_layers,
        )
        sizes = dict(
            d_model=d_model,
            n_heads=n_heads,
            d_ff=d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            pre_norm=pre_norm,
            **relative.attention_kwargs(),
        )

        src_embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        tgt_embedding = (
            src_embedding
            if tie_embeddings
            else nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        )
        embed = dict(dropout=dropout, sinusoidal=sinusoidal)
        encoder_tables = relative.shared_tables(d_model, n_heads)
        self.encoder = Encoder(
            embedding=TokenEmbedding(src_embedding, **embed),
            layers=[EncoderLayer(**sizes, **encoder_tables) for _ in range(n_encoder_layers)],
            pre_norm=pre_norm,
        )
        decoder_tables = relative.shared_tables(d_model, n_heads)
        self.decoder = Decoder(
            embedding=TokenEmbedding(tgt_embedding, **embed),
            layers=[DecoderLayer(**sizes, **decoder_tables) for _ in range(n_decoder_layers)],
            pre_norm=pre_norm,
        )
        self.output_projection = nn.Linear(d_model, vocab_size, bias=False)
        if tie_embeddings:
            self.output_projection.weight = tgt_embedding.weight
        self._init_embeddings(d_model)

    def _init_embeddings(self, d_model: int) -> None:
        # Reference Transformer: embeddings (and an untied output matrix) ~ N(0, D^-0.5), padding
        # row zero; the sqrt(D) scaling of the inputs brings embedded tokens back to unit scale.
        modules = [self.encoder.embed.table, self.decoder.embed.table, self.output_projection]
        for i, module in enumerate(modules):
            if any(module.weight is other.weight for other in modules[:i]):
                continue  # tied: initialise once
            nn.init.normal_(module.weight, mean=0.0, std=d_model**-0.5)
            if isinstance(module, nn.Embedding):
                with torch.no_grad():
                    module.weight[self.pad_id].zero_()

    def encode(self, src: Tensor) -> EncoderOutput:
        """Encode source tokens.

        Shapes:
            src: (B, S); returns memory (B, S, D) and padding_mask (B, S).
        """
        padding_mask = src.eq(self.pad_id)  # (B, S)
        return EncoderOutput(self.encoder(src, padding_mask), padding_mask)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits of every target position.

        Args:
            src: source tokens, padded with pad_id.
            tgt_in: decoder input, [BOS] + target tokens, padded with pad_id.

        Returns:
            Unnormalised next-token scores.

        Shapes:
            src: (B, S); tgt_in: (B, T); returns (B, T, V).
        """
        hidden, _ = self.decoder(tgt_in, self.encode(src))  # (B, T, D)
        return self.output_projection(hidden)  # (B, T, V)

    def decode_step(
        self, tgt: Tensor, encoder_out: EncoderOutput, cache: DecoderCache | None = None
    ) -> tuple[Tensor, DecoderCache]:
        """Logits of new target tokens at absolute positions cache.length onwards (0 without cache).

        Args:
            tgt: the new decoder-input tokens (one per step in beam search, or a block).
            encoder_out: from encode, one row per source sentence; tgt may have G rows per
                sentence (beams; consecutive rows share a sentence), which then share its memory.
            cache: from the previous call, or None at the start.

        Returns:
            (logits of the new positions, the extended cache).

        Shapes:
            tgt: (B, Tnew) with B = G x encoder rows; returns logits (B, Tnew, V).
        """
        hidden, cache = self.decoder(tgt, encoder_out, cache)  # (B, Tnew, D)
        return self.output_projection(hidden), cache  # (B, Tnew, V)


def build_model(config: Mapping[str, Any], *, vocab_size: int, pad_id: int) -> Transformer:
    """The Transformer described by a model config.

    Args:
        config: ModelConfig fields as a plain mapping (e.g. rpr_nmt.config.to_dict(cfg.model));
            missing fields take ModelConfig's defaults.
        vocab_size: size of the joint source/target vocabulary.
        pad_id: padding token id.

    Returns:
        A freshly initialised Transformer (on CPU, float32).
    """
    fields = dict(config)
    allowed = set(Transformer.__init__.__kwdefaults__ or {}) - {"vocab_size", "pad_id"}
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise TypeError(
            f"unknown model config keys {unknown}; expected ModelConfig fields {sorted(allowed)}"
        )
    return Transformer(vocab_size=vocab_size, pad_id=pad_id, **fields)
