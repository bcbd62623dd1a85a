"""Learning-rate schedules: the paper's noam schedule, and inverse-square-root with a peak.

Steps count optimizer updates from 1 (the first update uses step 1): no formula divides by zero.
"""

from __future__ import annotations

import math
from typing import Any

from rpr_nmt.train.errors import SettingsError

SCHEDULES = ("noam", "inverse_sqrt")


def learning_rate(step: int, *, schedule: str, lr: float, warmup_steps: int, d_model: int) -> float:
    """The learning rate of update number `step` (1-based).

    noam (Vaswani et al. 2017, used by Shaw et al. 2018):
        lr * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    which rises linearly to its peak lr * (d_model * warmup)^-0.5 at step = warmup, then decays
    as step^-0.5.

    inverse_sqrt (fairseq's): `lr` is the peak itself:
        lr * step / warmup                  for step < warmup
        lr * sqrt(warmup / step)            afterwards

    Args:
        step: update number, 1 for the first update.
        schedule: "noam" or "inverse_sqrt".
        lr: noam: a scale factor (1.0 in the paper); inverse_sqrt: the peak learning rate.
        warmup_steps: linear warmup length in updates (4000 in the paper); 0 means no warmup.
        d_model: model width (only noam uses it).

    Returns:
        The learning rate as a float.
    """
    if step < 1:
        raise ValueError(f"learning_rate: step counts updates from 1, got {step}")
    warmup = max(warmup_steps, 0)
    if schedule == "noam":
        ramp = step * warmup**-1.5 if warmup > 0 else math.inf
        return lr * d_model**-0.5 * min(step**-0.5, ramp)
    if schedule == "inverse_sqrt":
        if warmup == 0:
            return lr * step**-0.5
        if step < warmup:
            return lr * step / warmup
        return lr * math.sqrt(warmup / step)
    raise SettingsError(f"train.schedule={schedule!r} is not a schedule; use one of {SCHEDULES}")


def cooldown_factor(progress: float, cooldown: float) -> float:
    """The multiplier of a linear decay to zero over the last `cooldown` of a run's budget.

    Args:
        progress: the share of the budget spent, 0..1: updates (the coming one included) over
            train.max_steps, or minutes over train.max_time_minutes under a time limit (whichever
            is further along).
        cooldown: train.cooldown, the final share over which the rate falls to 0; 0 = off.

    Returns:
        1 before the cool-down, then (1 - progress) / cooldown, down to 0 at the end.
    """
    if cooldown <= 0:
        return 1.0
    return min(1.0, max(0.0, (1.0 - progress) / cooldown))


class Schedule:
    """The learning rate as a function of the update number, with a checkpointable state.

    The trainer sets the learning rate of every parameter group itself, first thing in each update:
    `lr = schedule(step)`. The state records the settings (the step is the checkpoint's own).
    """

    def __init__(self, *, schedule: str, lr: float, warmup_steps: int, d_model: int) -> None:
        if schedule not in SCHEDULES:
            raise SettingsError(
                f"train.schedule={schedule!r} is not a schedule; use one of {SCHEDULES}"
            )
        self.settings = {
            "schedule": schedule,
            "lr": float(lr),
            "warmup_steps": int(warmup_steps),
            "d_model": int(d_model),
        }

    def __call__(self, step: int) -> float:
        """Learning rate of update number `step` (1-based)."""
        return learning_rate(step, **self.settings)

    def state_dict(self) -> dict[str, Any]:
        """Plain settings (the step itself lives in the checkpoint's `step`)."""
        return dict(self.settings)
