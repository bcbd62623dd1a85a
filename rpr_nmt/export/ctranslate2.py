"""Export a Transformer to CTranslate2: each of our parameters onto CTranslate2's Transformer spec.

Shape legend: V vocabulary, D model dim, H heads, Dh head dim, R = 2k + 1 relative positions,
F feed-forward width, N absolute positions in an exported sinusoid table.

What CTranslate2 (4.x, src/layers/attention.cc and transformer.cc) computes, and how ours maps:

    ours                                       CTranslate2 spec
    embedding * sqrt(D)                        embeddings, scale_embeddings=True (sqrt of D)
    tied src / tgt / output matrices           the same array three times (aliased on save)
    w^K, w^V shared by heads (R, Dh)           relative_position_keys / _values of each
                                               self-attention; k = (R - 1) / 2 read from keys
    r_ij = clip(j - i, k) + k                  make_relative_positions: the same index, with
                                               queries at the end of the keys when decoding
    a^K only, or a^V only                      the other table all zeros (adds exactly 0)
    no positions at all (k = 0, no sinusoid)   relative tables of one zero row (k = 0)
    sinusoid only (k = 0)                      position_encodings: our own table, N rows (its
                                               built-in sinusoid differs: [sin | cos], from 1)
    learned table, RoPE, T5's bias             position_encodings, rotary_*, relative_attention_
                                               bias: export/positions.py, with the reasons
    q, k, v, out projections                   self: linear[0] = [q; k; v], linear[1] = out;
                                               cross: linear[0] = q, [1] = [k; v], [2] = out
    SublayerNorm before / after a sublayer     layer_norm of the sublayer, pre_norm flag
    final LayerNorm (pre-norm only)            encoder / decoder layer_norm
    feed-forward fc1, ReLU, fc2                ffn linear_0, RELU, linear_1
    output_projection (no bias)                decoder projection
    nn.LayerNorm eps                           config layer_norm_epsilon
    source = ids + EOS, target starts at BOS   add_source_eos, decoder_start_token = BOS piece

What it cannot hold is refused (check_exportable), never approximated: one table per head,
absolute with relative positions together (CTranslate2 builds no position encoder when an
attention layer has relative tables, a rotation or a bias), ALiBi in the encoder (a decoder's only
in CTranslate2) and T5 tables per layer (CTranslate2 reuses the first layer's): export/positions.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from rpr_nmt.data import BOS_ID, EOS_ID, UNK_ID, Tokenizer
from rpr_nmt.decode.constraints import PositionLimits
from rpr_nmt.export.decoding import SinusoidTableLimits
from rpr_nmt.export.positions import (
    exported_table,
    position_refusal,
    set_stack_positions,
    stack_options,
)
from rpr_nmt.export.positions import spec_array as _array
from rpr_nmt.model import RelativeMultiheadAttention, Transformer
from rpr_nmt.model.layers import FeedForward, SublayerNorm

__all__ = [
    "CTRANSLATE2_VERSION",
    "QUANTIZATIONS",
    "ExportError",
    "build_spec",
    "check_exportable",
    "export_ctranslate2",
    "read_position_limits",
]

CTRANSLATE2_VERSION = "4.8.5"  # the version this mapping was written against and tested with
# ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES, listed here so that --help needs no extra.
QUANTIZATIONS = (
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)
SENTENCEPIECE_FILE = "sentencepiece.model"
EXPORT_INFO_FILE = "rpr_nmt_export.json"
LIMITS_KEY = "position_limits"  # in EXPORT_INFO_FILE: {"encoder": rows or null, "decoder": ...}
TABLE_KEY = "position_table"  # in EXPORT_INFO_FILE: whose rows they are: learned, sinusoid or null
# What an export folder holds: CTranslate2's model, config and vocabularies, and ours.
EXPORT_FILES = frozenset(
    {
        "model.bin",
        "config.json",
        "shared_vocabulary.json",
        "source_vocabulary.json",
        "target_vocabulary.json",
        "vocabulary.json",
        SENTENCEPIECE_FILE,
        EXPORT_INFO_FILE,
    }
)


class ExportError(Exception):
    """A model or setting that cannot be exported; the one-line message says what would work."""


def check_exportable(model: Transformer) -> None:
    """Refuse a model that CTranslate2 cannot represent exactly (ExportError, one line).

    Args:
        model: the Transformer with the weights to export.

    Raises:
        ExportError: names the setting and the override that would make a model exportable.
    """
    problem = position_refusal(model)  # export/positions.py
    if problem:
        raise ExportError(problem)
    for name, table in _relative_tables(model):
        if table.dim() == 3 and not bool((table == table[:1]).all()):
            raise ExportError(
                f"model.share_relative_across_heads=false (one w^K / w^V per head, {name} "
                f"{tuple(table.shape)}) cannot be exported: CTranslate2 holds one key and one "
                "value table per layer, shared by all heads; train with "
                "model.share_relative_across_heads=true"
            )


def build_spec(model: Transformer, tokenizer: Tokenizer, *, max_positions: int = 1024) -> Any:
    """The CTranslate2 TransformerSpec of a model, with its vocabulary and special tokens.

    Args:
        model: an exportable Transformer (check_exportable).
        tokenizer: its sentencepiece model; the vocabulary is its pieces in id order, so ids match.
        max_positions: rows of the absolute table N, for a sinusoid-only model (ignored otherwise).

    Returns:
        A ctranslate2.specs.TransformerSpec, not yet validated.
    """
    from ctranslate2.specs import common_spec, transformer_spec

    check_exportable(model)
    args = model.arguments
    common = dict(pre_norm=args["pre_norm"], activation=common_spec.Activation.RELU)
    # TransformerSpec.from_config's, with the options it does not pass on (rotary, alibi), and
    # each stack's own positions (model.positions_in may leave one without).
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(
            args["n_encoder_layers"], args["n_heads"], **common, **stack_options(model, "encoder")
        ),
        transformer_spec.TransformerDecoderSpec(
            args["n_decoder_layers"], args["n_heads"], **common, **stack_options(model, "decoder")
        ),
    )
    for stack, ours in ((spec.encoder, model.encoder), (spec.decoder, model.decoder)):
        embeddings = stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
        embeddings.weight = _array(ours.embed.table.weight)  # (V, D)
        stack.scale_embeddings = True  # times sqrt(D), as TokenEmbedding
        set_stack_positions(stack, ours, max_positions=max_positions)  # tables, T5's bias
        if args["pre_norm"]:
            _set_norm(stack.layer_norm, ours.final_norm)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder.layers):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.attn_norm, self_attn=True)
        _set_ffn(layer_spec.ffn, layer.ffn, layer.ffn_norm)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder.layers):
        _set_attention(
            layer_spec.self_attention, layer.self_attn, layer.self_attn_norm, self_attn=True
        )
        _set_attention(layer_spec.attention, layer.cross_attn, layer.cross_attn_norm)
        _set_ffn(layer_spec.ffn, layer.ffn, layer.ffn_norm)
    spec.decoder.projection.weight = _array(model.output_projection.weight)  # (V, D)

    pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]
    if len(pieces) != model.vocab_size:
        raise ExportError(
            f"the BPE model has {len(pieces)} pieces but the model {model.vocab_size} embeddings: "
            "export the checkpoint with the BPE model it was trained with"
        )
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.unk_token = pieces[UNK_ID]
    spec.config.bos_token = pieces[BOS_ID]
    spec.config.eos_token = pieces[EOS_ID]
    spec.config.decoder_start_token = pieces[BOS_ID]  # decoder input = [BOS] + ids
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True  # source = ids + [EOS]
    spec.config.layer_norm_epsilon = float(model.encoder.layers[0].ffn_norm.eps)
    return spec


def check_output_dir(output_dir: Path, *, force: bool) -> None:
    """Refuse an output folder that exists, unless `force` and it holds a previous export alone.

    --force replaces the folder whole (CTranslate2's converter deletes it first), so it is honoured
    only for a folder of export files (EXPORT_FILES), never for a run folder, the working
    directory or anything else that merely exists.

    Raises:
        ExportError: one line naming the folder, what is in it, and what to do.
    """
    if not output_dir.exists():
        return
    if not force:
        raise ExportError(f"{output_dir} exists: choose another -o DIR, or pass --force")
    if not output_dir.is_dir():
        raise ExportError(f"{output_dir} is not a folder: choose another -o DIR")
    foreign = sorted(p.name for p in output_dir.iterdir() if p.name not in EXPORT_FILES)
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        raise ExportError(
            f"{output_dir} is not a previous export (it holds {shown}): --force replaces only a "
            "folder of rpr-nmt-export's files; choose another -o DIR"
        )
    if output_dir.resolve() in (Path.cwd(), *Path.cwd().parents):
        raise ExportError(
            f"{output_dir} is the working directory or above it: choose another -o DIR"
        )


def export_ctranslate2(
    model: Transformer,
    tokenizer: Tokenizer,
    output_dir: str | Path,
    *,
    quantization: str | None = None,
    max_positions: int = 1024,
    force: bool = False,
    info: dict[str, Any] | None = None,
) -> Path:
    """Write a CTranslate2 model and its sentencepiece model, so that output_dir alone translates.

    Args:
        model: the Transformer with the weights to export (moved to CPU float32 copies here).
        tokenizer: the checkpoint's BPE model, written as output_dir/sentencepiece.model.
        output_dir: the model folder to create.
        quantization: weight type, one of QUANTIZATIONS; None keeps float32.
        max_positions: rows of the absolute table (sinusoid-only models).
        force: replace an existing output_dir that holds a previous export (check_output_dir).
        info: provenance written to output_dir/rpr_nmt_export.json (checkpoint, step, ...),
            beside the rows of each stack's absolute table, learned or sinusoid
            (read_position_limits).

    Returns:
        output_dir.

    Raises:
        ExportError: the model cannot be exported, ctranslate2 is missing, a bad quantization, or
            output_dir exists without force, or with force is not a previous export.
    """
    check_exportable(model)  # first: a refusal does not depend on the optional package
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ExportError(f"quantization {quantization!r}: use one of {', '.join(QUANTIZATIONS)}")
    output_dir = Path(output_dir)
    check_output_dir(output_dir, force=force)
    try:
        from ctranslate2.converters.converter import Converter
    except ImportError as e:
        raise ExportError(
            "the ctranslate2 package is not installed: pip install 'rpr-nmt[export]' "
            f"(ctranslate2=={CTRANSLATE2_VERSION})"
        ) from e
    spec = build_spec(model, tokenizer, max_positions=max_positions)

    class _SpecConverter(Converter):
        """CTranslate2's converter steps (validate, alias, quantize, save) on a ready spec."""

        def _load(self) -> Any:
            return spec

    _SpecConverter().convert(str(output_dir), quantization=quantization, force=force)
    (output_dir / SENTENCEPIECE_FILE).write_bytes(tokenizer.proto)
    table, limits = exported_table(model, max_positions=max_positions)  # caps and refusals
    record = {
        **(info or {}),
        "quantization": quantization or "float32",
        LIMITS_KEY: limits._asdict(),
        TABLE_KEY: table,
    }
    (output_dir / EXPORT_INFO_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return output_dir


def read_position_limits(model_dir: str | Path) -> PositionLimits:
    """The rows of an exported model's absolute position tables, learned or sinusoid (None where
    a stack has none), for translate_ctranslate2 and max_decoding_length: CTranslate2 fails past
    a table's last row. A sinusoid's come as SinusoidTableLimits, so that a refusal names the
    export's --max-positions rather than model.max_positions.

    Raises:
        ExportError: the folder has no record of them (exported before rpr-nmt wrote them; for a
            sinusoid model, before it wrote the sinusoid's).
    """
    path = Path(model_dir) / EXPORT_INFO_FILE
    record = json.loads(path.read_text())
    limits = record.get(LIMITS_KEY)
    if limits is None:
        raise ExportError(
            f"{path} has no {LIMITS_KEY}: export the checkpoint again with rpr-nmt-export"
        )
    rows = PositionLimits(encoder=limits["encoder"], decoder=limits["decoder"])
    if TABLE_KEY not in record and _sinusoid_model(record.get("model") or {}):
        raise ExportError(
            f"{path} records no rows for its sinusoid table (exported before rpr-nmt recorded "
            "them): export the checkpoint again with rpr-nmt-export"
        )
    return SinusoidTableLimits(*rows) if record.get(TABLE_KEY) == "sinusoid" else rows


def _sinusoid_model(model: dict[str, Any]) -> bool:
    """Whether an export record's model settings (asdict of ModelConfig) put the sinusoid in a
    stack: an exportable model then has nothing else there, so the export wrote its table."""
    return (
        bool(model.get("sinusoidal")) and model.get("absolute_positions", "sinusoid") == "sinusoid"
    )


def _relative_tables(model: Transformer) -> list[tuple[str, Tensor]]:
    """Every relative table of the self-attention modules, by parameter name."""
    tables = []
    for name, module in model.named_modules():
        if isinstance(module, RelativeMultiheadAttention) and module.relative.k > 0:
            for term in ("rel_keys", "rel_values"):
                table = getattr(module, term)
                if table is not None:
                    tables.append((f"{name}.{term}", table.detach()))
    return tables


def _set_norm(spec: Any, norm: nn.LayerNorm) -> None:
    spec.gamma = _array(norm.weight)  # (D,)
    spec.beta = _array(norm.bias)  # (D,)


def _set_linear(spec: Any, *linears: nn.Linear) -> None:
    """One spec linear from one of ours, or several fused along the output axis."""
    spec.weight = np.concatenate([_array(lin.weight) for lin in linears])  # (sum out, D)
    spec.bias = np.concatenate([_array(lin.bias) for lin in linears])  # (sum out,)


def _set_ffn(spec: Any, ffn: FeedForward, norm: SublayerNorm) -> None:
    _set_norm(spec.layer_norm, norm)
    _set_linear(spec.linear_0, ffn.fc1)  # (F, D)
    _set_linear(spec.linear_1, ffn.fc2)  # (D, F)


def _set_attention(
    spec: Any, attn: RelativeMultiheadAttention, norm: SublayerNorm, *, self_attn: bool = False
) -> None:
    """Projections, sublayer norm and (self-attention) relative tables of one attention module.

    The default queries_scale of CTranslate2 is 1 / sqrt(Dh), ours too (attention.py, eq. 4).
    """
    _set_norm(spec.layer_norm, norm)
    if self_attn:
        _set_linear(spec.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)  # (3D, D)
    else:
        _set_linear(spec.linear[0], attn.q_proj)  # (D, D)
        _set_linear(spec.linear[1], attn.k_proj, attn.v_proj)  # (2D, D)
    _set_linear(spec.linear[-1], attn.out_proj)  # (D, D)
    if self_attn and hasattr(spec, "relative_position_keys"):  # absent in a sinusoid-only spec
        keys, values = _shared_table(attn.rel_keys), _shared_table(attn.rel_values)
        if keys is None and values is None:  # no relative term: one zero row, k = 0
            keys = values = torch.zeros(1, attn.d_head)
        # CTranslate2 reads k from the keys table, so a missing term gets a zero table of R rows.
        spec.relative_position_keys = _array(keys if keys is not None else torch.zeros_like(values))
        spec.relative_position_values = _array(
            values if values is not None else torch.zeros_like(keys)
        )  # (R, Dh)


def _shared_table(table: Tensor | None) -> Tensor | None:
    """The (R, Dh) table all heads use: the table itself, or head 0 of identical per-head ones."""
    if table is None:
        return None
    table = table.detach()
    return table[0] if table.dim() == 3 else table  # (R, Dh); check_exportable ran before
