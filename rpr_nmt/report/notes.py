"""The notes a sweep report prints under its tables: which hosts the runs' own tokens/s come from,
what the two BLEU columns are, and which runs are unfinished."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rpr_nmt.report.rows import Row
from rpr_nmt.report.runs import Run, find_unfinished
from rpr_nmt.train.provenance import UNRECORDED, host_label

TOKENIZED_NOTE = (
    "test BLEU: sacreBLEU's own tokenisation (13a), the score to quote; test BLEU tok.: BLEU on "
    "13a tokens with compounds split (##AT##), as Shaw et al. (2018) and Vaswani et al. (2017) "
    "report it, from each run's eval JSON (tokenized_bleu; - where a run did not record it).\n"
)


def hosts_note(rows: Sequence[Row]) -> str:
    """Under a table of the runs' own tokens/s: what they are, and the hosts that trained each
    row (each session's record, rpr_nmt.train.provenance; "not recorded" before 2026-11-28)."""
    by_host: dict[str, list[str]] = {}
    bf16_hosts = set()  # the hosts of bf16 sessions (a session's own precision, else its run's)
    for row in rows:
        for run in row.runs:
            for session in run.summary.get("sessions") or [{}]:
                labels = by_host.setdefault(host_label(session), [])
                if row.label not in labels:
                    labels.append(row.label)
                if (session.get("precision") or run.summary.get("precision")) == "bf16":
                    bf16_hosts.add(host_label(session))
    if list(by_host) == [UNRECORDED]:
        hosts = f"{UNRECORDED} (runs trained before 2026-11-28)"
    elif len(by_host) == 1:
        hosts = f"all on one, {next(iter(by_host))}"
    else:
        hosts = "; ".join(f"{host}: {', '.join(labels)}" for host, labels in by_host.items())
    rounding = (
        ' bf16 rounds by the kernels a host runs (docs/performance.md, "Host classes"): runs '
        "from different hosts differ by that rounding too, not only in speed."
        if len(bf16_hosts) > 1
        else ""
    )
    return (
        "tokens/s: each run's own training rate, beside whatever else its host ran (sweeps train "
        "runs side by side), so compare speeds in a benchmark sitting (scripts/bench_train.py), "
        f"not here. Hosts: {hosts}.{rounding}\n"
    )


def unfinished_note(sweep_dir: Path, runs: Sequence[Run]) -> str:
    """The sweep's unfinished runs, marked: those without a summary (left out of every table) and
    those stopped by a signal (in the tables with the steps they reached); "" when none."""
    lines = []
    missing = [str(p.relative_to(sweep_dir)) for p in find_unfinished(sweep_dir)]
    if missing:
        lines.append(
            f"**Unfinished:** {len(missing)} run(s) without train_summary.json (still running, or "
            f"killed), left out of every table: {', '.join(missing)}.\n"
        )
    stopped = [str(r.path.relative_to(sweep_dir)) for r in runs if r.unfinished]
    if stopped:
        lines.append(
            f"**Unfinished:** {len(stopped)} run(s) stopped before their budget (stopped_by: "
            f"signal; rerunning the command resumes them), counted at the step they reached: "
            f"{', '.join(stopped)}.\n"
        )
    return "".join(line + "\n" for line in lines)
