"""The encoder-decoder Transformer with relative position representations, and build_model.

Shape legend (batch-first everywhere):
    B batch, S source length, T target length, H heads, Dh head dim, D model dim (H * Dh),
    V vocabulary, R = 2k + 1 relative positions (k = max_relative_position), N beam.

Relative positions (attention.py) live in encoder self-attention and causal decoder self-attention
only; encoder-decoder attention has none. Without them, and without the sinusoid, the model sees no
word order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from rpr_nmt.config import ModelConfig
from rpr_nmt.model.cache import DecoderCache
from rpr_nmt.model.embeddings import TokenEmbedding
from rpr_nmt.model.layers import DecoderLayer, EncoderLayer
from rpr_nmt.model.multihead import RelativePositions

__all__ = ["Decoder", "Encoder", "EncoderOutput", "Transformer", "build_model"]


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

    Keyword arguments: one per ModelConfig field (rpr_nmt/config.py; build_model maps them), except
    that max_relative_position, relative_keys, relative_values and share_relative_across_heads
    come as one RelativePositions, `relative`; plus vocab_size, pad_id and attention_dtype.
    """

    def __init__(
        self,
        *,
        vocab_size: int,
        pad_id: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        n_encoder_layers: int,
        n_decoder_layers: int,
        dropout: float,
        attention_dropout: float,
        relative: RelativePositions,
        sinusoidal: bool,
        share_relative_across_layers: bool,
        tie_embeddings: bool,
        pre_norm: bool,
        attention_dtype: torch.dtype | None = None,
    ) -> None:
        """Args: see ModelConfig in rpr_nmt/config.py (one argument per field, but `relative`:
        the relative positions of every self-attention, see RelativePositions), and
        vocab_size: V, the joint source/target vocabulary; pad_id: the padding token id;
        attention_dtype: precision of the attention arithmetic and the decoding cache, None = the
        input's (see RelativeMultiheadAttention and recast)."""
        # First of all, while the locals are exactly the arguments: recast builds a copy from them.
        arguments = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.arguments: dict[str, Any] = arguments
        self.pad_id = pad_id
        self.vocab_size = vocab_size

        def layer_stack(layer: type[EncoderLayer | DecoderLayer], n_layers: int) -> list[nn.Module]:
            """The layers of one stack; with share_relative_across_layers they hold one w^K, w^V."""
            shared = share_relative_across_layers and relative.enabled
            tables = relative.new_tables(n_heads, d_model // n_heads) if shared else None
            return [
                layer(
                    d_model=d_model,
                    n_heads=n_heads,
                    d_ff=d_ff,
                    dropout=dropout,
                    attention_dropout=attention_dropout,
                    pre_norm=pre_norm,
                    relative=relative,
                    tables=tables,
                    attention_dtype=attention_dtype,
                )
                for _ in range(n_layers)
            ]

        src_embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        tgt_embedding = (
            src_embedding
            if tie_embeddings
            else nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        )
        self.encoder = Encoder(
            embedding=TokenEmbedding(src_embedding, dropout=dropout, sinusoidal=sinusoidal),
            layers=layer_stack(EncoderLayer, n_encoder_layers),
            pre_norm=pre_norm,
        )
        self.decoder = Decoder(
            embedding=TokenEmbedding(tgt_embedding, dropout=dropout, sinusoidal=sinusoidal),
            layers=layer_stack(DecoderLayer, n_decoder_layers),
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

    def recast(self, dtype: torch.dtype, *, attention_dtype: torch.dtype | None) -> Transformer:
        """A copy of this model with weights in `dtype` and attention in `attention_dtype`.

        The copy is built with this model's arguments but attention_dtype, then loaded with its
        weights (so tied and shared weights stay tied), on the same device and in the same mode.
        This model is left as it is. Decoding in bf16 uses recast(torch.bfloat16,
        attention_dtype=torch.float32) (rpr_nmt.decode.translate.decoding_model).
        """
        device = next(self.parameters()).device
        with torch.random.fork_rng(devices=[]):  # the copy's own initialisation is thrown away
            copy = Transformer(**{**self.arguments, "attention_dtype": attention_dtype})
        copy.load_state_dict(self.state_dict())
        return copy.to(device=device, dtype=dtype).train(self.training)

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


def build_model(
    cfg: ModelConfig,
    *,
    vocab_size: int,
    pad_id: int,
    attention_dtype: torch.dtype | None = None,
) -> Transformer:
    """The Transformer described by a model config.

    Args:
        cfg: the model's size and position representation; each field is the Transformer
            argument of the same name, but for the four that make up `relative`.
        vocab_size: size of the joint source/target vocabulary.
        pad_id: padding token id.
        attention_dtype: precision of the attention arithmetic; None = the input's (see
            RelativeMultiheadAttention).

    Returns:
        A freshly initialised Transformer (on CPU, float32).
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(
            f"build_model takes a ModelConfig, got {type(cfg).__name__}; "
            "build one with ModelConfig(**fields)"
        )
    return Transformer(
        vocab_size=vocab_size,
        pad_id=pad_id,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_ff=cfg.d_ff,
        n_encoder_layers=cfg.n_encoder_layers,
        n_decoder_layers=cfg.n_decoder_layers,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        relative=RelativePositions(
            k=cfg.max_relative_position,
            keys=cfg.relative_keys,
            values=cfg.relative_values,
            share_across_heads=cfg.share_relative_across_heads,
        ),
        sinusoidal=cfg.sinusoidal,
        share_relative_across_layers=cfg.share_relative_across_layers,
        tie_embeddings=cfg.tie_embeddings,
        pre_norm=cfg.pre_norm,
        attention_dtype=attention_dtype,
    )
