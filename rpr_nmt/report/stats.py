"""Spread over seeds: mean, standard deviation and a 95% confidence interval of the mean.

A setting trained with n seeds gives n scores x_1..x_n. Its interval is the Student t-interval

    mean ± t_{0.975, n-1} * sd / sqrt(n)

with sd the sample standard deviation (n - 1 in the denominator): the seeds are taken as a sample
of the training runs the setting could have produced, and their scores as roughly normal. With two
or three seeds t is large (12.7 and 4.3), so the interval is honest about how little a few seeds
say. One seed has no spread and no interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95  # two-sided level of every interval in the reports


@dataclass(frozen=True)
class SeedStats:
    """Summary of one score over the seeds of a setting.

    Attributes:
        n: number of seeds (finite scores).
        mean: their mean.
        sd: sample standard deviation; None for one seed.
        ci_low, ci_high: the 95% t-interval of the mean; None for one seed.
    """

    n: int
    mean: float
    sd: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def ci_half_width(self) -> float | None:
        """Half the interval's width, t * sd / sqrt(n); None for one seed."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2


def t_quantile(df: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided Student t critical value, e.g. 4.303 for df = 2 at 95%."""
    from scipy.stats import t

    return float(t.ppf(0.5 + confidence / 2, df))


def seed_stats(values: Sequence[float], confidence: float = CONFIDENCE) -> SeedStats | None:
    """Mean, sample standard deviation and t-interval of `values`; None when there are none.

    Args:
        values: one score per seed (non-finite values are dropped).
        confidence: two-sided level of the interval.
    """
    xs = [float(v) for v in values if math.isfinite(v)]
    if not xs:
        return None
    mean = statistics.fmean(xs)
    if len(xs) == 1:
        return SeedStats(1, mean)
    sd = statistics.stdev(xs)
    half = t_quantile(len(xs) - 1, confidence) * sd / math.sqrt(len(xs))
    return SeedStats(len(xs), mean, sd, mean - half, mean + half)


def format_stats(stats: SeedStats | None, decimals: int = 1, interval: bool = True) -> str:
    """'27.1 ± 0.4 [26.1, 28.1]' (mean ± sd [95% CI]); '27.1' for one seed; '-' for none."""
    if stats is None:
        return "-"
    text = f"{stats.mean:.{decimals}f}"
    if stats.sd is None:
        return text
    text += f" ± {stats.sd:.{decimals}f}"
    if interval and stats.ci_low is not None and stats.ci_high is not None:
        text += f" [{stats.ci_low:.{decimals}f}, {stats.ci_high:.{decimals}f}]"
    return text


STATS_LEGEND = (
    "mean ± standard deviation over seeds [95% confidence interval of the mean: Student t with "
    "n - 1 degrees of freedom, n = seeds]; one seed: its score alone"
)
