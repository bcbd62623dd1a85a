"""Reports over finished runs: what `rpr-nmt-report` writes into a sweep folder.

    runs.py          a run folder (or its collected copy) as the reports read it
    stats.py         mean, standard deviation and 95% t-interval over seeds
    significance.py  sacrebleu's paired tests of each setting against a baseline, seed by seed
    labels.py        settings named as a reader names them: sinusoid, Shaw k = 16, RoPE, none
    sweep.py         the runs grouped by setting: report.md (tables, statistics, tests, claims)
    notes.py         the notes under its table: hosts, the two BLEU columns, unfinished runs
    claims.py        claims on position methods, each against the baseline it names, judged from
                     the tests: holds / does not hold / cannot tell
    plots.py         bleu_vs_k.png, test_bleu_by_setting.png: a dot per seed, mean ± sd
    lengths.py       each setting's test BLEU by source length: length_report.md, bleu_by_length.png
    unseen_lengths.py  BLEU past the training cap of a length study's sources
    summary.py       every sweep's verdicts, claim by claim: results/claims.md
    retrained.py     published settings retrained by changed code: rounding only, or beyond it?
    results.py       --collect: a sweep's small artefacts into results/<sweep>/, no checkpoints

Each report writes its verdicts as data beside it (claims.json, length_claims.json). The reports
read only run folders (.hydra/, train_summary.json, hyp_<split>.txt, and for lengths
src_lengths_<split>.txt or checkpoints/last.pt) and the references of the corpus.
"""

from rpr_nmt.report.lengths import (
    DEFAULT_BOUNDS,
    BucketScores,
    bucket_labels,
    bucket_of,
    length_table,
    plot_by_length,
    score_by_length,
    write_length_report,
)
from rpr_nmt.report.plots import plot_bleu_against_k, plot_settings
from rpr_nmt.report.results import collect_results
from rpr_nmt.report.runs import Run, find_runs
from rpr_nmt.report.significance import Comparison, compare_seedwise, paired_p_values
from rpr_nmt.report.stats import SeedStats, format_stats, seed_stats
from rpr_nmt.report.summary import claims_page, gather_verdicts, write_claims_page
from rpr_nmt.report.sweep import (
    Row,
    compare_rows,
    group_runs,
    markdown_table,
    reference_row,
    statistics_table,
    write_report,
)

__all__ = [
    "DEFAULT_BOUNDS",
    "BucketScores",
    "Comparison",
    "Row",
    "Run",
    "SeedStats",
    "bucket_labels",
    "bucket_of",
    "claims_page",
    "collect_results",
    "compare_rows",
    "compare_seedwise",
    "find_runs",
    "format_stats",
    "gather_verdicts",
    "group_runs",
    "length_table",
    "markdown_table",
    "paired_p_values",
    "plot_bleu_against_k",
    "plot_by_length",
    "plot_settings",
    "reference_row",
    "score_by_length",
    "seed_stats",
    "statistics_table",
    "write_claims_page",
    "write_length_report",
    "write_report",
]
