"""What code and arithmetic trained a run: one record per session, and the run's whole history.

A study reuses runs trained by earlier commits beside new ones (results/claims.md compares them
seed pair by seed pair), which is sound only while the code trains every setting to the same
numbers. An arithmetic names that: a change that makes some setting train to other numbers adds
one (tests/train/test_published_settings_unchanged.py is the test that notices), the code keeps
the older ones trainable (train.arithmetic, rpr_nmt/model/arithmetic.py), and every run records
the value it trained with. A report refuses a folder whose runs mix values
(rpr_nmt.report.runs), so that a rounding change cannot slip into a comparison unseen.

Each session of a run (the first, then each resume) appends one line to the run folder's
sessions.jsonl: the update it started at, the precision it trained in, the code's arithmetic and
its git commit. train_summary.json carries the list, so a run resumed in another precision or
by other code says so.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

# train.arithmetic's default; runs from before the record existed read as 1 (every published run
# trained bit-identically to the code that first had it).
ARITHMETIC = 1
SESSIONS_FILE = "sessions.jsonl"
_PACKAGE = Path(__file__).resolve().parents[1]


@cache
def code_record(arithmetic: int = ARITHMETIC) -> dict[str, Any]:
    """{"arithmetic": the arithmetic trained with (train.arithmetic, 1 in fp32), "commit": the
    checkout's HEAD or None outside git, "modified": whether rpr_nmt/ or configs/ differ from it
    (None outside git)}."""
    root = _PACKAGE.parent
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain", "--", "rpr_nmt", "configs") if commit else None
    return {
        "arithmetic": arithmetic,
        "commit": commit,
        "modified": None if commit is None else bool(status),
    }


def _git(root: Path, *args: str) -> str | None:
    """git's output in `root`, stripped; None where git, or a checkout at `root`, is missing."""
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def record_session(run_dir: Path, step: int, precision: str, arithmetic: int = ARITHMETIC) -> None:
    """Append this session's line to `run_dir`/sessions.jsonl: where it starts, in what precision
    and arithmetic, with what code."""
    line = {"start_step": step, "precision": precision, **code_record(arithmetic)}
    with (Path(run_dir) / SESSIONS_FILE).open("a") as f:
        f.write(json.dumps(line) + "\n")


def read_sessions(run_dir: Path) -> list[dict[str, Any]]:
    """The sessions record_session wrote, oldest first; [] when the run has none (a run from
    before the record); unreadable lines are skipped (a session killed mid-write)."""
    path = Path(run_dir) / SESSIONS_FILE
    if not path.is_file():
        return []
    sessions = []
    for text in path.read_text().splitlines():
        try:
            sessions.append(json.loads(text))
        except json.JSONDecodeError:
            continue
    return sessions


def arithmetic_of(summary: dict[str, Any]) -> tuple[int, ...]:
    """The arithmetic a run trained with, from its train_summary.json: every value among its
    sessions, sorted ((1,) for runs from before the record; two values for a run resumed by code
    that trains differently)."""
    sessions = summary.get("sessions") or [summary.get("code") or {}]
    return tuple(sorted({int(s.get("arithmetic", 1)) for s in sessions}))
