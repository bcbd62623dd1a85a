"""Figures and index of rpr-nmt-inspect: the relative tables and the attention mass by distance.

Files written (per stack: encoder, decoder):
    {stack}_table_norms.png       row norms of w^K and w^V against relative distance -k..k
    {stack}_{keys,values}_cosine.png   cosine similarity between table rows, per layer (and head)
    {stack}_attention_mass.png    self-attention mass by relative distance, layers x distance
    inspect.json                  every number in the figures
    index.md                      what each file shows, and a per-layer summary table

Shapes as in inspect.py: H' heads per table (1 when shared), R = 2k + 1, L layers, W distances.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rpr_nmt.export.inspect import STACKS, AttentionMass, TableStats

__all__ = ["write_inspection"]

TERMS = {"keys": "w^K", "values": "w^V"}


def _pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_inspection(
    out_dir: str | Path, stats: list[TableStats], mass: AttentionMass, about: dict[str, Any]
) -> list[Path]:
    """Write the figures, inspect.json and index.md into out_dir.

    Args:
        out_dir: the folder (created).
        stats: table_statistics of the model (empty without relative tables).
        mass: attention_mass on the dev set.
        about: what was inspected: checkpoint, step, split, sentences, model settings.

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
        if stack in mass.mass:
            files.append(_plot_mass(stack, mass, about, out / f"{stack}_attention_mass.png"))
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
    }
    files.append(out / "inspect.json")
    files[-1].write_text(json.dumps(numbers, indent=1) + "\n")
    files.append(out / "index.md")
    files[-1].write_text(_index(files[:-1], mass, about))
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
        f"sentences (dotted: ±k = {k})"
    )
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def _index(files: list[Path], mass: AttentionMass, about: dict[str, Any]) -> str:
    """index.md: provenance, the per-layer summary and the figures."""
    k = about.get("max_relative_position", 0)
    lines = [
        f"# Relative positions of {about.get('checkpoint', 'the model')}",
        "",
        f"Step {about.get('step')}, k = {k}, tables shared across heads: "
        f"{about.get('share_relative_across_heads')}, across layers: "
        f"{about.get('share_relative_across_layers')}. Attention mass: {about.get('sentences')} "
        f"sentences of split `{about.get('split')}`, distances clipped at ±{mass.max_distance}.",
        "",
    ]
    for stack, m in mass.mass.items():
        lines += [
            f"## {stack} self-attention",
            "",
            "| layer | at 0 | within ±k | at the ends (±W and beyond) | mean abs distance |",
            "|---|---|---|---|---|",
        ]
        distances = mass.distances
        for layer, row in enumerate(m.mean(dim=1).tolist()):
            within = sum(p for d, p in zip(distances, row) if abs(d) <= k)
            ends = row[0] + row[-1] if mass.max_distance > 0 else 0.0
            mean_abs = sum(abs(d) * p for d, p in zip(distances, row))
            lines.append(
                f"| {layer + 1} | {row[mass.max_distance]:.3f} | {within:.3f} | {ends:.3f} "
                f"| {mean_abs:.2f} |"
            )
        lines.append("")
    lines += ["## Files", ""]
    for path in files:
        if path.suffix == ".png":
            lines += [f"### {path.stem.replace('_', ' ')}", "", f"![{path.stem}]({path.name})", ""]
        else:
            lines += [f"- [{path.name}]({path.name}): every number shown in the figures", ""]
    return "\n".join(lines)
