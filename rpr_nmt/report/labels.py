"""Settings named as a reader names them: 'sinusoid', 'Shaw k = 16', 'RoPE', 'RoPE + learned'.

The reports group runs by the config keys on which they differ (rpr_nmt.report.runs), which is
what identifies a setting but not how a reader calls it: 'model.max_relative_position=16,
model.sinusoidal=false' is Shaw et al.'s model with k = 16. Every table, plot and evidence line
names a setting by its position methods (rpr_nmt.config.position_methods), the relative one first:

    sinusoid, learned                     absolute methods, added to the embeddings
    Shaw k = 16                           Shaw et al.'s a^K and a^V clipped at k; one term alone
                                          is named: 'Shaw k = 16, a^K only'
    RoPE, ALiBi, T5 buckets               the other relative methods
    Shaw k = 16 + sinusoid, RoPE + learned  a relative method beside an absolute one
    Shaw k = 16 (encoder only)            the methods in one stack (model.positions_in)
    none                                  neither

Two settings of one sweep with the same methods (another learning rate, RoPE with another base)
keep the keys on which they differ after the name: 'Shaw k = 16, train.lr=0.001'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rpr_nmt.config import position_methods, position_stacks
from rpr_nmt.report.runs import Run, setting_keys

# position_methods' names as a reader reads them; Shaw's is built from k and its terms.
METHOD_NAMES = {
    "sinusoid": "sinusoid",
    "learned": "learned",
    "rope": "RoPE",
    "alibi": "ALiBi",
    "t5": "T5 buckets",
}


def relative_k(model: dict[str, Any]) -> int:
    """The clipping distance of a model's relative terms; 0 when it has none (k = 0 or no term)."""
    k = int(model.get("max_relative_position") or 0)
    has_term = model.get("relative_keys", False) or model.get("relative_values", False)
    return k if has_term else 0


def shaw_label(model: dict[str, Any]) -> str:
    """'Shaw k = 16' with both terms, 'Shaw k = 16, a^K only' or 'Shaw k = 16, a^V only'."""
    keys, values = bool(model.get("relative_keys")), bool(model.get("relative_values"))
    only = "" if keys and values else (", a^K only" if keys else ", a^V only")
    return f"Shaw k = {relative_k(model)}{only}"


def method_label(model: dict[str, Any]) -> str:
    """A model's position methods as a reader names them (module docstring): the relative
    method, then ' + ' and the absolute one; 'none' for neither.

    Args:
        model: a run's model section (rpr_nmt.config.ModelConfig as plain data).
    """
    absolute, relative = position_methods(model)
    parts = []
    if relative == "shaw":
        parts.append(shaw_label(model))
    elif relative != "none":
        parts.append(METHOD_NAMES.get(relative, relative))
    if absolute != "none":
        parts.append(METHOD_NAMES.get(absolute, absolute))
    stacks = position_stacks(model)
    if parts and stacks != "both":
        parts[-1] += f" ({stacks} only)"
    return " + ".join(parts) or "none"


def setting_labels(runs: Sequence[Run]) -> list[str]:
    """Each setting's label, given one run of each: its method_label, and where two settings share
    one, the config keys on which those settings differ ('RoPE, model.rope_base=500.0'), so that
    no two rows of a table read alike."""
    names = [method_label(run.model) for run in runs]
    labels = list(names)
    for name in set(names):
        same = [i for i, other in enumerate(names) if other == name]
        if len(same) > 1:
            keys = setting_keys([runs[i] for i in same])
            for i in same:
                labels[i] = f"{name}, {runs[i].setting(keys)}"
    return labels
