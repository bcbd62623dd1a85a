"""A sweep's runs as a paper-shaped table and a BLEU-against-k plot.

A sweep folder holds one run folder per setting (and seed); each run folder has Hydra's
`.hydra/overrides.yaml` and `.hydra/config.yaml` and the trainer's `train_summary.json`. Runs that
differ only in `train.seed` are one setting: the table shows mean and spread over seeds.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

# Columns of the table: (summary key, heading, decimals).
METRICS = (
    ("valid_bleu", "valid BLEU", 1),
    ("test_bleu", "test BLEU", 1),
    ("test_chrf", "test chrF", 1),
    ("train_tokens_per_sec", "tokens/s", 0),
    ("steps", "steps", 0),
)
SEED_KEY = "train.seed"


@dataclass
class Run:
    """One finished training run of a sweep."""

    path: Path
    overrides: list[str]
    config: dict[str, Any]  # the run's composed config, resolved
    summary: dict[str, Any]

    @property
    def model(self) -> dict[str, Any]:
        return self.config.get("model", {})

    def setting(self, shared: frozenset[str] = frozenset()) -> str:
        """The run's overrides without the seed and those `shared` by every run of the sweep."""
        kept = [
            o
            for o in self.overrides
            if o.split("=", 1)[0].lstrip("+") != SEED_KEY and o not in shared
        ]
        return ", ".join(kept) or "default"


@dataclass
class Row:
    """One setting of the sweep, aggregated over its seeds."""

    setting: str
    model: dict[str, Any]
    runs: list[Run] = field(default_factory=list)

    def values(self, key: str) -> list[float]:
        found = [r.summary.get(key) for r in self.runs]
        return [float(v) for v in found if isinstance(v, (int, float)) and math.isfinite(v)]


def find_runs(sweep_dir: str | Path) -> list[Run]:
    """Every run folder under `sweep_dir` that has a train_summary.json, in a stable order."""
    runs = []
    for summary_path in sorted(Path(sweep_dir).rglob("train_summary.json")):
        run_dir = summary_path.parent
        overrides_path = run_dir / ".hydra" / "overrides.yaml"
        config_path = run_dir / ".hydra" / "config.yaml"
        if not (overrides_path.is_file() and config_path.is_file()):
            continue
        overrides = yaml.safe_load(overrides_path.read_text()) or []
        # Hydra stores the config unresolved (e.g. data.root=${oc.env:RPR_NMT_DATA,data}/...).
        config = OmegaConf.to_container(OmegaConf.load(config_path), resolve=True)
        summary = json.loads(summary_path.read_text())
        runs.append(Run(run_dir, [str(o) for o in overrides], config, summary))
    return runs


def group_runs(runs: Sequence[Run]) -> list[Row]:
    """Runs grouped by setting, rows ordered by k, then the a^K / a^V / sinusoid toggles."""
    # Overrides every run shares (the experiment, a common recipe) say nothing about a row.
    sets = [frozenset(r.overrides) for r in runs]
    shared = frozenset.intersection(*sets) if len(set(sets)) > 1 else frozenset()
    rows: dict[str, Row] = {}
    for run in runs:
        label = run.setting(shared)
        rows.setdefault(label, Row(label, run.model)).runs.append(run)

    def order(row: Row) -> tuple:
        m = row.model
        return (
            m.get("max_relative_position", 0),
            not m.get("relative_keys", False),
            not m.get("relative_values", False),
            m.get("sinusoidal", False),
            row.setting,
        )

    return sorted(rows.values(), key=order)


def _cell(values: list[float], decimals: int) -> str:
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{decimals}f}"
    spread = statistics.stdev(values)
    return f"{mean:.{decimals}f} ± {spread:.{decimals}f}"


def _positions(model: dict[str, Any]) -> str:
    """The position representation of a model in the paper's terms."""
    k = model.get("max_relative_position", 0)
    terms = [t for t, on in (("a^K", "relative_keys"), ("a^V", "relative_values")) if model.get(on)]
    parts = [f"k={k} " + "+".join(terms)] if k > 0 and terms else []
    if model.get("sinusoidal"):
        parts.append("sinusoid")
    return ", ".join(parts) or "none"


def markdown_table(rows: Sequence[Row]) -> str:
    """A markdown table, one row per setting: positions, seeds, then each metric as mean ± std."""
    head = ["setting", "positions", "seeds"] + [h for _, h, _ in METRICS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row.setting, _positions(row.model), str(len(row.runs))]
        cells += [_cell(row.values(key), decimals) for key, _, decimals in METRICS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_bleu_against_k(rows: Sequence[Row], path: str | Path, metric: str = "test_bleu") -> bool:
    """BLEU against k on a log axis, k = 0 (no relative positions) in a panel of its own.

    Only settings that differ in k alone are meaningful on such a plot; returns False (and writes
    nothing) when the rows hold fewer than two values of k.
    """
    points = [(r.model.get("max_relative_position", 0), r.values(metric)) for r in rows]
    points = [(k, v) for k, v in points if v]
    if len({k for k, _ in points}) < 2:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax) = plt.subplots(
        1, 2, sharey=True, figsize=(7, 3.5), gridspec_kw={"width_ratios": [1, 6]}
    )
    for axis, keep in ((ax0, lambda k: k == 0), (ax, lambda k: k > 0)):
        chosen = sorted((k, v) for k, v in points if keep(k))
        if not chosen:
            continue
        ks = [k for k, _ in chosen]
        means = [statistics.fmean(v) for _, v in chosen]
        spreads = [statistics.stdev(v) if len(v) > 1 else 0.0 for _, v in chosen]
        axis.errorbar(ks, means, yerr=spreads, marker="o", capsize=3)
    ax0.set_xticks([0])
    ax0.set_xlabel("k = 0")
    ax0.set_ylabel(metric.replace("_", " "))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("clipping distance k (log scale)")
    ax.grid(True, alpha=0.3)
    ax0.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_report(sweep_dir: str | Path) -> tuple[str, Path | None]:
    """Write report.md (and bleu_vs_k.png where k varies) into `sweep_dir`; return the markdown."""
    sweep_dir = Path(sweep_dir)
    runs = find_runs(sweep_dir)
    if not runs:
        raise FileNotFoundError(
            f"no finished runs under {sweep_dir}: expected run folders with train_summary.json "
            "and .hydra/ (the output of `rpr-nmt-train experiment=...`)"
        )
    rows = group_runs(runs)
    text = f"# Sweep {sweep_dir.name}\n\n{len(runs)} runs, {len(rows)} settings.\n\n"
    text += markdown_table(rows)
    plot_path = sweep_dir / "bleu_vs_k.png"
    if not plot_bleu_against_k(rows, plot_path):
        plot_path = None
    else:
        text += f"\n![test BLEU against k]({plot_path.name})\n"
    (sweep_dir / "report.md").write_text(text)
    return text, plot_path
