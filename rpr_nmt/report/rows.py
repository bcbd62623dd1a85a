"""A sweep's settings: its runs grouped by what they trained, one row per setting, in the order
every table gives them (the paper's settings in the order of its tables, then the later methods,
a method in one stack only after it in both).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rpr_nmt.config import POSITION_FIELDS, POSITION_STACKS, position_methods, position_stacks
from rpr_nmt.report.labels import method_label, setting_labels
from rpr_nmt.report.runs import SEED_KEY, Run, check_same_arithmetic, setting_keys
from rpr_nmt.report.stats import SeedStats, seed_stats


@dataclass
class Row:
    """One setting of the sweep, aggregated over its seeds.

    Attributes:
        setting: what identifies it: its values of the keys on which the sweep's runs differ.
        model: its model section.
        runs: one per seed.
        label: how the reports name it ("Shaw k = 16"); "" = method_label(model).
    """

    setting: str
    model: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    label: str = ""

    def __post_init__(self) -> None:
        self.label = self.label or method_label(self.model)

    def values(self, key: str) -> list[float]:
        """The summary entry `key` of each run that has it as a finite number."""
        return [float(r.summary[key]) for r in self.scored_runs(key)]

    def scored_runs(self, key: str = "test_bleu") -> list[Run]:
        """The runs whose summary has `key` as a finite number: those its `key` figures rest on."""
        found = [(r, r.summary.get(key)) for r in self.runs]
        return [r for r, v in found if isinstance(v, (int, float)) and math.isfinite(v)]

    def unscored_runs(self, key: str = "test_bleu") -> list[Run]:
        """The other runs: left out of the row's `key` figures and of its paired tests."""
        scored = self.scored_runs(key)
        return [r for r in self.runs if r not in scored]

    def stats(self, key: str) -> SeedStats | None:
        """Mean, standard deviation and 95% t-interval of `key` over the seeds."""
        return seed_stats(self.values(key))

    def seeds(self, key: str = "test_bleu") -> str:
        """How many seeds the row's `key` figures rest on: "3", or "1 of 2" when some runs lack it
        (stopped before their evaluation)."""
        scored, n = len(self.values(key)), len(self.runs)
        return str(n) if scored == n else f"{scored} of {n}"


def group_runs(runs: Sequence[Run]) -> list[Row]:
    """Runs grouped by setting, rows ordered by k, then the a^K / a^V / sinusoid toggles.

    A setting is the run's values of the config keys on which the runs differ (the seed aside),
    so a run reused from another sweep joins the row it trained; when all runs share one
    setting, it is named by its overrides (without the seed). Each row's label names its position
    methods (rpr_nmt.report.labels.setting_labels).

    Raises:
        ValueError: the runs were trained by code that trains differently (check_same_arithmetic),
            or two runs of one setting have the same seed (check_distinct_seeds).
    """
    check_same_arithmetic(runs)
    keys = setting_keys(runs)
    rows: dict[str, Row] = {}
    for run in runs:
        label = run.setting(keys)
        rows.setdefault(label, Row(label, run.model)).runs.append(run)
    for row in rows.values():
        check_distinct_seeds(row.runs)

    ordered = sorted(rows.values(), key=lambda row: row_order(row.model, row.setting))
    for row, label in zip(ordered, setting_labels([row.runs[0] for row in ordered])):
        row.label = label
    return ordered


def recipe_keys(rows: Sequence[Row]) -> list[str]:
    """The keys besides the position settings (POSITION_FIELDS) on which the rows' runs differ:
    the training cap, the data, the schedule, the model's size; [] when they differ in nothing
    else, or in no position setting (a sweep of the learning rate compares no positions). The
    claims, the placement table and the past-the-cap tests pick their rows by position settings
    alone, so they are made only under one recipe: otherwise they would pair a capped run with an
    uncapped one."""
    keys = setting_keys([run for row in rows for run in row.runs])
    positions = {f"model.{field}" for field in POSITION_FIELDS}
    recipe = [key for key in keys if key not in positions]
    return recipe if len(recipe) < len(keys) else []


def mixed_recipe_note(keys: Sequence[str], what: str) -> str:
    """The line a report gives in place of `what` when its runs differ in `keys` (recipe_keys)."""
    return (
        f"No {what}: the runs differ in {', '.join(keys)} besides their position settings, and "
        "these compare position settings under one recipe. Report each recipe's runs in a "
        "folder of their own (`rpr-nmt-report --collect RUN --into FOLDER`).\n"
    )


def check_distinct_seeds(runs: Sequence[Run]) -> None:
    """Refuse two runs of one setting with the same train.seed: the same run collected twice (or
    retrained beside its first copy) would count as two seeds, narrowing the spread and interval.

    Raises:
        ValueError: names both run folders and the seed.
    """
    seen: dict[int, Run] = {}
    for run in runs:
        if run.seed is None:
            continue
        if run.seed in seen:
            raise ValueError(
                f"{seen[run.seed].path} and {run.path} are one setting with the same "
                f"{SEED_KEY}={run.seed}: they would count as two seeds; keep one of them (or "
                "train the other with another seed)"
            )
        seen[run.seed] = run


def row_order(model: dict[str, Any], setting: str) -> tuple:
    """Where a setting's row stands in every table: the paper's settings first, in the order of its
    tables (by k, then the terms, then the sinusoid), then the later methods (LATER_METHODS); a
    method in one stack only after it in both (model.positions_in)."""
    return (
        later_method_rank(model),
        POSITION_STACKS.index(position_stacks(model)),
        model.get("max_relative_position", 0),
        not model.get("relative_keys", False),
        not model.get("relative_values", False),
        model.get("sinusoidal", False),
        setting,
    )


# The methods that followed Shaw's, in the order the docs introduce them: their rows come after
# the paper's settings (sinusoid, Shaw's k and terms, none), which keep the order of its tables.
LATER_METHODS = ("learned", "rope", "alibi", "t5")


def later_method_rank(model: dict[str, Any]) -> int:
    """0 for the paper's settings; 1 + the index in LATER_METHODS of a later relative method,
    else of a later absolute one (a learned table)."""
    absolute, relative = position_methods(model)
    for method in (relative, absolute):
        if method in LATER_METHODS:
            return 1 + LATER_METHODS.index(method)
    return 0
