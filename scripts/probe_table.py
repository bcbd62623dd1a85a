"""The position probe of several inspected runs as one table: held-out R^2 by layer, per method.

    python scripts/probe_table.py INSPECT_DIR [INSPECT_DIR ...] [--json PATH]

Reads each folder's inspect.json (written by rpr-nmt-inspect, whose position probe is
rpr_nmt/inspection/probe.py), names its setting as the reports do (rpr_nmt.report.labels) and
prints one Markdown row per setting and stack, in the reports' order: the mean over its runs
(seeds) of the held-out R^2 of the token-alone baseline and of each layer (0 = the embedding
output), with the runs' range where there are several. --json PATH writes every run's
figures, with its checkpoint and step.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, NoReturn

from rpr_nmt.inspection.statistics import STACKS
from rpr_nmt.report.labels import method_label
from rpr_nmt.report.sweep import row_order

RUN_KEYS = ("checkpoint", "step", "sentences", "split")
PROBE_KEYS = ("stack", "r2", "baseline_r2")


def refuse(message: str) -> NoReturn:
    """One line on stderr, exit 2: an input folder is not what the table needs."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def read_run(folder: Path) -> dict[str, Any]:
    """One inspected run: its setting's label, provenance and the probe of each stack."""
    path = folder / "inspect.json"
    try:
        numbers = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        refuse(f"{path}: not an rpr-nmt-inspect output ({e}); run rpr-nmt-inspect first")
    if not isinstance(numbers, dict) or not numbers.get("position_probe"):
        refuse(f"{path}: no position probe (written before it, or from one sentence)")
    probes = numbers["position_probe"]
    for key in RUN_KEYS:
        if key not in numbers:
            refuse(f"{path}: no {key!r}; run rpr-nmt-inspect again")
    for i, probe in enumerate(probes if isinstance(probes, list) else [None]):
        if not isinstance(probe, dict) or any(key not in probe for key in PROBE_KEYS):
            refuse(f"{path}: position_probe[{i}] lacks one of {', '.join(PROBE_KEYS)}")
    for stack in STACKS:
        if not any(probe["stack"] == stack for probe in probes):
            refuse(f"{path}: no {stack} probe in position_probe; run rpr-nmt-inspect again")
    label = method_label(numbers)
    return {
        "setting": label,
        "order": row_order(numbers, label),
        "checkpoint": numbers["checkpoint"],
        "step": numbers["step"],
        "sentences": numbers["sentences"],
        "split": numbers["split"],
        "probe": numbers["position_probe"],
    }


def cell(values: list[float]) -> str:
    """The mean, and the range over runs when there are several."""
    mean = f"{statistics.fmean(values):.2f}"
    return mean if len(values) == 1 else f"{mean} ({min(values):.2f} to {max(values):.2f})"


def table(runs: list[dict[str, Any]]) -> str:
    """One row per setting and stack, settings in the reports' order (rpr_nmt.report.sweep)."""
    by_setting: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in sorted(runs, key=lambda run: run["order"]):
        by_setting[run["setting"]].append(run)
    layers = max(len(p["r2"]) for run in runs for p in run["probe"])
    header = ["setting", "stack", "runs", "token alone", *(f"layer {i}" for i in range(layers))]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for stack in STACKS:
        for setting, of_setting in by_setting.items():
            probes = [p for run in of_setting for p in run["probe"] if p["stack"] == stack]
            if len({len(p["r2"]) for p in probes}) > 1:
                runs_of = ", ".join(run["checkpoint"] for run in of_setting)
                refuse(f"{setting}: its runs ({runs_of}) differ in {stack} layers; table apart")
            row = [setting, stack, str(len(probes)), cell([p["baseline_r2"] for p in probes])]
            row += [cell([p["r2"][i] for p in probes]) for i in range(len(probes[0]["r2"]))]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="rpr-nmt-inspect output folders")
    parser.add_argument("--json", type=Path, default=None, help="write every run's figures here")
    args = parser.parse_args()
    runs = [read_run(folder) for folder in args.folders]
    print(table(runs))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        figures = [{key: v for key, v in run.items() if key != "order"} for run in runs]
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
