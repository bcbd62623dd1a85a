"""index.md of rpr-nmt-inspect: where the figures came from, the per-layer attention mass and the
position probe as tables, and a link to every file (figures.py writes them).

The clipping distance k and the sharing of tables are Shaw's (and T5's sharing across layers);
for the other methods the page names the method alone, and the attention table has no "within
±k" column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rpr_nmt.config import position_methods, position_stacks
from rpr_nmt.inspection.probe import PositionProbe
from rpr_nmt.inspection.statistics import AttentionMass


def index_page(
    files: list[Path], mass: AttentionMass, about: dict[str, Any], probe: list[PositionProbe]
) -> str:
    """index.md: provenance, the per-layer summaries and the figures."""
    absolute, relative = position_methods(about)
    stacks = position_stacks(about)
    k = about.get("max_relative_position", 0) if relative == "shaw" else 0
    # "within ±k" only when ±W lies past k: the bins at ±W hold every distance beyond.
    within_k = k if k < mass.max_distance else 0
    tables = ""  # Shaw's clipping and sharing, or T5's; no other method has tables to share
    if relative == "shaw":
        tables = (
            f", k = {k}, tables shared across heads: {about.get('share_relative_across_heads')}, "
            f"across layers: {about.get('share_relative_across_layers')}"
        )
    elif relative == "t5":
        tables = f", tables shared across layers: {about.get('share_relative_across_layers')}"
    lines = [
        f"# Positions of {about.get('checkpoint', 'the model')}",
        "",
        f"Position methods: absolute {absolute}, relative {relative}"
        + ("" if stacks == "both" else f", in the {stacks} only")
        + ".",
        "",
        f"Step {about.get('step')}{tables}. Attention mass: {about.get('sentences')} "
        f"sentences of split `{about.get('split')}`, distances clipped at ±{mass.max_distance}.",
        "",
    ]
    for stack, m in mass.mass.items():
        lines += [
            f"## {stack} self-attention",
            "",
            "| layer | at 0 |"
            + (" within ±k |" if within_k else "")
            + " at the ends (±W and beyond) | mean abs distance |",
            "|---|---|" + ("---|" if within_k else "") + "---|---|",
        ]
        distances = mass.distances
        for layer, row in enumerate(m.mean(dim=1).tolist()):
            within = sum(p for d, p in zip(distances, row) if abs(d) <= k)
            ends = row[0] + row[-1] if mass.max_distance > 0 else 0.0
            mean_abs = sum(abs(d) * p for d, p in zip(distances, row))
            lines.append(
                f"| {layer + 1} | {row[mass.max_distance]:.3f} |"
                + (f" {within:.3f} |" if within_k else "")
                + f" {ends:.3f} | {mean_abs:.2f} |"
            )
        lines.append("")
    if probe:
        lines += [
            "## Absolute position, read by a linear probe",
            "",
            "Ridge regression from each token's state to its position, fitted on the even "
            "sentences, scored on the odd ones (rpr_nmt/inspection/probe.py); layer 0 is the "
            "embedding output. Baseline: the token embedding alone, no position.",
            "",
            "| stack | layer | held-out R^2 | mean abs error (positions) |",
            "|---|---|---|---|",
        ]
        for p in probe:
            lines.append(
                f"| {p.stack} | token alone | {p.baseline_r2:.3f} | {p.baseline_mae:.2f} |"
            )
            for layer, (r2, mae) in enumerate(zip(p.r2, p.mae)):
                lines.append(f"| {p.stack} | {layer} | {r2:.3f} | {mae:.2f} |")
        lines.append("")
    lines += ["## Files", ""]
    for path in files:
        if path.suffix == ".png":
            lines += [f"### {path.stem.replace('_', ' ')}", "", f"![{path.stem}]({path.name})", ""]
        elif path.suffix == ".npy":
            lines += [f"- [{path.name}]({path.name}): the (N, N) similarity (numpy.load)", ""]
        else:
            lines += [f"- [{path.name}]({path.name}): every number shown in the figures", ""]
    return "\n".join(lines)
