"""Which position methods a model may combine, and the one-line refusal of those it may not.

Positions sit on two axes (ModelConfig in rpr_nmt/config.py): an absolute method beside the
embeddings (sinusoid, learned, none) and a relative method inside self-attention (shaw, rope, alibi,
t5, none). Any absolute method goes with any relative one: the paper's "both" is sinusoid + shaw,
and sinusoid + rope or learned + alibi are as expressible. What is refused is a switch or option
that would silently do nothing or build something else than the config says:

    sinusoidal=true with absolute_positions learned or none      (the sinusoid is another method)
    max_relative_position > 0 with relative_positions not shaw  (k is Shaw's, not this method's)
    share_relative_across_heads=true with t5                    (T5 learns a scalar per head)
    share_relative_across_layers=true with rope or alibi        (nothing learnt to share)
    positions_in=encoder or decoder without any method          (nothing to place)
    an option out of its range (max_positions, rope_dims, rope_base, rope_layout, t5_*)

A new run (new_run=True, the trainer's check) is refused a few more settings, which build a model
but make no sense to train; a checkpoint trained with one before these checks still loads:

    share_relative_across_heads=true with rope or alibi (no per-head tables to share)
    rope_base inf, max_positions past MAX_POSITIONS, t5_max_distance past int32
    positions_in=encoder or decoder with Shaw's a^K and a^V both off (no method, as k = 0 is)

Shaw's a^K / a^V toggles are not refused beside another method: with k = 0 they select nothing,
as they always did. model=transformer_big sets
share_relative_across_heads=true (for Shaw), so positions=rope, alibi and t5 reset it to false.
"""

from __future__ import annotations

import math

from rpr_nmt.config import POSITION_STACKS, position_methods

ABSOLUTE_METHODS = ("sinusoid", "learned", "none")
RELATIVE_METHODS = ("shaw", "rope", "alibi", "t5", "none")
ROPE_LAYOUTS = ("interleaved", "halves")
# Rows of a learned table at most: 64 times the default 1024; a larger table is memory no sentence
# reaches (100M rows of 32 floats are 12.8 GB, and the allocator's traceback said so).
MAX_POSITIONS = 65536
INT32_MAX = 2**31 - 1  # an exported T5 model stores max_distance as int32 (export/positions.py)

__all__ = [
    "ABSOLUTE_METHODS",
    "INT32_MAX",
    "MAX_POSITIONS",
    "RELATIVE_METHODS",
    "ROPE_LAYOUTS",
    "position_problem",
]


def position_problem(
    *,
    d_head: int,
    absolute_positions: str,
    sinusoidal: bool,
    max_positions: int,
    relative_positions: str,
    max_relative_position: int,
    relative_keys: bool,
    relative_values: bool,
    share_relative_across_heads: bool,
    share_relative_across_layers: bool,
    rope_base: float,
    rope_dims: int | None,
    rope_layout: str,
    t5_num_buckets: int,
    t5_max_distance: int,
    positions_in: str,
    new_run: bool = False,
) -> str | None:
    """What is wrong with a position setting, in one line naming the model.* keys; None if fine.

    Args: the ModelConfig fields of the same names, and d_head, the width of one head (d_model /
    n_heads), which bounds rope_dims; new_run, whether a new run is being configured (the
    trainer's check): then the settings of the module docstring's second list are refused too.
    """
    absolute, relative, k = absolute_positions, relative_positions, max_relative_position
    keys, values = relative_keys, relative_values
    if absolute not in ABSOLUTE_METHODS:
        return f"model.absolute_positions={absolute!r}: use one of {', '.join(ABSOLUTE_METHODS)}"
    if relative not in RELATIVE_METHODS:
        return f"model.relative_positions={relative!r}: use one of {', '.join(RELATIVE_METHODS)}"
    if sinusoidal and absolute != "sinusoid":
        return (
            f"model.sinusoidal=true adds the sinusoid, but model.absolute_positions={absolute}: "
            "set model.sinusoidal=false, or model.absolute_positions=sinusoid"
        )
    if k < 0:
        return f"model.max_relative_position={k}: use k >= 1, or 0 for none"
    if k > 0 and relative != "shaw":
        return (
            f"model.max_relative_position={k} is Shaw's k, but model.relative_positions={relative}:"
            " set model.max_relative_position=0, or model.relative_positions=shaw"
        )
    if absolute == "learned" and max_positions < 1:
        return f"model.max_positions={max_positions} must be at least 1 with learned positions"
    if relative == "rope":
        problem = _rope_problem(d_head, rope_dims, rope_base, rope_layout)
        if problem:
            return problem
    if relative == "t5":
        problem = _t5_problem(t5_num_buckets, t5_max_distance, share_relative_across_heads)
        if problem:
            return problem
    if positions_in not in POSITION_STACKS:
        return f"model.positions_in={positions_in!r}: use one of {', '.join(POSITION_STACKS)}"
    switches = dict(absolute_positions=absolute, sinusoidal=sinusoidal, relative_positions=relative)
    # Shaw learns no table with k = 0, nor with a^K and a^V both off: the latter is refused to new
    # runs only, so that a checkpoint trained so before the check still loads.
    terms = dict(relative_keys=keys, relative_values=values) if new_run else {}
    methods = position_methods({**switches, "max_relative_position": k, **terms})
    if positions_in != "both" and methods == ("none", "none"):
        terms_off = relative == "shaw" and k > 0  # k is set, yet neither a^K nor a^V is learnt
        why = ", model.relative_keys and model.relative_values being false" if terms_off else ""
        return (
            f"model.positions_in={positions_in} places no position method (the model has "
            f"none{why}): leave it at both, or choose a method (positions=...)"
        )
    if share_relative_across_layers and relative in ("rope", "alibi"):
        return (
            f"model.share_relative_across_layers=true with model.relative_positions={relative}, "
            "which learns nothing to share: set it to false"
        )
    if new_run:
        return _new_run_problem(
            absolute=absolute, relative=relative, max_positions=max_positions,
            rope_base=rope_base, t5_max_distance=t5_max_distance,
            share_relative_across_heads=share_relative_across_heads,
        )  # fmt: skip
    return None


def _rope_problem(
    d_head: int, rope_dims: int | None, rope_base: float, rope_layout: str
) -> str | None:
    """RoPE's options out of range, in one line; None if fine."""
    if rope_dims is None and d_head % 2:  # the user set no rope_dims: name what they did set
        even = (
            f", or set model.rope_dims to an even number in 2..{d_head - 1}" if d_head > 2 else ""
        )
        return (
            f"d_head = model.d_model / model.n_heads = {d_head} is odd, and RoPE rotates pairs of "
            f"features: choose model.d_model and model.n_heads with an even quotient{even}"
        )
    dims = d_head if rope_dims is None else rope_dims
    if not (0 < dims <= d_head and dims % 2 == 0):
        return f"model.rope_dims={rope_dims}: use an even number in 2..{d_head} (d_head)"
    if math.isnan(rope_base) or rope_base <= 1:  # NaN passes any comparison
        return f"model.rope_base={rope_base} must be a finite number above 1 (10000 in Su et al.)"
    if rope_layout not in ROPE_LAYOUTS:
        return f"model.rope_layout={rope_layout!r}: use one of {', '.join(ROPE_LAYOUTS)}"
    return None


def _t5_problem(num_buckets: int, max_distance: int, share_across_heads: bool) -> str | None:
    """T5's options out of range, in one line; None if fine."""
    if num_buckets < 4:
        return f"model.t5_num_buckets={num_buckets} must be at least 4 (32 in T5)"
    if max_distance <= num_buckets // 2:
        return (
            f"model.t5_max_distance={max_distance} must exceed half of "
            f"model.t5_num_buckets={num_buckets} (the exact buckets); 128 in T5"
        )
    if share_across_heads:
        return (
            "model.share_relative_across_heads=true with model.relative_positions=t5: T5 "
            "learns one scalar per head and bucket; set it to false"
        )
    return None


def _new_run_problem(
    *,
    absolute: str,
    relative: str,
    max_positions: int,
    rope_base: float,
    t5_max_distance: int,
    share_relative_across_heads: bool,
) -> str | None:
    """The settings a new run is refused though a model builds with them; None if fine."""
    if share_relative_across_heads and relative in ("rope", "alibi"):
        return (
            f"model.share_relative_across_heads=true with model.relative_positions={relative}, "
            "which has no per-head tables to share: set it to false"
        )
    if relative == "rope" and not math.isfinite(rope_base):
        return f"model.rope_base={rope_base} must be a finite number above 1 (10000 in Su et al.)"
    if absolute == "learned" and max_positions > MAX_POSITIONS:
        return (
            f"model.max_positions={max_positions}: use at most {MAX_POSITIONS} rows, one per "
            "position of the longest sentence (1024 by default)"
        )
    if relative == "t5" and t5_max_distance > INT32_MAX:
        return (
            f"model.t5_max_distance={t5_max_distance}: use at most {INT32_MAX} (int32, as an "
            "exported model stores it); distances past the longest sentence change nothing (128 "
            "in T5)"
        )
    return None
