"""Learning-rate schedules against numbers computed by hand."""

from __future__ import annotations

import pytest

from rpr_nmt.train import Schedule, SettingsError, learning_rate
from rpr_nmt.train.schedule import cooldown_factor


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        # 512^-0.5 = 0.0441941738, 4000^-1.5 = 3.95284708e-6, 4000^-0.5 = 0.0158113883
        (1, 0.0441941738 * 3.95284708e-6),  # warmup: step * warmup^-1.5
        (2000, 0.0441941738 * 2000 * 3.95284708e-6),
        (4000, 0.0441941738 * 0.0158113883),  # the peak, 6.98771e-4
        (16000, 0.0441941738 * 0.00790569415),  # decay: step^-0.5
    ],
)
def test_noam_matches_the_formula(step, expected):
    lr = learning_rate(step, schedule="noam", lr=1.0, warmup_steps=4000, d_model=512)
    assert lr == pytest.approx(expected, rel=1e-7)


def test_noam_peak_value_and_scale():
    peak = learning_rate(4000, schedule="noam", lr=1.0, warmup_steps=4000, d_model=512)
    assert peak == pytest.approx(6.98771e-4, rel=1e-5)
    doubled = learning_rate(4000, schedule="noam", lr=2.0, warmup_steps=4000, d_model=512)
    assert doubled == pytest.approx(2 * peak)


@pytest.mark.parametrize(
    ("step", "expected"),
    [(1, 0.0015 / 400), (100, 0.000375), (400, 0.0015), (1600, 0.00075), (6400, 0.000375)],
)
def test_inverse_sqrt_has_its_peak_at_warmup(step, expected):
    lr = learning_rate(step, schedule="inverse_sqrt", lr=0.0015, warmup_steps=400, d_model=256)
    assert lr == pytest.approx(expected, rel=1e-12)


def test_schedule_object_and_errors():
    schedule = Schedule(schedule="noam", lr=1.0, warmup_steps=4000, d_model=512)
    assert schedule(4000) == pytest.approx(6.98771e-4, rel=1e-5)
    assert schedule.state_dict()["warmup_steps"] == 4000
    with pytest.raises(SettingsError, match="noma"):
        Schedule(schedule="noma", lr=1.0, warmup_steps=1, d_model=8)
    with pytest.raises(ValueError, match="from 1"):
        schedule(0)


def test_cooldown_falls_linearly_to_zero_over_the_last_share():
    assert cooldown_factor(0.5, 0.0) == 1.0  # off
    assert cooldown_factor(0.7, 0.2) == 1.0  # before the last 20 %
    assert cooldown_factor(0.9, 0.2) == pytest.approx(0.5)
    assert cooldown_factor(1.0, 0.2) == 0.0
    assert cooldown_factor(1.3, 0.2) == 0.0  # past the budget (an update in flight)
