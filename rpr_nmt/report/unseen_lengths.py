"""BLEU past the training cap: each setting on the test sentences whose source is longer than any
training source (data.max_train_source_tokens), over seeds, tested pair by pair against a baseline
with sacrebleu's paired tests (rpr_nmt.report.significance). The length report
(rpr_nmt.report.lengths) adds the section, the placement table and the claims on unseen lengths.
Without a cap, the same on the long sentences of the report's last bucket (long_sentences).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from rpr_nmt.report.claims import LONG_CLAIMS
from rpr_nmt.report.runs import CorpusText, read_hypotheses, source_lengths
from rpr_nmt.report.significance import (
    DEFAULT_SAMPLES,
    TESTS,
    Comparison,
    SeedOutput,
    compare_seedwise,
    report_bleu,
)
from rpr_nmt.report.stats import STATS_LEGEND, format_stats, seed_stats
from rpr_nmt.report.sweep import Row
from rpr_nmt.report.verdicts import Verdict, claims_section, comparisons_needed, judge_claims


def unseen_outputs(row: Row, cap: int, text: CorpusText) -> list[SeedOutput]:
    """Each run's test hypotheses and references on the sentences whose source is longer than
    `cap` BPE tokens (lengths no training pair had), as (seed, hyps, refs, target language)."""
    found = []
    for run in row.runs:
        refs = text.references(run, run.test_split)
        hyps = read_hypotheses(run, run.test_split, len(refs))
        unseen = [i for i, n in enumerate(source_lengths(run, run.test_split, text)) if n > cap]
        lang = str(run.config.get("data", {}).get("tgt_lang", ""))
        found.append((run.seed, [hyps[i] for i in unseen], [refs[i] for i in unseen], lang))
    return found


def seed_bleu(outputs: dict[str, list[SeedOutput]]) -> dict[str, list[float]]:
    """Each setting's BLEU on the chosen sentences (`outputs`: unseen_outputs by setting), one per
    seed."""
    return {
        setting: [report_bleu(h, r, lang) for _, h, r, lang in found]
        for setting, found in outputs.items()
    }


def compare_by_baseline(
    outputs: dict[str, list[SeedOutput]],
    needed: dict[str, list[Row]],
    by_baseline: dict[str, dict[str, Comparison]],
    **paired: object,
) -> dict[str, dict[str, Comparison]]:
    """`by_baseline` completed with each baseline setting of `needed` it lacks (verdicts'
    comparisons_needed: a baseline's setting -> the rows compared with it): its rows' paired tests
    against it on `outputs` (compare_unseen_lengths with `paired`)."""
    for setting, chosen in needed.items():
        if setting not in by_baseline:
            chosen_outputs = {row.setting: outputs[row.setting] for row in chosen}
            by_baseline[setting] = compare_unseen_lengths(chosen_outputs, setting, **paired)[0]
    return by_baseline


def compare_unseen_lengths(
    outputs: dict[str, list[SeedOutput]], baseline: str, *, test: str = "bs", n_samples: int = 0
) -> tuple[dict[str, Comparison], int]:
    """sacrebleu's paired test of every other setting against `baseline`, seed by seed, on the
    test sentences past the cap (`outputs`: each setting's unseen_outputs).

    Returns:
        The comparisons by setting, and the number of such sentences (in the baseline's first run).
    """
    base = outputs[baseline]
    others = {setting: found for setting, found in outputs.items() if setting != baseline}
    compared = compare_seedwise(base, others, test=test, n_samples=n_samples)
    return compared, len(base[0][2]) if base else 0


def unseen_length_section(
    rows: Sequence[Row],
    bleu: dict[str, list[float]],
    baseline: Row,
    compared: tuple[dict[str, Comparison], int],
    cap: int,
    *,
    test: str = "bs",
    n_samples: int = 0,
    long_from: int | None = None,
) -> str:
    """'## Past the training lengths': every setting's test BLEU on the sentences longer than
    `cap` BPE tokens (`bleu`: each setting's, one per seed, by setting) over seeds, with the mean
    difference to `baseline` and the paired test's p-values per seed pair (`compared`: what
    compare_unseen_lengths gave against `baseline`, with `test` and `n_samples`). With
    `long_from` instead, '## Long sentences': the same on the sentences of at least `long_from`
    BPE tokens (a sweep without a training cap; `bleu` and `compared` on those)."""
    compared, n = compared
    samples = n_samples or DEFAULT_SAMPLES[test]
    title = "Past the training lengths"
    which = f"whose source is longer than {cap} BPE tokens, which no training source was"
    if long_from is not None:
        title = "Long sentences"
        which = f"whose source has at least {long_from} BPE tokens (the last length bucket)"
    lines = [
        f"\n## {title}\n\nTest BLEU on the {n} test sentences {which}; {STATS_LEGEND}. Δ: setting "
        f"minus the baseline ({baseline.label}), mean over seed pairs; p: sacrebleu's "
        f"{TESTS[test]} ({samples} samples) per seed pair, in seed order.\n",
        f"| setting | seeds | BLEU, {n} sentences | Δ | p per seed pair |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        seeds = bleu[row.setting]
        cells = [row.label, str(len(seeds)), format_stats(seed_stats(seeds))]
        comparison = compared.get(row.setting)
        if row is baseline or comparison is None or not comparison.deltas.get("BLEU"):
            cells += ["(baseline)" if row is baseline else "-", ""]
        else:
            cells.append(f"{statistics.fmean(comparison.deltas['BLEU']):+.1f}")
            cells.append(" / ".join(f"{p:.3f}" for p in comparison.p_values["BLEU"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def long_sentences(
    rows: Sequence[Row],
    baseline: Row,
    long_from: int,
    corpus: CorpusText,
    test: str,
    n_samples: int,
) -> tuple[str, list[Verdict]]:
    """A sweep without a training cap: every setting's test BLEU on the sentences of the last
    bucket (at least `long_from` BPE tokens) tested against `baseline`, and the claims on long
    sentences judged there (LONG_CLAIMS). Returns the section with its verdicts, and the verdicts;
    ("", []) when the bucket holds no sentence."""
    outputs = {row.setting: unseen_outputs(row, long_from - 1, corpus) for row in rows}
    if not any(refs for found in outputs.values() for _, _, refs, _ in found):
        return "", []
    paired = dict(test=test, n_samples=n_samples)
    compared = compare_unseen_lengths(outputs, baseline.setting, **paired)
    bleu = seed_bleu(outputs)
    text = unseen_length_section(rows, bleu, baseline, compared, 0, **paired, long_from=long_from)
    needed = comparisons_needed(LONG_CLAIMS, rows)  # each claim against its own baseline
    by_baseline = compare_by_baseline(outputs, needed, {baseline.setting: compared[0]}, **paired)
    scope = f"on the {compared[1]} test sentences of at least {long_from} BPE tokens"
    verdicts = judge_claims(LONG_CLAIMS, rows, by_baseline, f"BLEU {scope}")
    return text + claims_section(verdicts, TESTS[test]), verdicts
