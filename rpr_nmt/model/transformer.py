"""The encoder-decoder Transformer with relative position representations, and build_model.

Shape legend (batch-first everywhere):
    B batch, S source length, T target length, H heads, Dh head dim, D model dim (H * Dh),
    V vocabulary, R = 2k + 1 relative positions (k = max_relative_position), N beam.

Positions on two axes: an absolute method beside the embeddings (the sinusoid, a learned table,
none) and a relative method in encoder self-attention and causal decoder self-attention (Shaw's
tables in attention.py; RoPE, ALiBi, T5's buckets in positions/; none); encoder-decoder attention
has none. With neither, the model sees no word order; positions_in puts both methods in one
stack only (the encoder's or the decoder's), the other then sees none of its own. The Encoder and
Decoder stacks, and the EncoderOutput they pass, are stacks.py's.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch
from torch import Tensor, nn

from rpr_nmt.config import ModelConfig
from rpr_nmt.model.cache import DecoderCache
from rpr_nmt.model.embeddings import TokenEmbedding
from rpr_nmt.model.layers import DecoderLayer, EncoderLayer
from rpr_nmt.model.multihead import RelativePositions
from rpr_nmt.model.positions.learned import LearnedPositions
from rpr_nmt.model.positions.setting import position_problem
from rpr_nmt.model.positions.terms import RelativeTerms
from rpr_nmt.model.stacks import Decoder, Encoder, EncoderOutput

__all__ = ["Transformer", "build_model"]


class Transformer(nn.Module):
    """Encoder-decoder Transformer with relative position representations (Shaw et al. 2018), or
    another position method on either axis (absolute, relative: ModelConfig).

    Keyword arguments: one per ModelConfig field (rpr_nmt/config.py; build_model maps them), except
    that max_relative_position, relative_keys, relative_values and share_relative_across_heads
    come as one RelativePositions, `relative`; plus vocab_size, pad_id and attention_dtype. The
    position fields added with the two axes default to the methods of earlier models (sinusoid
    and Shaw, under their switches `sinusoidal` and `relative`).
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
        activation_dropout: float | None = None,
        sinusoidal: bool,
        share_relative_across_layers: bool,
        tie_embeddings: bool,
        pre_norm: bool,
        attention_dtype: torch.dtype | None = None,
        absolute_positions: str = "sinusoid",
        max_positions: int = 1024,
        relative_positions: str = "shaw",
        rope_base: float = 10000.0,
        rope_dims: int | None = None,
        rope_layout: str = "interleaved",
        t5_num_buckets: int = 32,
        t5_max_distance: int = 128,
        positions_in: str = "both",
    ) -> None:
        """Args: see ModelConfig in rpr_nmt/config.py (one argument per field, but `relative`:
        Shaw's relative positions of every self-attention, see RelativePositions), and
        vocab_size: V, the joint source/target vocabulary; pad_id: the padding token id;
        attention_dtype: precision of the attention arithmetic and the decoding cache, None = the
        input's (see RelativeMultiheadAttention and recast).

        Raises:
            ValueError: a position setting that makes no sense (positions/setting.py), in one line
                naming the model.* keys.
        """
        # First of all, while the locals are exactly the arguments: recast builds a copy from them.
        arguments = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        problem = position_problem(
            d_head=d_model // n_heads, absolute_positions=absolute_positions,
            sinusoidal=sinusoidal, max_positions=max_positions,
            relative_positions=relative_positions, max_relative_position=relative.k,
            relative_keys=relative.keys, relative_values=relative.values,
            share_relative_across_heads=relative.share_across_heads,
            share_relative_across_layers=share_relative_across_layers, rope_base=rope_base,
            rope_dims=rope_dims, rope_layout=rope_layout, t5_num_buckets=t5_num_buckets,
            t5_max_distance=t5_max_distance, positions_in=positions_in,
        )  # fmt: skip
        if problem:
            raise ValueError(problem)
        self.arguments: dict[str, Any] = arguments
        self.pad_id = pad_id
        self.vocab_size = vocab_size

        # positions_in: the stacks that get the position methods; the other one gets none.
        placed = {
            "encoder": positions_in in ("both", "encoder"),
            "decoder": positions_in in ("both", "decoder"),
        }

        def layer_stack(
            layer: type[EncoderLayer | DecoderLayer], n_layers: int, stack: str
        ) -> list[nn.Module]:
            """The layers of one stack; with share_relative_across_layers they hold one w^K, w^V."""
            shaw = relative if placed[stack] else RelativePositions()  # k = 0: no tables
            shared = share_relative_across_layers and shaw.enabled
            tables = shaw.new_tables(n_heads, d_model // n_heads) if shared else None
            return [
                layer(
                    d_model=d_model,
                    n_heads=n_heads,
                    d_ff=d_ff,
                    dropout=dropout,
                    attention_dropout=attention_dropout,
                    activation_dropout=activation_dropout,
                    pre_norm=pre_norm,
                    relative=shaw,
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

        def embedding(table: nn.Embedding, stack: str) -> TokenEmbedding:
            """One stack's embedding with its absolute positions: the sinusoid, a table, none."""
            if not placed[stack]:
                return TokenEmbedding(table, dropout=dropout, sinusoidal=False)
            learned = None
            if absolute_positions == "learned":
                learned = LearnedPositions(max_positions, d_model)
            return TokenEmbedding(table, dropout=dropout, sinusoidal=sinusoidal, learned=learned)

        def relative_terms(n_layers: int, stack: str, *, causal: bool) -> RelativeTerms | None:
            """One stack's RoPE, ALiBi or T5 terms; None for Shaw (shaw_k) and none."""
            if relative_positions in ("shaw", "none") or not placed[stack]:
                return None  # a method missing from RelativeTerms.METHODS is refused there
            return RelativeTerms(
                method=relative_positions, n_layers=n_layers, n_heads=n_heads,
                d_head=d_model // n_heads, causal=causal,
                share_across_layers=share_relative_across_layers, rope_base=rope_base,
                rope_dims=rope_dims, rope_layout=rope_layout, t5_num_buckets=t5_num_buckets,
                t5_max_distance=t5_max_distance,
            )  # fmt: skip

        self.encoder = Encoder(
            embedding=embedding(src_embedding, "encoder"),
            layers=layer_stack(EncoderLayer, n_encoder_layers, "encoder"),
            pre_norm=pre_norm,
            relative_terms=relative_terms(n_encoder_layers, "encoder", causal=False),
            shaw_k=relative.k if relative.enabled and placed["encoder"] else 0,
        )
        self.decoder = Decoder(
            embedding=embedding(tgt_embedding, "decoder"),
            layers=layer_stack(DecoderLayer, n_decoder_layers, "decoder"),
            pre_norm=pre_norm,
            relative_terms=relative_terms(n_decoder_layers, "decoder", causal=True),
            shaw_k=relative.k if relative.enabled and placed["decoder"] else 0,
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

        Raises:
            TypeError: src or tgt_in is not a tensor of integer ids.
            ValueError: one is not (B, length), holds an id outside [0, V) (checked on the CPU),
                or their B differ.
        """
        if not torch.compiler.is_compiling():  # value-dependent: would break the traced graph
            _check_token_ids(src, tgt_in, vocab_size=self.vocab_size)
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


def _check_token_ids(src: Tensor, tgt_in: Tensor, *, vocab_size: int) -> None:
    """Refuse token tensors the embeddings would misread or fail on with torch's own message,
    naming the argument. The range is checked on the CPU only: on an accelerator it would cost a
    host sync per forward, and an id out of range stops there with a device-side assert."""
    for name, ids in (("src", src), ("tgt_in", tgt_in)):
        if not isinstance(ids, Tensor) or ids.dtype not in (torch.int64, torch.int32):
            kind = ids.dtype if isinstance(ids, Tensor) else type(ids).__name__
            raise TypeError(f"{name}: token ids must be an int64 (or int32) tensor, got {kind}")
        if ids.dim() != 2:
            raise ValueError(f"{name}: token ids must be (batch, length), got {tuple(ids.shape)}")
        if ids.numel() and ids.device.type == "cpu":
            low, high = (int(v) for v in torch.aminmax(ids))
            bad = low if low < 0 else high if high >= vocab_size else None
            if bad is not None:
                raise ValueError(f"{name}: token id {bad} outside the vocabulary [0, {vocab_size})")
    if src.size(0) != tgt_in.size(0):
        raise ValueError(
            f"src has {src.size(0)} sentences but tgt_in {tgt_in.size(0)}: one target row each"
        )


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
    fields = asdict(cfg)
    relative = RelativePositions(
        k=fields.pop("max_relative_position"),
        keys=fields.pop("relative_keys"),
        values=fields.pop("relative_values"),
        share_across_heads=fields.pop("share_relative_across_heads"),
    )
    return Transformer(
        vocab_size=vocab_size, pad_id=pad_id, attention_dtype=attention_dtype, relative=relative,
        **fields,
    )  # fmt: skip
