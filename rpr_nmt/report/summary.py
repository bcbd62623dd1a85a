"""Every published sweep's verdicts on the claims, claim by claim: results/claims.md.

Each sweep's report writes its verdicts as data beside report.md (claims.json, and
length_claims.json beside length_report.md); this page gathers them without recomputing a test,
so that one file says, for each claim, what every sweep that bears on it found.
"""

from __future__ import annotations

from pathlib import Path

from rpr_nmt.report.claims import ALL_CLAIMS
from rpr_nmt.report.lengths import LENGTH_CLAIMS_FILE
from rpr_nmt.report.sweep import CLAIMS_FILE
from rpr_nmt.report.verdicts import Verdict, load_verdicts

PAGE = "claims.md"


def gather_verdicts(results_dir: str | Path) -> dict[str, list[tuple[str, Verdict]]]:
    """(sweep name, verdict) pairs by claim, the known claims first in their order
    (rpr_nmt.report.claims.CLAIMS).

    Raises:
        FileNotFoundError: no sweep under `results_dir` has written a verdict.
    """
    results_dir = Path(results_dir)
    files = sorted(results_dir.glob(f"*/{CLAIMS_FILE}")) + sorted(
        results_dir.glob(f"*/{LENGTH_CLAIMS_FILE}")
    )
    if not files:
        raise FileNotFoundError(
            f"no {CLAIMS_FILE} under {results_dir}/*/: rebuild the sweeps' reports first "
            "(make results, or rpr-nmt-report on each sweep folder)"
        )
    by_claim: dict[str, list[tuple[str, Verdict]]] = {claim: [] for claim in ALL_CLAIMS}
    for path in files:
        for verdict in load_verdicts(path):
            by_claim.setdefault(verdict.claim, []).append((path.parent.name, verdict))
    for pairs in by_claim.values():
        pairs.sort(key=lambda pair: pair[0])
    return by_claim


def claims_page(results_dir: str | Path) -> str:
    """The markdown of results/claims.md: a verdict table, then each verdict's evidence."""
    by_claim = gather_verdicts(results_dir)
    lines = [
        "# The claims, sweep by sweep",
        "",
        "Gathered by `rpr-nmt-report --claims results` (run by `make results`) from the verdicts "
        "each sweep's report wrote beside it. A verdict rests on sacrebleu's paired test of each "
        "setting the claim judges against the baseline the claim names (Shaw k = 16, i.e. a^K + "
        "a^V and no sinusoid, for the claims of 'the paper', Shaw et al. 2018; the sinusoid or the "
        "learned table for the others) on test BLEU, or for the claims on unseen lengths on the "
        "test sentences longer than any training source, and for those on long sentences on the "
        "length report's last bucket, seed pair by seed pair; the rules are in "
        "rpr_nmt/report/claims.py and each sweep's report.md and length_report.md hold its tables.",
        "",
        "| claim | sweep | verdict |",
        "|---|---|---|",
    ]
    for claim, pairs in by_claim.items():
        if not pairs:
            lines.append(f"| {claim} | - | not judged: no published sweep bears on it yet |")
        for i, (sweep, verdict) in enumerate(pairs):
            lines.append(f"| {claim if i == 0 else ''} | {sweep} | {verdict.verdict} |")
    lines += ["", "## Evidence"]
    for claim, pairs in by_claim.items():
        if pairs:
            lines += ["", f"### {claim}", ""]
            lines += [f"- {sweep}: {v.verdict}. {v.evidence}" for sweep, v in pairs]
    return "\n".join(lines) + "\n"


def write_claims_page(results_dir: str | Path) -> tuple[Path, str]:
    """Write claims_page(results_dir) to results_dir/claims.md; return the path and the text."""
    text = claims_page(results_dir)
    path = Path(results_dir) / PAGE
    path.write_text(text)
    return path, text
