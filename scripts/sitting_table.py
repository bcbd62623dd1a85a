"""The table of a CPU sitting: rpr-nmt's methods in each precision beside OpenNMT-py (issue 53).

    python scripts/sitting_table.py SITTING [--out SITTING/sitting.md]

SITTING is a folder that scripts/cpu_sitting.sh wrote: bench.json (scripts/bench_train.py --json)
and onmt_before.log, onmt_after.log (the peer's train_bench.sh, whose last line is its summary as
JSON). The peer's figure is the mean of its steady rates before and after; each row of rpr-nmt is
divided by it. Rows keep bench_train.py's order; the peer's rows come first.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, NoReturn

PEER_LOGS = ("onmt_before.log", "onmt_after.log")
BENCH_KEYS = ("date", "host", "command", "rows")
ROW_KEYS = ("label", "precision", "tokens_per_sec", "time_ratio_to_sinusoid", "time_ratio_range")
PEER_KEYS = ("steady_tok_s", "peak_rss_MiB")


def refuse(message: str) -> NoReturn:
    """One line on stderr, exit 2: the input is not what the table needs."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def missing_key(record: object, keys: tuple[str, ...]) -> str | None:
    """The first of `keys` that `record` (a JSON object) lacks; None when it has them all."""
    if not isinstance(record, dict):
        return f"holds a {type(record).__name__}, not an object"
    return next((f"no {key!r}" for key in keys if key not in record), None)


def bench_problem(bench: object) -> str | None:
    """What bench.json lacks of what the table reads; None when nothing."""
    if problem := missing_key(bench, BENCH_KEYS):
        return problem
    if not isinstance(bench["rows"], list):
        return "'rows' is not a list"
    for i, row in enumerate(bench["rows"]):
        if problem := missing_key(row, ROW_KEYS):
            return f"rows[{i}] {problem}"
    return None


def peer_summary(log: Path) -> dict[str, Any]:
    """The summary train_bench.sh prints last (a JSON object with steady_tok_s, peak_rss_MiB)."""
    if not log.is_file():
        refuse(f"{log}: missing; scripts/cpu_sitting.sh writes it (the peer's run)")
    for line in reversed(log.read_text().splitlines()):
        if line.startswith("{") and "steady_tok_s" in line:
            try:
                summary = json.loads(line)
            except json.JSONDecodeError as e:
                refuse(f"{log}: its summary line is not JSON ({e}); rerun the peer")
            if problem := missing_key(summary, PEER_KEYS):
                refuse(f"{log}: its summary line has {problem}; rerun the peer")
            if summary["steady_tok_s"] is None:
                refuse(
                    f"{log}: no steady rate (one report of tok/s); run the peer for more steps "
                    "(PEER_STEPS=60 in scripts/cpu_sitting.sh)"
                )
            rate = summary["steady_tok_s"]
            if isinstance(rate, bool) or not isinstance(rate, int | float) or rate <= 0:
                refuse(f"{log}: steady_tok_s is {rate!r}, not a positive rate; rerun the peer")
            return summary
    refuse(f"{log}: no summary line with steady_tok_s; did the peer's run finish?")


def sitting_table(bench: dict[str, Any], peers: list[dict[str, Any]]) -> str:
    """Markdown: a header naming host, date and commands, then one row per (precision, method)."""
    peer = statistics.mean(p["steady_tok_s"] for p in peers)
    lines = [
        f"{bench['date']}; {bench['host']}",
        f"rpr-nmt: `{bench['command']}`",
        f"OpenNMT-py 3.5.1 (fp32, Shaw k 16): steady "
        f"{', '.join(format(p['steady_tok_s'], ',.0f') for p in peers)} tok/s (before, after), "
        f"mean {peer:,.0f}",
        "",
        "| precision | method | src+tgt tok/s | share of the per-round ceiling "
        "| time / sinusoid (range) | x OpenNMT-py | peak memory |",
        "|---|---|---|---|---|---|---|",
    ]
    for when, p in zip(("before", "after"), peers):
        lines.append(
            f"| fp32 | OpenNMT-py 3.5.1, Shaw k 16 ({when}) | {p['steady_tok_s']:,.0f} | | | "
            f"{p['steady_tok_s'] / peer:.2f} | {p['peak_rss_MiB']:,.0f} MiB |"
        )
    for row in bench["rows"]:
        low, high = row["time_ratio_range"]
        memory, share = row.get("peak_memory_mib"), row.get("ceiling_share")
        arithmetic = row.get("arithmetic", 1)  # recorded since train.arithmetic (2026-11-28)
        label = row["label"] + ("" if arithmetic == 1 else f", arithmetic {arithmetic}")
        lines.append(
            f"| {row['precision']} | {label} | {row['tokens_per_sec']:,.0f} | "
            f"{'' if share is None else format(share, '.0%')} | "
            f"{row['time_ratio_to_sinusoid']:.3f} ({low:.3f}-{high:.3f}) | "
            f"{row['tokens_per_sec'] / peer:.2f} | "
            f"{'' if memory is None else format(memory, ',.0f') + ' MiB'} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sitting", type=Path, help="the folder scripts/cpu_sitting.sh wrote")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    bench_path = args.sitting / "bench.json"
    if not bench_path.is_file():
        refuse(f"{bench_path}: missing; scripts/cpu_sitting.sh writes it (bench_train)")
    try:
        bench = json.loads(bench_path.read_text())
    except json.JSONDecodeError as e:
        refuse(f"{bench_path}: not JSON ({e}); rerun scripts/bench_train.py")
    if problem := bench_problem(bench):
        refuse(f"{bench_path}: {problem}; rerun scripts/bench_train.py --json")
    table = sitting_table(bench, [peer_summary(args.sitting / name) for name in PEER_LOGS])
    print(table, end="")
    if args.out:
        args.out.write_text(table)


if __name__ == "__main__":
    main()
