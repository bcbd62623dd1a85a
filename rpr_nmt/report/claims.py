"""Claims on position methods judged from a sweep: holds / does not hold / cannot tell.

Each claim names its source, the setting it is judged against (its baseline) and the settings it
judges (Claim, CLAIMS): Shaw et al.'s own claims ("the paper") against their model (k = 16,
a^K + a^V, no sinusoid), later papers' claims against the sinusoid or the learned table. Each judged
setting is compared with the baseline through sacrebleu's paired test on test BLEU, one test per
seed pair, same seed against same seed (rpr_nmt.report.significance); the claims on unseen lengths
(Claim.past_cap) on the test sentences longer than any training source (rpr_nmt.report.lengths).
A setting reads against the baseline as

    worse, better   every seed pair significant at 0.05, every difference of the same sign;
    same            no seed pair significant;
    partly worse    some seed pairs significantly worse, the others not significant;
    partly better   the same, better;
    mixed           significant pairs in both directions, or no test.

A claim of a difference ("k = 0 collapses", "carries over better") holds when every seed pair finds
it; a claim of no difference ("k >= 2 is flat") holds when no seed pair finds one, and cannot be
told when the seeds disagree; a one-sided claim ("a^K alone is enough": no loss) holds when no seed
pair finds the difference it excludes. A claim whose baseline or judged settings a sweep lacks is
not judged for that sweep. A verdict on one seed rests on one training run: the evidence names the
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
from rpr_nmt.report.labels import relative_k
from rpr_nmt.report.significance import ALPHA, Comparison
from rpr_nmt.report.stats import format_stats

if TYPE_CHECKING:  # sweep.py imports this module
    from rpr_nmt.report.sweep import Row

HOLDS, FAILS, UNSURE = "holds", "does not hold", "cannot tell at this budget"
METRIC = "BLEU"  # the papers' metric: the verdicts rest on it
SUMMARY_KEY = "test_bleu"

Model = dict[str, Any]
Predicate = Callable[[Model], bool]  # which settings (model sections) a claim names
Rule = Callable[[list[str], list[float]], str]  # outcomes, mean BLEU differences -> verdict


def is_reference(model: Model) -> bool:
    """The paper's base model: k = 16, a^K and a^V, no sinusoid."""
    return (
        relative_k(model) == 16
        and bool(model.get("relative_keys"))
        and bool(model.get("relative_values"))
        and position_methods(model) == ("none", "shaw")
    )


def outcome(comparison: Comparison | None) -> str:
    """'worse', 'better', 'same', 'partly worse', 'partly better' or 'mixed': a setting against
    its baseline (module docstring)."""
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


# Verdict rules: the outcomes of the judged settings against the baseline -> HOLDS, FAILS, UNSURE.


def _a_loss(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed loss: holds when every row is worse; fails when one is the same or (partly)
    better."""
    if all(o == "worse" for o in outcomes):
        return HOLDS
    if any(o in ("same", "better", "partly better") for o in outcomes):
        return FAILS
    return UNSURE


def _a_gain(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed gain: holds when every row is better; fails when one is the same or (partly)
    worse (the mirror of _a_loss)."""
    if all(o == "better" for o in outcomes):
        return HOLDS
    if any(o in ("same", "worse", "partly worse") for o in outcomes):
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
    """A claimed 'no better than the baseline': holds when no row is better in any seed pair;
    fails when one is better in every pair."""
    if all(o in ("same", "worse", "partly worse") for o in outcomes):
        return HOLDS
    if any(o == "better" for o in outcomes):
        return FAILS
    return UNSURE


# Which settings a claim names, by their model section.


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


def is_sinusoid(model: Model) -> bool:
    """The sinusoid alone: the absolute baseline of most claims, and of the length report."""
    return position_methods(model) == ("sinusoid", "none")


def _learned(model: Model) -> bool:  # the learned table alone
    return position_methods(model) == ("learned", "none")


def _relative_and_sinusoid(model: Model) -> bool:  # the paper's "both"
    return position_methods(model) == ("sinusoid", "shaw") and bool(relative_k(model))


def _rope(model: Model) -> bool:  # RoPE alone, no absolute method
    return position_methods(model) == ("none", "rope")


def _alibi(model: Model) -> bool:  # ALiBi alone
    return position_methods(model) == ("none", "alibi")


def _t5(model: Model) -> bool:  # T5's buckets alone
    return position_methods(model) == ("none", "t5")


@dataclass(frozen=True)
class Claim:
    """A claim, the comparison it rests on, and how that comparison decides it.

    Attributes:
        text: the claim as the reports print it, with its source.
        baseline: the setting it is judged against (a sweep's first row it accepts).
        judged: the settings it judges, each against the baseline (the baseline's row aside).
        rule: the judged settings' outcomes and mean BLEU differences -> HOLDS, FAILS or UNSURE.
        past_cap: judged on the test sentences longer than the training cap (length_report.md),
            not on the whole test set (report.md).
    """

    text: str
    baseline: Predicate
    judged: Predicate
    rule: Rule
    past_cap: bool = False


CARRY_OVER_SOURCE = "Rosendahl et al. 2019: +4.4 to 11.9% BLEU; Neishi & Yoshinaga 2019"
# The relative methods whose carry-over to unseen lengths is judged, and the absolute baselines.
RELATIVE_METHODS = (
    ("Shaw k = 16", is_reference),
    ("RoPE", _rope),
    ("ALiBi", _alibi),
    ("T5 buckets", _t5),
)
ABSOLUTE_METHODS = (("the sinusoid", is_sinusoid), ("the learned table", _learned))

UNSEEN_CLAIM = (
    "relative positions carry over to sources longer than any seen in training, at least as well "
    "as absolute ones (the paper's case for clipping)"
)

# The claims in report order: Shaw et al.'s ("the paper"), then later papers' on other methods,
# then those on unseen lengths.
CLAIMS: tuple[Claim, ...] = (
    Claim("without any position information the model collapses (paper: 12.5 against 25.8)",
          is_reference, _no_positions, _a_loss),
    Claim("k >= 2 is flat: no k from 2 on differs from k = 16 (paper: 25.8 to 25.9)",
          is_reference, _flat_k, _no_difference),
    Claim("a^K alone is enough (paper: 25.8, as with both terms)", is_reference, _keys_only,
          _no_loss),
    Claim("a^V alone is a little weaker (paper: -0.5)", is_reference, _values_only,
          _a_small_loss),
    Claim("relative positions match or beat absolute ones (paper: +0.3 En-De, +0.5 En-Fr)",
          is_reference, is_sinusoid, _no_gain),
    Claim("adding the sinusoid to relative positions gains nothing", is_reference,
          _relative_and_sinusoid, _no_gain),
    Claim("RoPE matches or beats the sinusoid (Su et al., RoFormer, Table 1: 27.5 against 27.3 "
          "on WMT14 En-De)", is_sinusoid, _rope, _no_loss),
    Claim("without any position information an encoder-decoder is not viable: it falls below the "
          "sinusoid (Gumma et al. 2024)", is_sinusoid, _no_positions, _a_loss),
    Claim(UNSEEN_CLAIM, is_reference, is_sinusoid, _no_gain, past_cap=True),
    *(
        Claim(f"relative methods carry over to sources longer than any seen in training better "
              f"than absolute ones: {name} against {against} ({CARRY_OVER_SOURCE})", baseline,
              judged, _a_gain, past_cap=True)
        for name, judged in RELATIVE_METHODS
        for against, baseline in ABSOLUTE_METHODS
    ),
    Claim("ALiBi extrapolates to sources longer than any seen in training at least as well as the "
          "sinusoid (Press et al. 2022)", is_sinusoid, _alibi, _no_loss, past_cap=True),
)  # fmt: skip
FULL_TEST_CLAIMS = tuple(claim for claim in CLAIMS if not claim.past_cap)  # report.md's
PAST_CAP_CLAIMS = tuple(claim for claim in CLAIMS if claim.past_cap)  # length_report.md's
ALL_CLAIMS = tuple(claim.text for claim in CLAIMS)  # the order of results/claims.md


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
    n = len(row.runs)
    seeds = f"{n} seed" if n == 1 else f"{n} seeds"
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
        "pairs significant in one direction and none in the other. 'The paper' is Shaw et al. "
        "2018; the rules are in rpr_nmt/report/claims.py.\n\n"
    )
    return "\n## The claims\n\n" + lead + "\n".join(v.line() for v in verdicts) + "\n"
