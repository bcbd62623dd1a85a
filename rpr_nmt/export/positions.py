"""Position methods onto CTranslate2's Transformer spec: what each becomes, and what is refused.

Shape legend: N rows of an absolute table, D model dim, U T5 buckets, H heads, L layers.

    ours (rpr_nmt/config.py)              CTranslate2 4.8.5 spec (python/ctranslate2/specs)
    sinusoid (sinusoidal=true)            position_encodings.encodings: our table, N rows
    learned (absolute_positions=learned)  position_encodings.encodings: the trained table (N, D)
    shaw (k > 0)                          relative_position_keys / _values (ctranslate2.py)
    rope                                  rotary_dim, rotary_interleave, rotary_base of every
                                          self-attention of the stack
    t5                                    relative_attention_bias (U, H) and
                                          relative_attention_max_distance of every self-attention
    alibi, in the decoder only            the decoder's alibi flag
    no position at all                    Shaw tables of one zero row, k = 0 (ctranslate2.py)
    alibi in the encoder                  refused (below)
    any method not above                  refused: never written as another method's spec

Each stack gets its own options: with model.positions_in=encoder|decoder the stack without the
methods is the "no position at all" row.

What CTranslate2 computes, read in its sources (src/layers/attention.cc, attention_layer.cc,
transformer.cc, src/ops/rotary_cpu.cc), and why the mapping is exact:

- RoPE: angles m / base^(2i / rotary_dim) in float32 for positions m from the step (decoder) or 0
  (encoder); interleave pairs features (2i, 2i + 1), otherwise (i, i + rotary_dim / 2); features
  past rotary_dim are copied. The same rotation as rpr_nmt/model/positions/rope.py, both layouts.
- T5: get_relative_position_bucket buckets j - i as t5.py does (bidirectional = not a decoder:
  the upper half for j > i; a decoder's n = max(i - j, 0)); log-spaced past num_buckets / 2 of a
  side, up to relative_attention_max_distance; U is read from the table's rows. The bias is
  added after the 1 / sqrt(Dh) scaling, as ours. It is computed once per forward from the first
  layer's table and reused by the later layers (position_bias is shared along the stack), so
  only a table shared by the layers (T5's own setting) is representable.
- Absolute positions: an encoder or decoder builds no position encoder when its first layer's
  self-attention has positions of its own (has_positional_embeddings: relative keys, T5 bias,
  rotary, ALiBi), so an absolute method beside a relative one would be dropped: refused.
- ALiBi: only TransformerDecoderSpec has the alibi flag; an encoder cannot hold it, so ours is
  refused wherever it biases encoder self-attention. In a decoder CTranslate2 adds slope_h times
  each key's position counted back from the last key, j - (Tk - 1), with Press et al.'s slopes
  (those of the nearest smaller power of two, then every other one of twice that), unscaled,
  after the 1 / sqrt(Dh) scaling: for the last query, ours (-m_h (i - j)); for earlier queries of
  a causal prefix it differs from ours by a constant per query, which softmax cancels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from rpr_nmt.config import position_stacks
from rpr_nmt.decode.constraints import PositionLimits, position_limits
from rpr_nmt.model import Transformer
from rpr_nmt.model.embeddings import sinusoidal_encoding
from rpr_nmt.model.positions.setting import INT32_MAX
from rpr_nmt.model.stacks import Decoder, Encoder

__all__ = [
    "exported_table",
    "position_refusal",
    "set_stack_positions",
    "spec_array",
    "stack_methods",
    "stack_options",
]

ENGINE = "CTranslate2"
# The methods mapped above (ALiBi in an encoder is refused with its reason); any other is refused.
EXPORTED_ABSOLUTE = ("sinusoid", "learned", "none")
EXPORTED_RELATIVE = ("shaw", "rope", "t5", "alibi", "none")  # ALiBi: a decoder's only
STACKS = ("encoder", "decoder")


def stack_methods(model: Transformer, stack: str) -> tuple[str, str]:
    """The (absolute, relative) methods one stack puts to work, "none" where it has none: the
    model's settings, or none at all in the stack that model.positions_in leaves without them.

    Args:
        model: the Transformer to export.
        stack: "encoder" or "decoder".

    Returns:
        e.g. ("sinusoid", "none"), ("none", "shaw"), ("learned", "none"), ("none", "rope").
    """
    args = model.arguments
    if position_stacks(args) not in ("both", stack):
        return "none", "none"
    absolute = args.get("absolute_positions", "sinusoid")
    if absolute == "sinusoid" and not args["sinusoidal"]:
        absolute = "none"
    relative = args.get("relative_positions", "shaw")
    if relative == "shaw" and getattr(model, stack).shaw_k == 0:  # k = 0, or neither a^K nor a^V
        relative = "none"
    return absolute, relative


def position_refusal(model: Transformer) -> str | None:
    """Why CTranslate2 cannot hold this model's positions exactly, in one line; None if it can.

    Each stack is judged on its own: with model.positions_in=encoder|decoder the other stack has
    no position at all, which CTranslate2 holds (tables of one zero row).
    """
    for stack in STACKS:
        problem = _stack_refusal(model, stack, *stack_methods(model, stack))
        if problem:
            return problem
    return None


def _stack_refusal(model: Transformer, stack: str, absolute: str, relative: str) -> str | None:
    """Why one stack's (absolute, relative) methods cannot be exported; None if they can."""
    if relative == "alibi" and stack == "encoder":
        return (
            f"model.relative_positions=alibi cannot be exported: {ENGINE} applies ALiBi in "
            "decoders only (TransformerDecoderSpec's alibi flag; an encoder has none), and this "
            "model's encoder self-attention has ALiBi's bias too; translate it with "
            "rpr-nmt-translate (ALiBi in the decoder only, model.positions_in=decoder, exports)"
        )
    for axis, method, exported in (
        ("absolute", absolute, EXPORTED_ABSOLUTE),
        ("relative", relative, EXPORTED_RELATIVE),
    ):
        if method not in exported:
            return (
                f"model.{axis}_positions={method} cannot be exported: rpr_nmt/export/positions.py "
                f"maps only {', '.join(exported)} onto {ENGINE}'s spec; translate it with "
                "rpr-nmt-translate"
            )
    max_distance = model.arguments.get("t5_max_distance", 0)
    if relative == "t5" and max_distance > INT32_MAX:
        return (
            f"model.t5_max_distance={max_distance} cannot be exported: {ENGINE} stores it as "
            f"int32 (at most {INT32_MAX}), and another value buckets the distances differently; "
            "translate it with rpr-nmt-translate, or train with a smaller one (128 in T5)"
        )
    if relative == "t5" and not _one_t5_table(getattr(model, stack)):
        return (
            "model.share_relative_across_layers=false with model.relative_positions=t5 (one "
            f"bias table per layer) cannot be exported: {ENGINE} computes T5's bias from the "
            "first layer's table and reuses it in every layer of a stack; train with "
            "model.share_relative_across_layers=true"
        )
    if absolute == "none" or relative == "none":
        return None
    if absolute == "sinusoid" and relative == "shaw":  # the message of the first exporter
        k = model.arguments["relative"].k
        return (
            f"model.sinusoidal=true with relative positions (model.max_relative_position={k}) "
            f"cannot be exported: {ENGINE} adds no absolute encoding to a Transformer with "
            "relative tables; train with model.sinusoidal=false (or model.max_relative_position=0)"
        )
    switch, off = (
        ("model.sinusoidal=true", "model.sinusoidal=false")
        if absolute == "sinusoid"
        else (f"model.absolute_positions={absolute}", "model.absolute_positions=none")
    )
    return (
        f"{switch} with model.relative_positions={relative} cannot be exported: {ENGINE} adds "
        "no absolute positions to a Transformer whose self-attention has positions of its own "
        f"(tables, rotation or bias); train with {off} (or model.relative_positions=none)"
    )


def stack_options(model: Transformer, stack: str) -> dict[str, Any]:
    """Keyword arguments of one stack's TransformerEncoderSpec or TransformerDecoderSpec for its
    positions (stack: "encoder" or "decoder").

    relative_position (Shaw's tables, also the one-zero-row tables of a stack without any
    position), relative_attention_bias (T5), rotary_dim / rotary_interleave / rotary_base (RoPE) or
    alibi (a decoder's, with negative positions and the bias not scaled, as ours); with none of
    them the spec has a position_encodings table (sinusoid or learned).
    """
    absolute, relative = stack_methods(model, stack)
    if relative == "rope":
        rotary = getattr(model, stack).relative_terms.rotary
        return dict(
            rotary_dim=rotary.dims, rotary_interleave=rotary.interleaved, rotary_base=rotary.base
        )
    if relative == "t5":
        return dict(relative_attention_bias=True)
    if relative == "alibi":  # decoders only (position_refusal)
        return dict(alibi=True, alibi_use_positive_positions=False, scale_alibi=False)
    return dict(relative_position=absolute == "none")  # shaw, or no position at all (k = 0)


def set_stack_positions(stack_spec: Any, stack: Encoder | Decoder, *, max_positions: int) -> None:
    """The absolute table or T5's bias of one stack (encoder or decoder spec); RoPE needs none.

    Args:
        stack_spec: the TransformerEncoderSpec or TransformerDecoderSpec, built with
            stack_options.
        stack: our Encoder or Decoder.
        max_positions: rows N of an exported sinusoid table (a learned table keeps its own).
    """
    terms = stack.relative_terms
    if terms is not None and terms.method == "t5":
        bias = spec_array(terms.t5[0].weight)  # (U, H): CTranslate2 gathers rows by bucket
        max_distance = np.int32(terms.t5[0].max_distance)
        for layer in stack_spec.layer:  # one array: aliased when saved, read from layer 0
            layer.self_attention.relative_attention_bias = bias
            layer.self_attention.relative_attention_max_distance = max_distance
    if not hasattr(stack_spec, "position_encodings") or _has_attention_positions(stack_spec):
        return  # positions inside self-attention: CTranslate2 builds no position encoder
    if stack.embed.learned is not None:
        stack_spec.position_encodings.encodings = spec_array(stack.embed.learned.table)  # (N, D)
    elif stack.embed.sinusoidal:
        d_model = stack.embed.table.embedding_dim
        table = sinusoidal_encoding(torch.arange(max_positions), d_model)  # (N, D)
        stack_spec.position_encodings.encodings = spec_array(table)


def exported_table(model: Transformer, *, max_positions: int) -> tuple[str | None, PositionLimits]:
    """The kind of absolute table the export writes ("learned", "sinusoid" or None) and each
    stack's rows: CTranslate2 fails past a table's last row, so these cap outputs and refuse
    sources as ours does for a learned table (rpr_nmt/export/decoding.py).

    A learned table keeps its own rows; the sinusoid gets max_positions rows, in the stacks that
    model.positions_in gives it (ours has no last row, the exported one has); a stack without an
    absolute method has no table and no limit (None).
    """
    kinds = [stack_methods(model, stack)[0] for stack in STACKS]
    if "sinusoid" in kinds:
        rows = [max_positions if kind == "sinusoid" else None for kind in kinds]
        return "sinusoid", PositionLimits(*rows)
    learned = position_limits(model)  # (None, None) without a learned table
    return ("learned" if learned != (None, None) else None), learned


def _has_attention_positions(stack_spec: Any) -> bool:
    """Whether the stack's self-attention holds positions (CTranslate2 then ignores any table)."""
    attention = stack_spec.layer[0].self_attention
    return any(
        hasattr(attention, name)
        for name in ("relative_position_keys", "relative_attention_bias", "rotary_dim")
    )


def _one_t5_table(stack: Encoder | Decoder) -> bool:
    """Whether a stack's T5 tables are one (shared), or per-layer tables that are all equal."""
    tables = [t5.weight.detach() for t5 in stack.relative_terms.t5]
    return all(torch.equal(table, tables[0]) for table in tables[1:])


def spec_array(t: Tensor) -> np.ndarray:
    """A float32 numpy copy on CPU (the spec's variables)."""
    return t.detach().to(device="cpu", dtype=torch.float32).numpy().copy()
