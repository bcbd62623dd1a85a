"""Each method's training speed and memory beside its quality: a benchmark sitting's figures.

A sweep's runs are timed on whatever shared the host while they trained (two runs side by side,
other jobs), so their tokens/s are indicative only. A results folder may hold speed.json, the
figures of one benchmark sitting (scripts/bench_train.py --json: every method on the same batches,
interleaved rounds, each method's peak memory in a process of its own); the report's table then
takes its speed columns from there, matched by the setting's label (rpr_nmt.report.labels), and
names the sitting under the table. Format (one record per method and precision):

    {"command": str, "date": str, "host": str,
     "rows": [{"label": "RoPE", "precision": "bf16", "tokens_per_sec": float,
               "time_ratio_to_sinusoid": float, "peak_memory_mib": float or null, ...}, ...]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SPEED_FILE = "speed.json"
REQUIRED = ("label", "precision", "tokens_per_sec", "time_ratio_to_sinusoid", "peak_memory_mib")

__all__ = ["SPEED_FILE", "Speed", "load_speed"]


@dataclass(frozen=True)
class Speed:
    """One benchmark sitting: where and how it ran, and its figures by (label, precision)."""

    command: str
    date: str
    host: str
    figures: dict[tuple[str, str], dict[str, Any]]

    @property
    def precisions(self) -> list[str]:
        """The precisions measured, in the order the sitting ran them."""
        return list(dict.fromkeys(precision for _, precision in self.figures))

    def headings(self) -> list[str]:
        """The table's speed columns: tokens/s (time ratio to the sinusoid) and peak memory, per
        precision."""
        return [
            heading
            for p in self.precisions
            for heading in (f"train tok/s {p} (x sinusoid)", f"peak MiB {p}")
        ]

    def cells(self, label: str) -> list[str]:
        """A setting's speed cells; '-' where the sitting did not measure it (the method, or its
        memory)."""
        cells = []
        for p in self.precisions:
            found = self.figures.get((label, p))
            if found is None:
                cells += ["-", "-"]
                continue
            tokens, ratio = found["tokens_per_sec"], found["time_ratio_to_sinusoid"]
            peak = found["peak_memory_mib"]  # null: a sitting run with --no-memory
            cells += [f"{tokens:,.0f} ({ratio:.2f})", "-" if peak is None else f"{peak:,.0f}"]
        return cells

    def note(self) -> str:
        """Where the speed columns come from, for under the table."""
        host = self.host.removeprefix("host: ")
        return (
            f"Speed columns: one benchmark sitting ({SPEED_FILE}), not the sweep's runs, whose "
            f"speed depends on what shared the host: {self.date}, {host}; `{self.command}`. "
            "x sinusoid: time per token relative to the sinusoid's.\n"
        )


def load_speed(folder: Path) -> Speed | None:
    """The sitting in `folder`/speed.json; None when the folder has none.

    Raises:
        ValueError: the file is not JSON of the module docstring's format (naming the file and
            what is wrong).
    """
    path = Path(folder) / SPEED_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON ({err}); write it with bench_train.py --json") from err
    missing = [key for key in ("command", "date", "host", "rows") if key not in data]
    if missing:
        raise ValueError(f"{path}: no {', '.join(missing)}; write it with bench_train.py --json")
    figures: dict[tuple[str, str], dict[str, Any]] = {}
    for i, row in enumerate(data["rows"]):
        absent = [key for key in REQUIRED if key not in row]
        if absent:
            raise ValueError(f"{path}: rows[{i}] has no {', '.join(absent)}")
        figures[(row["label"], row["precision"])] = row
    arithmetics = sorted({int(row.get("arithmetic", 1)) for row in data["rows"]})
    if len(arithmetics) > 1:  # twins (bench_train.py --arithmetic 1 2) share their labels
        raise ValueError(
            f"{path}: rows of arithmetic {' and '.join(map(str, arithmetics))}, whose figures "
            "share their labels; write it with one bench_train.py --arithmetic, the runs' own"
        )
    return Speed(data["command"], data["date"], data["host"], figures)
