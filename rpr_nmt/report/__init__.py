"""Reports over finished runs: what `rpr-nmt-report` writes into a sweep folder.

    sweep.py    the runs of a sweep grouped by setting (seeds pooled): report.md, bleu_vs_k.png
    lengths.py  each setting's test BLEU by source length: length_report.md, bleu_by_length.png

Both read only the run folders (.hydra/, train_summary.json, hyp_<split>.txt, checkpoints/).
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
from rpr_nmt.report.sweep import (
    Row,
    Run,
    find_runs,
    group_runs,
    markdown_table,
    plot_bleu_against_k,
    write_report,
)

__all__ = [
    "DEFAULT_BOUNDS",
    "BucketScores",
    "Row",
    "Run",
    "bucket_labels",
    "bucket_of",
    "find_runs",
    "group_runs",
    "length_table",
    "markdown_table",
    "plot_bleu_against_k",
    "plot_by_length",
    "score_by_length",
    "write_length_report",
    "write_report",
]
