"""Figures and index of rpr-nmt-inspect: what the position method learned, and the attention mass
by distance.

Files written (per stack: encoder, decoder), each where the model has what it shows:
    {stack}_table_norms.png       Shaw: row norms of w^K and w^V against relative distance -k..k
    {stack}_{keys,values}_cosine.png   Shaw: cosine similarity between table rows, per layer (head)
    {stack}_t5_bias.png           T5: the bias per head and bucket, and by distance j - i
    {stack}_learned_cosine.png    learned: cosine similarity of the position vectors, their norms,
                                  and the mean similarity of positions d apart
    {stack}_learned_cosine.npy    learned: the (N, N) similarity matrix (too large for the JSON)
    alibi_slopes.png              ALiBi: the fixed slope of each head and its bias by distance
    {stack}_attention_mass.png    every method: self-attention mass by relative distance
    position_probe.png            every method: how well a linear probe reads each token's absolute
                                  position from each layer's states (probe.py), per stack
    inspect.json                  every number in the figures (but the .npy matrix)
    index.md                      what each file shows, and a per-layer summary table

Shapes as in statistics.py: H' heads per table (1 when shared), R = 2k + 1, L layers, W distances,
U buckets, N learned positions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rpr_nmt.inspection.index_page import index_page
from rpr_nmt.inspection.probe import PositionProbe
from rpr_nmt.inspection.statistics import (
    STACKS,
    AlibiSlopes,
    AttentionMass,
    LearnedTable,
    PositionStats,
    T5Table,
    TableStats,
)

__all__ = ["write_inspection"]

TERMS = {"keys": "w^K", "values": "w^V"}


def _pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_inspection(
    out_dir: str | Path,
    stats: list[TableStats],
    mass: AttentionMass,
    about: dict[str, Any],
    positions: PositionStats | None = None,
    probe: list[PositionProbe] | None = None,
) -> list[Path]:
    """Write the figures, inspect.json and index.md into out_dir.

    Args:
        out_dir: the folder (created).
        stats: table_statistics of the model (empty without relative tables).
        mass: attention_mass on the dev set.
        about: what was inspected: checkpoint, step, split, sentences, model settings.
        positions: position_statistics of the model (T5, learned, ALiBi); None = none drawn.
        probe: position_probe of the model on the dev set; None = not drawn.

    Returns:
        The files written, index.md last.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for stack in STACKS:
        tables = [s for s in stats if s.stack == stack]
        if tables:
            files.append(_plot_norms(tables, out / f"{stack}_table_norms.png"))
            for term in TERMS:
                of_term = [s for s in tables if s.term == term]
                if of_term:
                    files.append(_plot_cosines(of_term, out / f"{stack}_{term}_cosine.png"))
        if positions is not None:
            t5 = [t for t in positions.t5 if t.stack == stack]
            if t5:
                files.append(_plot_t5(t5, out / f"{stack}_t5_bias.png"))
            for table in (t for t in positions.learned if t.stack == stack):
                np.save(out / f"{stack}_learned_cosine.npy", table.cosine.numpy())
                files.append(_plot_learned(table, out / f"{stack}_learned_cosine.png"))
                files.append(out / f"{stack}_learned_cosine.npy")
        if stack in mass.mass:
            files.append(_plot_mass(stack, mass, about, out / f"{stack}_attention_mass.png"))
    if positions is not None and positions.alibi is not None:
        files.append(_plot_alibi(positions.alibi, mass.max_distance, out / "alibi_slopes.png"))
    if probe:
        files.append(_plot_probe(probe, out / "position_probe.png"))
    numbers = {
        **about,
        "max_distance": mass.max_distance,
        "distances": mass.distances,
        "queries": mass.queries,
        "attention_mass": {
            stack: {"per_head": m.tolist(), "per_layer": m.mean(dim=1).tolist()}
            for stack, m in mass.mass.items()
        },
        "tables": [
            {
                "stack": s.stack,
                "layer": s.layer,
                "term": s.term,
                "norms": s.norms.tolist(),
                "cosine": s.cosine.tolist(),
            }
            for s in stats
        ],  # fmt: skip
        **_position_numbers(positions),
        "position_probe": [vars(p) for p in probe or []],
    }
    files.append(out / "inspect.json")
    files[-1].write_text(json.dumps(numbers, indent=1) + "\n")
    files.append(out / "index.md")
    files[-1].write_text(index_page(files[:-1], mass, about, probe or []))
    return files


def _plot_norms(tables: list[TableStats], path: Path) -> Path:
    """One panel per layer: the norm of each table row against its distance, w^K and w^V."""
    plt = _pyplot()
    layers = sorted({s.layer for s in tables})
    fig, axes = plt.subplots(
        1, len(layers), figsize=(3.6 * len(layers), 3.4), squeeze=False, layout="constrained"
    )
    for axis, layer in zip(axes[0], layers):
        for s in (s for s in tables if s.layer == layer):
            k = s.max_relative_position
            for h, norms in enumerate(s.norms):
                head = f" head {h + 1}" if s.norms.size(0) > 1 else ""
                style = "-" if s.term == "keys" else "--"
                label = TERMS[s.term] + head
                axis.plot(range(-k, k + 1), norms.tolist(), style, marker=".", label=label)
        axis.set(title=f"layer {layer + 1}", xlabel="relative distance j - i", ylabel="row norm")
        axis.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{tables[0].stack}: norms of the relative table rows by distance (clipped at ±k)")
    return _save(fig, path)


def _plot_cosines(tables: list[TableStats], path: Path) -> Path:
    """Cosine similarity between the rows of one term's tables: layers across, heads down."""
    plt = _pyplot()
    heads = tables[0].cosine.size(0)
    fig, axes = plt.subplots(
        heads,
        len(tables),
        figsize=(3.4 * len(tables) + 1, 3.0 * heads + 0.6),
        squeeze=False,
        layout="constrained",
    )
    image = None
    for col, s in enumerate(tables):
        k = s.max_relative_position
        for h in range(heads):
            axis = axes[h][col]
            extent = (-k - 0.5, k + 0.5, k + 0.5, -k - 0.5)
            image = axis.imshow(s.cosine[h].numpy(), cmap="RdBu_r", vmin=-1, vmax=1, extent=extent)
            ticks = sorted({-k, -k // 2, 0, k // 2, k})
            axis.set_xticks(ticks)
            axis.set_yticks(ticks)
            head = f", head {h + 1}" if heads > 1 else ""
            axis.set(title=f"layer {s.layer + 1}{head}", xlabel="distance", ylabel="distance")
    fig.colorbar(image, ax=axes, shrink=0.8, label="cosine similarity")
    term = TERMS[tables[0].term]
    fig.suptitle(f"{tables[0].stack}: cosine similarity between rows of {term}")
    return _save(fig, path)


def _position_numbers(positions: PositionStats | None) -> dict[str, Any]:
    """inspect.json's entries for T5, learned tables and ALiBi (the (N, N) matrix in its .npy)."""
    if positions is None:
        return {}
    return {
        "t5": [
            {
                "stack": t.stack,
                "layer": t.layer,
                "max_distance": t.max_distance,
                "bidirectional": t.bidirectional,
                "bucket_bias": t.weight.T.tolist(),  # (H, U)
                "distances": t.distances,
                "bias_by_distance": t.by_distance.tolist(),  # (H, len(distances))
            }
            for t in positions.t5
        ],
        "learned": [
            {
                "stack": t.stack,
                "norms": t.norms.tolist(),
                "mean_cosine_by_offset": _mean_by_offset(t.cosine).tolist(),
            }
            for t in positions.learned
        ],
        "alibi": None if positions.alibi is None else vars(positions.alibi),
    }


def _mean_by_offset(cosine: torch.Tensor) -> torch.Tensor:
    """Mean cosine similarity of position vectors d apart, d = 0..N-1: (N, N) -> (N,)."""
    return torch.stack([cosine.diagonal(d).mean() for d in range(cosine.size(0))])


def _plot_t5(tables: list[T5Table], path: Path) -> Path:
    """One row per table (the stack's, or each layer's): the bias per head and bucket, and the
    bias by distance j - i that it gives, one line per head."""
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(tables), 2, figsize=(12, 3.4 * len(tables) + 0.6), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    for (left, right), t in zip(axes, tables):
        image = left.imshow(t.weight.T.numpy(), aspect="auto", cmap="RdBu_r")
        scope = "all layers" if t.layer is None else f"layer {t.layer + 1}"
        heads = t.weight.size(1)
        left.set_yticks(range(heads), [f"head {h + 1}" for h in range(heads)])
        left.set(title=f"bias per bucket ({scope})", xlabel="bucket")
        fig.colorbar(image, ax=left, label="bias")
        for h, row in enumerate(t.by_distance):
            right.step(t.distances, row.tolist(), where="mid", label=f"head {h + 1}")
        for x in (-t.max_distance, t.max_distance)[: 2 if t.bidirectional else 1]:
            right.axvline(x, color="grey", linestyle=":", linewidth=1)
        right.set(title=f"bias by distance ({scope})", xlabel="relative distance j - i")
        right.set_ylabel("bias added to the logit")
        right.grid(alpha=0.3)
        right.legend(fontsize=7, ncol=2)
    side = "bidirectional" if tables[0].bidirectional else "one-directional"
    fig.suptitle(
        f"{tables[0].stack}: T5 bias, {side} buckets (dotted: max_distance = "
        f"{tables[0].max_distance}; farther distances share the last bucket)"
    )
    return _save(fig, path)


def _plot_learned(table: LearnedTable, path: Path) -> Path:
    """The cosine similarity of the learned position vectors, their norms, and the mean similarity
    of positions d apart (relative structure the table learned, if any)."""
    plt = _pyplot()
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4.4), layout="constrained")
    n = table.cosine.size(0)
    extent = (-0.5, n - 0.5, n - 0.5, -0.5)
    image = left.imshow(table.cosine.numpy(), cmap="RdBu_r", vmin=-1, vmax=1, extent=extent)
    left.set(title="cosine similarity of P[s], P[t]", xlabel="position t", ylabel="position s")
    fig.colorbar(image, ax=left, label="cosine similarity")
    middle.plot(range(n), table.norms.tolist())
    middle.set(title="norm of P[t]", xlabel="position t", ylabel="norm")
    right.plot(range(n), _mean_by_offset(table.cosine).tolist())
    right.set(title="mean similarity of positions d apart", xlabel="d = t - s", ylabel="cosine")
    for axis in (middle, right):
        axis.grid(alpha=0.3)
    fig.suptitle(
        f"{table.stack}: learned absolute positions ({n} rows; rows past the longest training "
        "input get no gradient)"
    )
    return _save(fig, path)


def _plot_alibi(alibi: AlibiSlopes, width: int, path: Path) -> Path:
    """ALiBi's fixed slope per head, and the bias -m_h |j - i| it adds over -W..W."""
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained")
    heads = range(1, len(alibi.slopes) + 1)
    left.bar(heads, alibi.slopes)
    left.set_yscale("log", base=2)
    left.set(title="slope m_h (fixed, not learned)", xlabel="head", ylabel="slope")
    left.set_xticks(list(heads))
    distances = list(range(-width, width + 1))
    for h, m in zip(heads, alibi.slopes):
        right.plot(distances, [-m * abs(d) for d in distances], label=f"head {h}")
    right.set(title="bias -m_h |j - i|", xlabel="relative distance j - i", ylabel="bias")
    right.grid(alpha=0.3)
    right.legend(fontsize=7, ncol=2)
    fig.suptitle(
        f"ALiBi in {' and '.join(alibi.stacks)} self-attention (the decoder sees j <= i only)"
    )
    return _save(fig, path)


def _plot_mass(stack: str, mass: AttentionMass, about: dict[str, Any], path: Path) -> Path:
    """Layers x distance heatmap of the head-averaged mass, and one line per layer."""
    plt = _pyplot()
    per_layer = mass.mass[stack].mean(dim=1)  # (L, 2W + 1)
    W, L = mass.max_distance, per_layer.size(0)
    last = 0 if stack == "decoder" else W  # causal: the decoder never looks ahead
    per_layer, distances = per_layer[:, : W + last + 1], mass.distances[: W + last + 1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.4 * L + 3.5), layout="constrained")
    extent = (-W - 0.5, last + 0.5, L + 0.5, 0.5)
    image = left.imshow(per_layer.numpy(), aspect="auto", cmap="viridis", extent=extent)
    left.set_yticks(range(1, L + 1))
    left.set(xlabel=f"relative distance j - i (-{W} includes beyond)", ylabel="layer")
    if last:
        left.set_xlabel(f"relative distance j - i (±{W} include beyond)")
    fig.colorbar(image, ax=left, label="share of attention")
    for layer, row in enumerate(per_layer):
        right.plot(distances, row.tolist(), marker=".", label=f"layer {layer + 1}")
    k = about.get("max_relative_position", 0)
    if k:
        for axis in (left, right):
            for x in (-k, k)[: 2 if last else 1]:
                axis.axvline(x, color="grey", linestyle=":", linewidth=1)
    right.set(xlabel="relative distance j - i", ylabel="share of attention")
    right.grid(alpha=0.3)
    right.legend(fontsize=7)
    fig.suptitle(
        f"{stack} self-attention mass by relative distance\nmean over heads and "
        f"{mass.queries[stack]} queries of {about.get('sentences', '?')} {about.get('split', '')} "
        "sentences" + (f" (dotted: ±k = {k})" if k else "")
    )
    return _save(fig, path)


def _plot_probe(probe: list[PositionProbe], path: Path) -> Path:
    """Held-out R^2 of the position probe by layer, per stack, beside the token-alone baseline."""
    plt = _pyplot()
    fig, axis = plt.subplots(figsize=(6.5, 4), layout="constrained")
    for p, color in zip(probe, ("tab:blue", "tab:orange")):
        axis.plot(range(len(p.r2)), p.r2, marker="o", color=color, label=p.stack)
        axis.axhline(p.baseline_r2, color=color, linestyle=":", label=f"{p.stack}: token alone")
    axis.set_xticks(range(max(len(p.r2) for p in probe)))
    axis.set(xlabel="layer (0 = embeddings with absolute positions, if any)", ylabel="held-out R^2")
    axis.set_ylim(min(0.0, *(min(p.r2) for p in probe)) - 0.05, 1.05)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    axis.set_title("Absolute position read linearly from each layer's states")
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path
