"""The paper's claims judged from a sweep: holds / does not hold / cannot tell at this budget.

Every claim compares settings with the paper's reference model (k = 16, a^K + a^V, no sinusoid)
through sacrebleu's paired test on test BLEU, one test per seed pair (rpr_nmt.report.significance).
A setting reads against the reference as

    worse, better   every seed pair significant at 0.05, every difference of the same sign;
    same            no seed pair significant;
    partly worse    some seed pairs significantly worse, the others not significant;
    partly better   the same, better;
    mixed           significant pairs in both directions, or no test.

A claim of a difference ("k = 0 collapses") holds when every seed pair finds it; a claim of no
difference ("k >= 2 is flat") holds when no seed pair finds one, and cannot be told when the seeds
disagree; a one-sided claim ("a^K alone is enough": no loss) holds when no seed pair finds the
difference it excludes. A verdict on one seed rests on one training run: the evidence names the
seeds.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rpr_nmt.config import position_methods
from rpr_nmt.report.significance import ALPHA, Comparison
from rpr_nmt.report.stats import format_stats

if TYPE_CHECKING:  # sweep.py imports this module
    from rpr_nmt.report.sweep import Row

HOLDS, FAILS, UNSURE = "holds", "does not hold", "cannot tell at this budget"
METRIC = "BLEU"  # the paper's metric: the verdicts rest on it
SUMMARY_KEY = "test_bleu"


def relative_k(model: dict[str, Any]) -> int:
    """The clipping distance of a model's relative terms; 0 when it has none (k = 0 or no term)."""
    k = int(model.get("max_relative_position") or 0)
    has_term = model.get("relative_keys", False) or model.get("relative_values", False)
    return k if has_term else 0


def positions(model: dict[str, Any]) -> str:
    """A model's positions in the paper's terms: 'k=16 a^K+a^V', 'sinusoid', 'rope, learned',
    'none' (no absolute and no relative method: rpr_nmt.config.position_methods)."""
    absolute, relative = position_methods(model)
    k = relative_k(model)
    terms = [t for t, on in (("a^K", "relative_keys"), ("a^V", "relative_values")) if model.get(on)]
    parts = [f"k={k} " + "+".join(terms)] if k else []
    if relative not in ("shaw", "none"):
        parts.append(relative)
    if absolute != "none":
        parts.append(absolute)
    return ", ".join(parts) or "none"


def is_reference(model: dict[str, Any]) -> bool:
    """The paper's base model: k = 16, a^K and a^V, no sinusoid."""
    return (
        relative_k(model) == 16
        and bool(model.get("relative_keys"))
        and bool(model.get("relative_values"))
        and position_methods(model) == ("none", "shaw")
    )


def outcome(comparison: Comparison | None) -> str:
    """'worse', 'better', 'same', 'partly worse', 'partly better' or 'mixed': a setting against
    the reference (module docstring)."""
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
    """One claim of the paper and what the sweep says of it."""

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


def evidence(row: Row, reference: Row, comparison: Comparison | None) -> str:
    """'k=0: 30.1 ± 0.4 [29.1, 31.1] (3 seeds), Δ -8.2, p 0.001 (max 0.001) *'."""
    n = len(row.runs)
    seeds = f"{n} seed" if n == 1 else f"{n} seeds"
    text = f"{positions(row.model)}: {format_stats(row.stats(SUMMARY_KEY))} ({seeds}"
    if comparison is None or not comparison.p_values.get(METRIC):
        note = comparison.note if comparison is not None else ""
        return text + f"), not tested{': ' + note if note else ''}"
    delta = statistics.fmean(comparison.deltas[METRIC])
    tested = len(comparison.seeds)
    return text + f"; {tested} paired), Δ {delta:+.1f}, {comparison.cell(METRIC)}"


def _judge(
    claim: str,
    rows: Sequence[Row],
    reference: Row,
    compared: dict[str, Comparison],
    verdict_of: Callable[[list[str], list[float]], str],
) -> Verdict | None:
    """A Verdict from the outcomes (and mean BLEU differences) of `rows` against the reference."""
    if not rows:
        return None
    outcomes = [outcome(compared.get(row.setting)) for row in rows]
    deltas = [
        statistics.fmean(compared[row.setting].deltas[METRIC])
        if row.setting in compared and compared[row.setting].deltas.get(METRIC)
        else 0.0
        for row in rows
    ]
    base = f"against {positions(reference.model)} {format_stats(reference.stats(SUMMARY_KEY))}"
    parts = [evidence(row, reference, compared.get(row.setting)) for row in rows]
    return Verdict(claim, verdict_of(outcomes, deltas), f"{base}: " + "; ".join(parts))


def _a_loss(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed loss: holds when every row is worse; fails when one is the same or (partly)
    better."""
    if all(o == "worse" for o in outcomes):
        return HOLDS
    if any(o in ("same", "better", "partly better") for o in outcomes):
        return FAILS
    return UNSURE


def _a_small_loss(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed small loss: as _a_loss, but no significant difference with a lower mean is too
    small to tell at this budget."""
    if all(o == "worse" for o in outcomes):
        return HOLDS
    if any(o in ("better", "partly better") for o in outcomes):
        return FAILS
    if all(o == "same" for o in outcomes) and all(d >= 0 for d in deltas):
        return FAILS
    return UNSURE


def _no_difference(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed equality: holds when no row differs; fails when one differs in every seed."""
    if all(o == "same" for o in outcomes):
        return HOLDS
    if any(o in ("worse", "better") for o in outcomes):
        return FAILS
    return UNSURE


def _no_loss(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed 'at least as good': holds when no row is worse in any seed pair; fails when one
    is worse in every pair."""
    if all(o in ("same", "better", "partly better") for o in outcomes):
        return HOLDS
    if any(o == "worse" for o in outcomes):
        return FAILS
    return UNSURE


def _no_gain(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed 'no better than the reference': holds when no row is better in any seed pair;
    fails when one is better in every pair."""
    if all(o in ("same", "worse", "partly worse") for o in outcomes):
        return HOLDS
    if any(o == "better" for o in outcomes):
        return FAILS
    return UNSURE


Model = dict[str, Any]


def _relative_only(model: Model) -> bool:  # Shaw's terms and no absolute method
    return position_methods(model) == ("none", "shaw") and bool(relative_k(model))


def _no_positions(model: Model) -> bool:  # no absolute and no relative method at all
    return position_methods(model) == ("none", "none")


def _flat_k(model: Model) -> bool:  # k >= 2 with both terms, no sinusoid
    both = model.get("relative_keys") and model.get("relative_values")
    return _relative_only(model) and bool(both) and relative_k(model) >= 2


def _keys_only(model: Model) -> bool:
    return _relative_only(model) and not model.get("relative_values")


def _values_only(model: Model) -> bool:
    return _relative_only(model) and not model.get("relative_keys")


def _absolute(model: Model) -> bool:  # the sinusoid alone
    return position_methods(model) == ("sinusoid", "none")


def _relative_and_sinusoid(model: Model) -> bool:  # the paper's "both"
    return position_methods(model) == ("sinusoid", "shaw") and bool(relative_k(model))


# The paper's claims: (claim, which settings bear on it, how their outcomes decide it).
CLAIMS: tuple[tuple[str, Callable[[Model], bool], Callable[[list[str], list[float]], str]], ...] = (
    ("without any position information the model collapses (paper: 12.5 against 25.8)",
     _no_positions, _a_loss),
    ("k >= 2 is flat: no k from 2 on differs from k = 16 (paper: 25.8 to 25.9)",
     _flat_k, _no_difference),
    ("a^K alone is enough (paper: 25.8, as with both terms)", _keys_only, _no_loss),
    ("a^V alone is a little weaker (paper: -0.5)", _values_only, _a_small_loss),
    ("relative positions match or beat absolute ones (paper: +0.3 En-De, +0.5 En-Fr)",
     _absolute, _no_gain),
    ("adding the sinusoid to relative positions gains nothing", _relative_and_sinusoid, _no_gain),
)  # fmt: skip


def judge_claims(
    rows: Sequence[Row], reference: Row, compared: dict[str, Comparison]
) -> list[Verdict]:
    """The paper's claims that the sweep's settings bear on, each with its verdict.

    Args:
        rows: the sweep's settings (rpr_nmt.report.sweep.group_runs).
        reference: the paper's reference model's row; no claim is judged without it.
        compared: each other row's paired test against `reference`, by setting.
    """
    if not is_reference(reference.model):
        return []
    others = [row for row in rows if row is not reference]
    verdicts = [
        _judge(claim, [r for r in others if bears(r.model)], reference, compared, rule)
        for claim, bears, rule in CLAIMS
    ]
    return [v for v in verdicts if v is not None]


def claims_section(verdicts: Sequence[Verdict], test: str) -> str:
    """The '## The paper's claims' section of report.md; empty when no claim applies."""
    if not verdicts:
        return ""
    lead = (
        f"Each setting against the reference by {test} on test {METRIC}, seed pair by seed pair: "
        f"worse or better = every pair significant at {ALPHA} in one direction, the same = no "
        "pair significant, partly worse or better = some pairs significant in one direction and "
        "none in the other (rpr_nmt/report/claims.py).\n\n"
    )
    return "\n## The paper's claims\n\n" + lead + "\n".join(v.line() for v in verdicts) + "\n"


UNSEEN_CLAIM = (
    "relative positions carry over to sources longer than any seen in training, at least as well "
    "as absolute ones (the paper's case for clipping)"
)


def unseen_length_verdict(
    rows: Sequence[Row], reference: Row, compared: dict[str, Comparison], cap: int, n: int
) -> Verdict | None:
    """The claim on unseen lengths, from the paired tests of the absolute-position rows against
    the reference on the `n` test sentences whose source is longer than `cap` BPE tokens."""
    absolute = [r for r in rows if _absolute(r.model)]
    if not absolute or not is_reference(reference.model):
        return None
    parts = []
    for row in absolute:
        comparison = compared.get(row.setting)
        if comparison is None or not comparison.scores.get(METRIC):
            parts.append(f"{positions(row.model)}: not tested")
            continue
        scores, deltas = comparison.scores[METRIC], comparison.deltas[METRIC]
        base = [s - d for s, d in zip(scores, deltas)]
        pairs = f"{len(scores)} seed pair" + ("s" if len(scores) != 1 else "")
        parts.append(
            f"{positions(row.model)} {statistics.fmean(scores):.1f} against "
            f"{positions(reference.model)} {statistics.fmean(base):.1f} ({pairs}), Δ "
            f"{statistics.fmean(deltas):+.1f}, {comparison.cell(METRIC)}"
        )
    verdict = _no_gain([outcome(compared.get(r.setting)) for r in absolute], [])
    scope = f"BLEU on the {n} test sentences longer than {cap} BPE tokens"
    return Verdict(UNSEEN_CLAIM, verdict, f"{scope}: " + "; ".join(parts))


ALL_CLAIMS = tuple(claim for claim, _, _ in CLAIMS) + (UNSEEN_CLAIM,)  # in the paper's order
