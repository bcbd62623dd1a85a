"""Judging the claims of rpr_nmt.report.claims on a sweep: each judged setting against the claim's
baseline by sacrebleu's paired test, seed pair by seed pair, then the claim's rule on the outcomes.
A verdict is written as data beside its report (claims.json, length_claims.json) for the page over
every sweep (rpr_nmt.report.summary).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from rpr_nmt.report.claims import QUALITY_FLOOR, UNSURE, Claim
from rpr_nmt.report.rows import Row
from rpr_nmt.report.significance import ALPHA, Comparison
from rpr_nmt.report.stats import format_stats

METRIC = "BLEU"  # the papers' metric: the verdicts rest on it
SUMMARY_KEY = "test_bleu"


def outcome(comparison: Comparison | None) -> str:
    """'worse', 'better', 'same', 'partly worse', 'partly better' or 'mixed': a setting against
    its baseline (the table in rpr_nmt.report.claims' docstring)."""
    if comparison is None or not comparison.p_values.get(METRIC):
        return "mixed"
    pairs = zip(comparison.p_values[METRIC], comparison.deltas[METRIC])
    found = {"worse" if d < 0 else "better" for p, d in pairs if p < ALPHA}
    if not found:
        return "same"
    if len(found) > 1:
        return "mixed"
    direction = found.pop()
    if all(p < ALPHA for p in comparison.p_values[METRIC]):
        return direction
    return f"partly {direction}"


@dataclass(frozen=True)
class Verdict:
    """One claim and what the sweep says of it."""

    claim: str
    verdict: str  # HOLDS, FAILS or UNSURE
    evidence: str

    def line(self) -> str:
        return f"- **{self.claim}**: {self.verdict}. {self.evidence}"


def save_verdicts(path: Path, verdicts: Sequence[Verdict]) -> None:
    """Write `verdicts` as data (a report's claims.json) for the page over every sweep
    (rpr_nmt.report.summary); with no verdict, remove the file so that none goes stale."""
    if verdicts:
        data = [asdict(v) for v in verdicts]
        path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    else:
        path.unlink(missing_ok=True)


def load_verdicts(path: Path) -> list[Verdict]:
    """The verdicts save_verdicts wrote to `path`; ValueError naming the file when it is not."""
    try:
        return [Verdict(**entry) for entry in json.loads(path.read_text())]
    except (json.JSONDecodeError, TypeError) as e:
        raise ValueError(
            f"{path}: not a list of verdicts ({e}); rebuild it with rpr-nmt-report {path.parent}"
        ) from None


def baseline_row(claim: Claim, rows: Sequence[Row]) -> Row | None:
    """The sweep's row that `claim` is judged against: the first it accepts; None without one."""
    return next((row for row in rows if claim.baseline(row.model)), None)


def judged_rows(claim: Claim, rows: Sequence[Row]) -> list[Row]:
    """The rows `claim` judges (its baseline's row aside), in table order; [] when the sweep
    lacks its baseline."""
    base = baseline_row(claim, rows)
    if base is None:
        return []
    return [row for row in rows if row is not base and claim.judged(row.model)]


def comparisons_needed(claims: Sequence[Claim], rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The paired tests the claims rest on: by baseline setting, the baseline's row first, then
    every row some claim judges against it. Claims that the sweep cannot judge ask for none."""
    needed: dict[str, list[Row]] = {}
    for claim in claims:
        judged = judged_rows(claim, rows)
        if not judged:
            continue
        base = baseline_row(claim, rows)
        assert base is not None  # judged_rows found it
        group = needed.setdefault(base.setting, [base])
        group += [row for row in judged if row not in group]
    return needed


def evidence(row: Row, comparison: Comparison | None) -> str:
    """'none: 30.1 ± 0.4 [29.1, 31.1] (3 seeds; 3 paired), Δ -8.2, p 0.001 (max 0.001) *'."""
    n = row.seeds()
    seeds = f"{n} seed" if n == "1" else f"{n} seeds"
    text = f"{row.label}: {format_stats(row.stats(SUMMARY_KEY))} ({seeds}"
    if comparison is None or not comparison.p_values.get(METRIC):
        note = comparison.note if comparison is not None else ""
        return text + f"), not tested{': ' + note if note else ''}"
    delta = statistics.fmean(comparison.deltas[METRIC])
    tested = len(comparison.seeds)
    return text + f"; {tested} paired), Δ {delta:+.1f}, {comparison.cell(METRIC)}"


def past_cap_evidence(row: Row, base: Row, comparison: Comparison | None) -> str:
    """'RoPE at 24.1 against the sinusoid at 22.6 (3 seed pairs), Δ +1.5, p 0.001 (max 0.004) *':
    the mean BLEU of both on the sentences tested (Comparison.scores), which no summary holds."""
    if comparison is None or not comparison.scores.get(METRIC):
        return f"{row.label}: not tested"
    scores, deltas = comparison.scores[METRIC], comparison.deltas[METRIC]
    base_scores = [s - d for s, d in zip(scores, deltas)]
    pairs = f"{len(scores)} seed pair" + ("s" if len(scores) != 1 else "")
    return (
        f"{row.label} at {statistics.fmean(scores):.1f} against {base.label} at "
        f"{statistics.fmean(base_scores):.1f} ({pairs}), Δ {statistics.fmean(deltas):+.1f}, "
        f"{comparison.cell(METRIC)}"
    )


def judge_claim(
    claim: Claim, rows: Sequence[Row], compared: dict[str, Comparison], scope: str = ""
) -> Verdict | None:
    """`claim`'s verdict from the paired tests of its judged rows against its baseline's row;
    None when the sweep lacks either.

    Args:
        claim: what is judged, against what.
        rows: the sweep's settings (rpr_nmt.report.sweep.group_runs).
        compared: each judged row's paired test against the claim's baseline, by setting.
        scope: what the tests scored when not the whole test set ("BLEU on the 312 test sentences
            longer than 15 BPE tokens"); the evidence then gives both sides' BLEU on it.
    """
    base, judged = baseline_row(claim, rows), judged_rows(claim, rows)
    if base is None or not judged:
        return None
    short = _too_weak(base, judged)
    if short:
        return Verdict(claim.text, UNSURE, short)
    outcomes = [outcome(compared.get(row.setting)) for row in judged]
    deltas = [
        statistics.fmean(compared[row.setting].deltas[METRIC])
        if row.setting in compared and compared[row.setting].deltas.get(METRIC)
        else 0.0
        for row in judged
    ]
    if scope:
        parts = [past_cap_evidence(row, base, compared.get(row.setting)) for row in judged]
        lead = scope
    else:
        parts = [evidence(row, compared.get(row.setting)) for row in judged]
        lead = f"against {base.label} ({format_stats(base.stats(SUMMARY_KEY))})"
    return Verdict(claim.text, claim.rule(outcomes, deltas), f"{lead}: " + "; ".join(parts))


def _too_weak(base: Row, judged: Sequence[Row]) -> str:
    """Why the comparison cannot judge a claim (the baseline under QUALITY_FLOOR, or a run stopped
    before its budget); "" when it can."""
    score = base.stats(SUMMARY_KEY)
    if score is None or score.mean < QUALITY_FLOOR:
        bleu = "no test BLEU" if score is None else f"test BLEU {score.mean:.1f}"
        return (
            f"the baseline, {base.label}, has {bleu}, below the floor of {QUALITY_FLOOR:g} at "
            "which claims are judged (under it a comparison tells how far training got, not what "
            "the positions do): train longer"
        )
    stopped = [str(run.path.name) for row in (base, *judged) for run in row.runs if run.unfinished]
    if stopped:
        return f"run(s) stopped before their budget: {', '.join(stopped)}; rerun them to finish"
    return ""


def judge_claims(
    claims: Sequence[Claim],
    rows: Sequence[Row],
    compared: dict[str, dict[str, Comparison]],
    scope: str = "",
) -> list[Verdict]:
    """The verdicts of the `claims` that the sweep's settings bear on, in the claims' order.

    Args:
        claims: FULL_TEST_CLAIMS for report.md, PAST_CAP_CLAIMS for length_report.md.
        rows: the sweep's settings.
        compared: by baseline setting, the paired tests against it by setting (at least those
            comparisons_needed names).
        scope: as judge_claim.
    """
    verdicts = []
    for claim in claims:
        base = baseline_row(claim, rows)
        against = compared.get(base.setting, {}) if base is not None else {}
        verdicts.append(judge_claim(claim, rows, against, scope))
    return [v for v in verdicts if v is not None]


def claims_section(verdicts: Sequence[Verdict], test: str) -> str:
    """The '## The claims' section of a report; empty when no claim applies."""
    if not verdicts:
        return ""
    lead = (
        f"Each claim tests the settings it judges against the baseline it names (in its "
        f"evidence: against ...) by {test} on test {METRIC}, or on the part of the test set the "
        f"evidence names, seed pair by seed pair: worse or better = every pair significant at "
        f"{ALPHA} in one direction, the same = no pair significant, partly worse or better = some "
        "pairs significant in one direction and none in the other. A claim is judged only when "
        f"its baseline reaches {QUALITY_FLOOR:g} test {METRIC}. 'The paper' is Shaw et al. "
        "2018; the rules are in rpr_nmt/report/claims.py.\n\n"
    )
    return "\n## The claims\n\n" + lead + "\n".join(v.line() for v in verdicts) + "\n"
