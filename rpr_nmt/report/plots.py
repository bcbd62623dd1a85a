"""The sweep report's plots, each showing the spread over seeds: one small point per seed, and
the mean with an error bar of one standard deviation.

    plot_bleu_against_k   test BLEU against the clipping distance k (the paper's Table 4 as a plot)
    plot_settings         test BLEU of every setting, for sweeps that do not vary k
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol


class _Row(Protocol):
    """What a plot needs of a sweep row (rpr_nmt.report.sweep.Row)."""

    setting: str
    label: str  # how the reports name it (rpr_nmt.report.labels)
    model: dict[str, Any]

    def values(self, key: str) -> list[float]: ...


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def spread_points(
    axis: Any, xs: Sequence[float], values: Sequence[Sequence[float]], **kw: Any
) -> Any:
    """Per x: every seed's value as a small dot, the mean with ± one standard deviation.

    Returns:
        The error bar's artists (matplotlib's ErrorbarContainer); `kw` goes to errorbar.
    """
    for x, vs in zip(xs, values):
        axis.plot([x] * len(vs), vs, ".", color="grey", alpha=0.6, markersize=5)
    means = [statistics.fmean(v) for v in values]
    spreads = [statistics.stdev(v) if len(v) > 1 else 0.0 for v in values]
    return axis.errorbar(xs, means, yerr=spreads, **{"marker": "o", "capsize": 3, **kw})


def metric_name(metric: str) -> str:
    """A summary key as a reader writes it: 'test_bleu' -> 'test BLEU', 'valid_chrf' -> 'valid
    chrF'."""
    split, _, name = metric.partition("_")
    return f"{split} {dict(bleu='BLEU', chrf='chrF').get(name, name.replace('_', ' '))}"


def plot_bleu_against_k(rows: Sequence[_Row], path: str | Path, metric: str = "test_bleu") -> bool:
    """BLEU against k on a log axis, k = 0 (no relative positions) in a panel of its own.

    Only settings that differ in k alone are meaningful on such a plot; returns False (and writes
    nothing) when the rows hold fewer than two values of k, or differ in anything else (a^K, a^V,
    the sinusoid: the term and position sweeps, whose k = 0 and k = 16 rows are other models).
    """
    others = [
        {key: v for key, v in r.model.items() if key != "max_relative_position"} for r in rows
    ]
    if any(other != others[0] for other in others):
        return False
    points = [(r.model.get("max_relative_position", 0), r.values(metric)) for r in rows]
    points = [(k, v) for k, v in points if v]
    if len({k for k, _ in points}) < 2:
        return False
    plt = pyplot()
    fig, (ax0, ax) = plt.subplots(
        1, 2, sharey=True, figsize=(7, 3.5), gridspec_kw={"width_ratios": [1, 6]}
    )
    for axis, keep in ((ax0, lambda k: k == 0), (ax, lambda k: k > 0)):
        chosen = sorted((k, v) for k, v in points if keep(k))
        if chosen:
            spread_points(axis, [k for k, _ in chosen], [v for _, v in chosen])
    ax0.set_xticks([0])
    ax0.set_xlabel("k = 0")
    ax0.set_ylabel(metric_name(metric) + " (dots: seeds; bars: ± sd)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("clipping distance k (log scale)")
    ax.grid(True, alpha=0.3)
    ax0.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_settings(rows: Sequence[_Row], path: str | Path, metric: str = "test_bleu") -> bool:
    """One line per setting (top to bottom in table order): each seed's score and the mean ± sd.

    Returns False (and writes nothing) when no row has the metric.
    """
    chosen = [(r.label, r.values(metric)) for r in rows]
    chosen = [(name, v) for name, v in chosen if v]
    if not chosen:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.45 * len(chosen)))
    ys = list(range(len(chosen)))[::-1]
    for y, (_, vs) in zip(ys, chosen):
        ax.plot(vs, [y] * len(vs), ".", color="grey", alpha=0.6, markersize=6)
    means = [statistics.fmean(v) for _, v in chosen]
    spreads = [statistics.stdev(v) if len(v) > 1 else 0.0 for _, v in chosen]
    ax.errorbar(means, ys, xerr=spreads, fmt="o", capsize=3)
    ax.set_yticks(ys, [name for name, _ in chosen], fontsize=7)
    ax.set_xlabel(metric_name(metric) + " (dots: seeds; bars: mean ± sd)")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
