"""Which stack needs word order: a sweep's methods by placement, in one table.

experiment=where_positions trains each method in the encoder only and in the decoder only
(model.positions_in); beside the same method in both stacks and the model with none, that is a
2x2 per method:

    | method      | both stacks | encoder only               | decoder only               | none |
    | sinusoid    | 38.3 ± 0.2  | 37.9 ± 0.3 (Δ -0.4, p ...) | 31.0 ± 0.5 (Δ -7.3, p ...) | ...  |

Each cell is the test BLEU over seeds; each placement is tested against the same method in both
stacks, seed pair by seed pair (rpr_nmt.report.significance). The table appears in report.md when
the sweep has a method in one stack only; what it cannot test for want of the method in both
stacks, and a missing 'none', are named under it with how to add them.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from rpr_nmt.config import position_methods, position_stacks
from rpr_nmt.report.labels import method_label
from rpr_nmt.report.rows import Row
from rpr_nmt.report.significance import ALPHA, Comparison
from rpr_nmt.report.stats import format_stats, seed_stats

PLACEMENTS = (("both", "both stacks"), ("encoder", "encoder only"), ("decoder", "decoder only"))
METRIC, SUMMARY_KEY = "BLEU", "test_bleu"
STACKS = "model.positions_in"
STACKS_KEY = STACKS.removeprefix("model.")  # ModelConfig.positions_in


def _method(row: Row) -> tuple:
    """A row's model settings apart from where its methods are placed; keys a run's config lacks
    (added to the schema since) read as their defaults (rpr_nmt.report.runs.Run.flat_config)."""
    flat = row.runs[0].flat_config
    return tuple(
        (k, repr(v)) for k, v in sorted(flat.items()) if k.startswith("model.") and k != STACKS
    )


def placement_groups(rows: Sequence[Row]) -> list[tuple[Row, dict[str, Row]]]:
    """For each method that the sweep has in one stack only and in both: its both-stack row and
    its rows by placement ("encoder", "decoder", and "none" for the row without positions), in
    table order."""
    none = next((r for r in rows if position_methods(r.model) == ("none", "none")), None)
    groups = []
    for both in rows:
        if position_stacks(both.model) != "both" or both is none:
            continue
        placed = {
            position_stacks(r.model): r
            for r in rows
            if position_stacks(r.model) != "both" and _method(r) == _method(both)
        }
        if placed:
            groups.append((both, placed | ({"none": none} if none is not None else {})))
    return groups


def comparisons_needed(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """The paired tests the table rests on: by both-stack setting, that row first, then its
    placements and the row without positions (as rpr_nmt.report.verdicts.comparisons_needed)."""
    return {both.setting: [both, *placed.values()] for both, placed in placement_groups(rows)}


def _cell(
    row: Row | None, comparison: Comparison | None, values: Callable[[Row], list[float]]
) -> str:
    if row is None:
        return "-"
    text = format_stats(seed_stats(values(row)), interval=False)
    if comparison is not None and comparison.note:  # e.g. no seed in common: said, not left bare
        return f"{text} (not tested: {comparison.note.replace('the baseline', 'both stacks')})"
    if comparison is None or not comparison.deltas.get(METRIC):
        return text
    delta = statistics.fmean(comparison.deltas[METRIC])
    return f"{text} (Δ {delta:+.1f}, {comparison.cell(METRIC)})"


def placement_section(
    rows: Sequence[Row],
    compared: dict[str, dict[str, Comparison]],
    *,
    values: Callable[[Row], list[float]] | None = None,
    scope: str = "",
) -> str:
    """The '## Which stack needs word order' section of report.md (and, past the training
    lengths, of length_report.md); "" when the sweep has no method in one stack only.

    Args:
        rows: the sweep's settings.
        compared: by baseline setting, the paired tests against it by setting (at least those
            comparisons_needed names; without them the cells have no Δ and p), on the same
            sentences as `values`.
        values: a row's BLEU, one per seed; None = its runs' test BLEU.
        scope: what the BLEU is of, e.g. "on the 312 test sentences longer than 15 BPE tokens";
            "" = the whole test set (the heading then has no suffix).
    """
    groups = placement_groups(rows)
    heading = "Which stack needs word order" + (", past the training lengths" if scope else "")
    missing = _missing_note(rows, groups)
    if not groups:
        return f"\n## {heading}\n\n{missing}" if missing else ""
    values = values or (lambda row: row.values(SUMMARY_KEY))
    head = ["method", *(name for _, name in PLACEMENTS), "none"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    named = dict(PLACEMENTS) | {"none": "none"}
    tested = []  # (method, placement, its tests against both stacks), for the seed pairs
    for both, placed in groups:
        tests = compared.get(both.setting, {})
        cells = [both.label, _cell(both, None, values)]
        for stacks in ("encoder", "decoder", "none"):
            row = placed.get(stacks)
            comparison = tests.get(row.setting) if row is not None else None
            cells.append(_cell(row, comparison, values))
            if comparison is not None and comparison.seeds:
                tested.append((both.label, named[stacks], comparison))
        lines.append("| " + " | ".join(cells) + " |")
    seeds = sorted({len(r.runs) for both, placed in groups for r in (both, *placed.values())})
    lead = (
        f"Test BLEU{' ' + scope if scope else ''}, mean ± standard deviation over seeds "
        f"({' or '.join(map(str, seeds))} seeds), of each method in both stacks, in one stack "
        "only (model.positions_in; the other stack has no position method) and of the model "
        "without any. Δ and p: each placement against the same method in both stacks, seed pair "
        f"by seed pair (median p, max over pairs; * = every pair below {ALPHA}).\n\n"
    )
    table = "\n".join(lines) + "\n" + _seed_pairs(tested)
    return f"\n## {heading}\n\n" + lead + table + (f"\n{missing}" if missing else "")


def _missing_note(rows: Sequence[Row], groups: list[tuple[Row, dict[str, Row]]]) -> str:
    """What the table lacks and how to add it: the same method in both stacks for rows with a
    method in one stack only (without it they are not tested, so not in the table), and the
    model without positions (the none column); "" when nothing is missing or nothing is placed.
    A sweep of experiment=where_positions alone lacks both: they are the position study's runs."""
    grouped = {_method(both) for both, _ in groups}
    none = [r for r in rows if position_methods(r.model) == ("none", "none")]
    alone = [
        r
        for r in rows
        if position_stacks(r.model) != "both" and _method(r) not in grouped and r not in none
    ]
    if not alone and (none or not groups):
        return ""
    lacking, train = [], []
    if alone:
        names = list(dict.fromkeys(method_label({**r.model, STACKS_KEY: "both"}) for r in alone))
        lacking.append(f"{_listed(names)} in both stacks")
        train.append(f"{STACKS}=both")
    if not none:
        lacking.append("the model without positions")
        train.append("positions=none")
    return (
        "This sweep has methods in one stack only but not what the table tests them against: "
        f"{', and '.join(lacking)}. Train them into this sweep folder (the sweep's command "
        f"with {', and with '.join(train)}), or copy runs trained before beside these with "
        "`rpr-nmt-report --collect RUN --into FOLDER` and report that folder (docs/reporting.md, "
        '"Which stack needs word order").\n'
    )


def _listed(names: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _seed_pairs(tested: list[tuple[str, str, Comparison]]) -> str:
    """Each tested placement's pairs, one column per train.seed: Δ BLEU against the same method
    in both stacks and the pair's p ("" when nothing was tested).

    Args:
        tested: (method, placement, its Comparison against the method in both stacks), in
            table order."""
    if not tested:
        return ""
    seeds = sorted({s for *_, c in tested for s in c.seeds}, key=lambda s: (s is None, s or 0))
    head = ["method", "placement", *(f"seed {s}" if s is not None else "no seed" for s in seeds)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, placement, comparison in tested:
        pairs = dict(
            zip(comparison.seeds, zip(comparison.deltas[METRIC], comparison.p_values[METRIC]))
        )
        cells = [f"Δ {pairs[s][0]:+.2f}, p {pairs[s][1]:.3f}" if s in pairs else "-" for s in seeds]
        lines.append("| " + " | ".join([label, placement, *cells]) + " |")
    lead = (
        "\nBy seed pair: each placement's BLEU minus the same method's in both stacks with the "
        "same train.seed, and the pair's p.\n\n"
    )
    return lead + "\n".join(lines) + "\n"
