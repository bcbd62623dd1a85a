"""Mean, standard deviation and t-interval over seeds, on values whose answer is known."""

from __future__ import annotations

import math

import pytest

from rpr_nmt.report.stats import format_stats, seed_stats, t_quantile


def test_constant_values_have_zero_spread_and_a_zero_width_interval():
    stats = seed_stats([27.5, 27.5, 27.5])
    assert stats is not None
    assert (stats.n, stats.mean, stats.sd) == (3, 27.5, 0.0)
    assert stats.ci_low == stats.ci_high == 27.5
    assert stats.ci_half_width == 0.0


def test_interval_is_the_student_t_interval():
    # 1, 2, 3: mean 2, sd 1; t(0.975, df 2) = 4.3027 (any t-table).
    assert t_quantile(2) == pytest.approx(4.3027, abs=1e-4)
    assert t_quantile(1) == pytest.approx(12.7062, abs=1e-4)
    stats = seed_stats([1.0, 2.0, 3.0])
    half = 4.302653 / math.sqrt(3)
    assert stats.mean == 2.0 and stats.sd == pytest.approx(1.0)
    assert stats.ci_low == pytest.approx(2.0 - half, abs=1e-5)
    assert stats.ci_high == pytest.approx(2.0 + half, abs=1e-5)
    assert format_stats(stats) == "2.0 ± 1.0 [-0.5, 4.5]"


def test_one_seed_has_no_spread_and_none_has_no_stats():
    one = seed_stats([31.25])
    assert one.sd is None and one.ci_low is None and one.ci_half_width is None
    assert format_stats(one, decimals=2) == "31.25"
    assert seed_stats([]) is None and seed_stats([math.nan]) is None
    assert format_stats(None) == "-"
