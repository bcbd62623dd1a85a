"""The tuning runs of a recipe as one Markdown table, best validation BLEU first.

    .venv/bin/python scripts/tuning_table.py SWEEP [SWEEP ...] [--out FILE]

A tuning run (experiment=tune_news, or any run with train.evaluate_test=false) changes one or a
few settings of a recipe and is judged on the validation split alone. Each run folder under the
given sweep folders (or a run folder itself; or a copy collected by rpr-nmt-report --collect)
gives one row: its overrides less those every row
shares, updates, training minutes and threads, source + target tokens per second, the best
validation loss, peak resident memory with the C allocator that served it (and oneDNN's primitive
cache capacity, in the order of the sessions, where they recorded it), and the final
validation BLEU (sacrebleu 13a; with the decoding of
train_summary.json, beam 4 by default) beside its tokenised, compound-split BLEU. An unfinished
run is listed with the update it reached and no BLEU. A run that also scored its test split is
refused: a recipe's tuning table holds no test figure (score the test set once, after the choice).

Exit status 2, with one line naming the folder, when a folder holds no run or a run's summary is
unreadable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from rpr_nmt.config import override_key, placement_keys


class TuningError(Exception):
    """A folder or run that cannot be tabled; the message names it and says what to do."""


def is_run(path: Path) -> bool:
    """A run folder: a trainer's (train.log) or a collected copy (train_summary.json)."""
    return (path / "train.log").is_file() or (path / "train_summary.json").is_file()


def run_folders(paths: list[Path]) -> list[Path]:
    """The run folders of each path: the path itself or its children."""
    found: list[Path] = []
    for path in paths:
        if is_run(path):
            found.append(path)
            continue
        runs = sorted(p for p in path.glob("*") if is_run(p))
        if not runs:
            raise TuningError(f"{path}: no run folder (one with a train.log) in it")
        found.extend(runs)
    return found


def overrides(run: Path) -> list[str]:
    """The run's command-line overrides (.hydra/overrides.yaml) less those that do not change it."""
    path = run / ".hydra" / "overrides.yaml"
    try:
        listed = yaml.safe_load(path.read_text()) or []
    except (OSError, yaml.YAMLError) as e:
        raise TuningError(f"{path}: cannot read the run's overrides ({e})") from e
    return [o for o in listed if override_key(o) not in placement_keys()]


def run_row(run: Path) -> dict[str, Any]:
    """One run's figures: from train_summary.json when it finished, else the last update logged."""
    summary_path = run / "train_summary.json"
    row: dict[str, Any] = {"run": run, "overrides": overrides(run)}
    if not summary_path.is_file():
        return {**row, "steps": last_logged_step(run / "train.log"), "finished": False}
    try:
        summary = json.loads(summary_path.read_text())
    except ValueError as e:
        raise TuningError(f"{summary_path}: not JSON ({e}); rerun the run to rewrite it") from e
    if "test_bleu" in summary:
        raise TuningError(
            f"{run}: the run scored its test split; a tuning table holds validation figures "
            "alone (train with train.evaluate_test=false)"
        )
    hosts = [s.get("host", {}) for s in summary.get("sessions", [])]
    threads = {h.get("threads") for h in hosts}
    allocators = {h.get("allocator") for h in hosts}
    caches = [h.get("primitive_cache") for h in hosts]
    return {
        **row,
        "finished": "valid_bleu" in summary,
        "steps": summary.get("steps"),
        "minutes": summary.get("train_seconds", 0.0) / 60,
        "threads": ",".join(str(t) for t in sorted(threads - {None})) or "?",
        "tok_s": summary.get("train_tokens_per_sec"),
        "peak_gib": (summary.get("peak_memory_mb") or 0.0) / 1024,
        "allocator": (",".join(sorted(allocators - {None})) or "?") + cache_label(caches),
        "loss": summary.get("best_valid_loss"),
        "bleu": summary.get("valid_bleu"),
        "tok_bleu": summary.get("valid_tokenized_bleu"),
    }


def cache_label(caches: list[Any]) -> str:
    """ ", cache 128" from the sessions' oneDNN primitive cache capacities ("?" for a session that
    did not record one, before 2026-12-05); "" where none recorded it."""
    if all(c is None for c in caches):
        return ""
    values = dict.fromkeys("?" if c is None else str(c) for c in caches)
    return ", cache " + ",".join(values)


def last_logged_step(log: Path) -> int | None:
    """The update of the last 'step N |' line of a train.log, None before the first."""
    step = None
    for line in log.read_text(errors="replace").splitlines():
        if "] - step " in line:
            step = int(line.split("] - step ", 1)[1].split(" ", 1)[0])
    return step


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table: the settings each row changes, best validation BLEU first."""
    shared = set.intersection(*(set(r["overrides"]) for r in rows)) if rows else set()
    done = [r for r in rows if r["finished"] and r.get("bleu") is not None]
    done.sort(key=lambda r: -r["bleu"])
    rest = [r for r in rows if r not in done]
    lines = [
        f"Shared by every run: {', '.join(sorted(shared)) or 'nothing'}",
        "",
        "| changed | updates | minutes (threads) | tok/s | peak GiB (allocator) "
        "| best valid loss | valid BLEU | valid BLEU tok. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in done + rest:
        changed = ", ".join(o for o in r["overrides"] if o not in shared) or "(the shared recipe)"
        if not r["finished"]:
            lines.append(f"| {changed} | {r['steps'] or 0} (running or stopped) | | | | | | |")
            continue
        lines.append(
            f"| {changed} | {r['steps']:,} | {r['minutes']:.0f} ({r['threads']}) "
            f"| {r['tok_s']:,.0f} | {r['peak_gib']:.1f} ({r['allocator']}) | {r['loss']:.4f} "
            f"| {r['bleu']:.2f} | {r['tok_bleu']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="sweep folders or run folders")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args(argv)
    try:
        text = table([run_row(run) for run in run_folders(args.paths)])
    except TuningError as e:
        print(f"tuning_table: {e}", file=sys.stderr)
        return 2
    print(text, end="")
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
