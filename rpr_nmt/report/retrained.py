"""Is a change to the arithmetic only rounding? Published settings retrained by the new code,
judged against the published runs: retrained.md in the retrained folder.

A change that makes some setting train to other numbers comes as a new arithmetic
(train.arithmetic, rpr_nmt.model.arithmetic), and no report puts runs of two arithmetics side by
side. Before a new arithmetic becomes the default, the published settings it touches are retrained
with it, seed for seed, and this report says whether the retrained runs could be the published
ones trained again:

    inside   the retrained seeds' mean test BLEU lies inside the published seeds' 95% interval
             of the mean (rpr_nmt.report.stats, the interval every report gives);
    test     sacrebleu's paired test of each retrained seed against the published run of the same
             seed (rpr_nmt.report.significance) does not call the difference significant: not every
             seed pair below 0.05 in the same direction (the reports' rule).

A setting passes when both hold ("rounding only"); else the change alters results beyond rounding
and does not land. Settings are matched by everything that decides what trains and how it is
scored (IGNORED_KEYS aside: seeds, paths, devices, logging, and the arithmetic under test), so a
retraining at another recipe is refused in one line naming the keys that differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rpr_nmt.report.labels import setting_labels
from rpr_nmt.report.rows import Row, check_distinct_seeds
from rpr_nmt.report.runs import (
    CorpusText,
    Run,
    check_same_arithmetic,
    differing_keys,
    find_runs,
)
from rpr_nmt.report.significance import TESTS, Comparison, compare_seedwise
from rpr_nmt.report.stats import format_stats
from rpr_nmt.report.sweep import read_test_output
from rpr_nmt.report.verdicts import METRIC, SUMMARY_KEY, outcome

REPORT = "retrained.md"
# Keys that do not change what a run trains or how it is scored.
IGNORED_KEYS = frozenset(
    {
        "train.seed", "data.root", "data.cache_dir", "data.encode_threads", "train.device",
        "train.log_every", "train.save_every", "train.keep_last", "train.max_time_minutes",
        "decode.device", "decode.streams", "decode.max_sentences", "train.arithmetic",
    }
)  # fmt: skip


@dataclass
class Pairing:
    """One setting: its published runs, its retrained runs (a Row each, labelled alike), and
    their paired tests by seed."""

    published: Row
    retrained: Row
    comparison: Comparison

    @property
    def label(self) -> str:
        return self.retrained.label

    @property
    def inside(self) -> bool:
        """The retrained mean inside the published 95% interval (with one published seed, which
        has no interval: never)."""
        old, new = self.published.stats(SUMMARY_KEY), self.retrained.stats(SUMMARY_KEY)
        if old is None or new is None or old.ci_low is None or old.ci_high is None:
            return False
        return old.ci_low <= new.mean <= old.ci_high

    @property
    def told_apart(self) -> bool:
        """Every seed pair significant in the same direction (the reports' 'worse' or 'better')."""
        return outcome(self.comparison) in ("worse", "better")

    @property
    def rounding_only(self) -> bool:
        return self.inside and not self.told_apart and bool(self.comparison.seeds)


def recipe(run: Run) -> dict[str, str]:
    """What decides the run's numbers: its resolved config as dotted keys, IGNORED_KEYS aside."""
    return {k: repr(v) for k, v in run.flat_config.items() if k not in IGNORED_KEYS}


def pair_settings(
    published: Sequence[Run], retrained: Sequence[Run]
) -> list[tuple[list[Run], list[Run]]]:
    """Both folders' runs grouped by recipe: (published runs, retrained runs) for each retrained
    setting. ValueError naming the retrained run and the keys in which it differs from the
    nearest published run, when no published run has its recipe."""
    by_recipe: dict[tuple, list[Run]] = {}
    for run in published:
        by_recipe.setdefault(tuple(sorted(recipe(run).items())), []).append(run)
    groups: dict[tuple, list[Run]] = {}
    for run in retrained:
        key = tuple(sorted(recipe(run).items()))
        if key not in by_recipe:
            nearest = min(published, key=lambda p: len(differing_keys(run, p, IGNORED_KEYS)))
            keys = ", ".join(differing_keys(run, nearest, IGNORED_KEYS)[:6])
            raise ValueError(
                f"{run.path} retrains no published setting: the nearest, {nearest.path}, "
                f"differs in {keys}. Retrain at the published recipe (only the code may differ)"
            )
        groups.setdefault(key, []).append(run)
    return [(by_recipe[key], runs) for key, runs in groups.items()]


def judge_retraining(
    retrained_dir: str | Path,
    published_dir: str | Path,
    *,
    test: str = "bs",
    n_samples: int = 0,
    corpus: CorpusText | None = None,
) -> list[Pairing]:
    """Each retrained setting against its published runs (see the module docstring).

    Raises:
        ValueError: a folder without runs, runs of one folder trained by different code, both
            folders trained in one arithmetic (nothing changed), a retrained setting not
            published or without a published seed, two runs of a setting with one seed in a
            folder, or a test that is not sacrebleu's.
        FileNotFoundError, rpr_nmt.data.DataError: a run's test output or corpus is missing.
    """
    if test not in TESTS:
        raise ValueError(f"significance test {test!r} is not one of {sorted(TESTS)}")
    folders = {"retrained": find_runs(retrained_dir), "published": find_runs(published_dir)}
    for name, runs in folders.items():
        if not runs:
            where = retrained_dir if name == "retrained" else published_dir
            if not Path(where).is_dir():
                raise ValueError(f"{where} is not a folder: give the {name} runs' folder")
            raise ValueError(f"{where} holds no finished runs (no train_summary.json under it)")
        check_same_arithmetic(runs)
    arithmetic = folders["published"][0].arithmetic
    if folders["retrained"][0].arithmetic == arithmetic:
        raise ValueError(
            f"{retrained_dir} trained in arithmetic {'+'.join(map(str, arithmetic))}, as the "
            f"published runs in {published_dir}: there is no change to judge (fp32 trains "
            "arithmetic 1 whatever train.arithmetic says); retrain in the precision the "
            "published runs trained in with the new train.arithmetic"
        )
    text = corpus or CorpusText()
    pairings = []
    groups = pair_settings(folders["published"], folders["retrained"])
    labels = setting_labels([new[0] for _, new in groups])
    for (old, new), label in zip(groups, labels):
        check_distinct_seeds(old)
        check_distinct_seeds(new)
        published, retrained = (Row(label, runs[0].model, runs, label) for runs in (old, new))
        scored = {"old": published.scored_runs(), "new": retrained.scored_runs()}
        check_seeds_in_common(scored["old"], scored["new"], label)
        base = [read_test_output(r, text) for r in scored["old"]]
        outputs = {"new": [read_test_output(r, text) for r in scored["new"]]}
        compared = compare_seedwise(base, outputs, test=test, n_samples=n_samples)["new"]
        pairings.append(Pairing(published, retrained, compared))
    return pairings


def check_seeds_in_common(published: Sequence[Run], retrained: Sequence[Run], label: str) -> None:
    """Refuse a setting whose scored retrained seeds are none of the scored published ones: the
    paired tests, seed against the same seed, would have nothing to test, and the setting no
    verdict.

    Raises:
        ValueError: names the setting and both folders' seeds.
    """
    for name, runs in (("published", published), ("retrained", retrained)):
        if not runs:
            raise ValueError(
                f"{label}: no {name} run has a test score in train_summary.json: nothing to "
                f"test; score its runs' test split (rpr-nmt-evaluate) or leave the setting out"
            )
    old, new = ({r.seed for r in runs} for runs in (published, retrained))
    if not old & new:
        listed = {
            name: ",".join(map(str, sorted(s, key=str))) for name, s in (("old", old), ("new", new))
        }
        raise ValueError(
            f"{label}: retrained with train.seed={listed['new']} ({retrained[0].path.parent}), "
            f"published with train.seed={listed['old']}: no seed in common to test seed against "
            f"seed; retrain with train.seed={listed['old']}"
        )


def retraining_table(pairings: Sequence[Pairing]) -> str:
    """A row per setting: published and retrained BLEU over seeds, the mean difference, inside
    the interval, the paired test, and the verdict."""
    lines = [
        "| setting | published | retrained | Δ of means | inside the published interval | "
        f"paired test ({METRIC}) | rounding only |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in pairings:
        old, new = p.published.stats(SUMMARY_KEY), p.retrained.stats(SUMMARY_KEY)
        delta = "-" if old is None or new is None else f"{new.mean - old.mean:+.2f}"
        test = f"{p.comparison.cell(METRIC)}, {outcome(p.comparison)}"
        if not p.comparison.seeds:
            test = f"no test: {p.comparison.note}"
        lines.append(
            f"| {p.label} | {format_stats(old, 2)} | {format_stats(new, 2)} | {delta} | "
            f"{'yes' if p.inside else 'no'} | {test} | {'yes' if p.rounding_only else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def unscored_lines(pairings: Sequence[Pairing]) -> list[str]:
    """Per setting and folder: the runs without a test score, left out of its figures and tests."""
    lines = []
    for p in pairings:
        for name, row in (("published", p.published), ("retrained", p.retrained)):
            left = [r.path.name for r in row.unscored_runs()]
            if left:
                lines.append(
                    f"- {p.label}, {name}: {len(left)} run(s) without a test score in "
                    f"train_summary.json, left out: {', '.join(left)}"
                )
    return lines


def seed_table(pairings: Sequence[Pairing]) -> str:
    """Seed by seed: the published and retrained test BLEU, their difference and the p-value."""
    lines = ["| setting | seed | published | retrained | Δ | p |", "|---|---|---|---|---|---|"]
    for p in pairings:
        c = p.comparison
        for seed, score, delta, value in zip(
            c.seeds, c.scores.get(METRIC, []), c.deltas.get(METRIC, []), c.p_values.get(METRIC, [])
        ):
            lines.append(
                f"| {p.label} | {seed} | {score - delta:.2f} | {score:.2f} | {delta:+.2f} | "
                f"{value:.3f} |"
            )
    return "\n".join(lines) + "\n"


def write_retraining_report(
    retrained_dir: str | Path, published_dir: str | Path, *, test: str = "bs", n_samples: int = 0
) -> tuple[Path, str, bool]:
    """Judge the retraining and write retrained.md into `retrained_dir`; returns (path, text,
    whether every setting is rounding only)."""
    pairings = judge_retraining(retrained_dir, published_dir, test=test, n_samples=n_samples)
    arithmetic = {
        name: "+".join(map(str, row.runs[0].arithmetic))
        for name, row in (("published", pairings[0].published), ("new", pairings[0].retrained))
    }
    passed = all(p.rounding_only for p in pairings)
    verdict = (
        "every setting is rounding only: the change may land"
        if passed
        else "some setting moved beyond rounding: the change does not land"
    )
    seeds = sorted({s for p in pairings for s in p.comparison.seeds if s is not None})
    left_out = unscored_lines(pairings)
    notes = "\n".join(left_out) + "\n\n" if left_out else ""
    text = (
        f"# Retrained against published: is the change rounding only?\n\n"
        f"Published: {published_dir} (arithmetic {arithmetic['published']}). Retrained: "
        f"{retrained_dir} (arithmetic {arithmetic['new']}). Test {METRIC}, mean ± sd over "
        f"seeds [95% interval]; {TESTS[test]} of each retrained seed against the published run "
        f"of the same seed (seeds {', '.join(map(str, seeds)) or 'none in common'}). A setting is "
        "rounding only when its retrained mean lies inside the published interval and the "
        "paired test does not find every seed pair significant in one direction.\n\n"
        f"**Verdict: {verdict}.**\n\n"
        f"{retraining_table(pairings)}\n{notes}"
        f"## Seed by seed\n\n{seed_table(pairings)}"
    )
    path = Path(retrained_dir) / REPORT
    path.write_text(text)
    return path, text, passed


__all__ = [
    "IGNORED_KEYS",
    "Pairing",
    "judge_retraining",
    "retraining_table",
    "seed_table",
    "unscored_lines",
    "write_retraining_report",
]
