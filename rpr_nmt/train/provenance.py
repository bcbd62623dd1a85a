"""What code and arithmetic trained a run: one record per session, and the run's whole history.

A study reuses runs trained by earlier commits beside new ones (results/claims.md compares them
seed pair by seed pair), which is sound only while the code trains every setting to the same
numbers. An arithmetic names that: a change that makes some setting train to other numbers adds
one (tests/train/test_published_settings_unchanged.py is the test that notices), the code keeps
the older ones trainable (train.arithmetic, rpr_nmt/model/arithmetic.py), and every run records
the value it trained with. A report refuses a folder whose runs mix values
(rpr_nmt.report.runs), so that a rounding change cannot slip into a comparison unseen.

Each session of a run (the first, then each resume) appends one line to the run folder's
sessions.jsonl: the update it started at, the precision it trained in, the code's arithmetic, its
git commit and the host it trained on (host_record: the CPU or GPU, its bf16 kind, the threads).
train_summary.json carries the list, so a run resumed in another precision, by other code or on
another host says so, and a report can say which hosts its tokens/s come from.
"""

from __future__ import annotations

import json
import platform
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import torch

from rpr_nmt.precision import cpu_kind
from rpr_nmt.train.primitive_cache import primitive_cache_capacity

# train.arithmetic's default; runs from before the record existed read as 1 (every published run
# trained bit-identically to the code that first had it).
ARITHMETIC = 1
SESSIONS_FILE = "sessions.jsonl"
_PACKAGE = Path(__file__).resolve().parents[1]
UNRECORDED = "not recorded"  # host_label of a session from before the host record (2026-11-28)


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


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform module says, else "CPU"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def host_record(device: torch.device | str = "cpu") -> dict[str, Any]:
    """Where a session trains: {"device": the GPU's name or "cpu", "cpu": the CPU's model name,
    "kind": rpr_nmt.precision.cpu_kind(), "threads": torch's CPU threads, "allocator": the C heap
    allocator (allocator_name), "primitive_cache": oneDNN's primitive cache capacity
    (rpr_nmt.train.primitive_cache)}."""
    device = torch.device(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    threads = torch.get_num_threads()
    return {
        "device": name, "cpu": cpu_name(), "kind": cpu_kind(), "threads": threads,
        "allocator": allocator_name(), "primitive_cache": primitive_cache_capacity(),
    }  # fmt: skip


def allocator_name(maps: Path = Path("/proc/self/maps")) -> str:
    """The C heap allocator serving this process: "jemalloc" or "tcmalloc" when one is loaded
    (LD_PRELOAD), else "system" (glibc's malloc on Linux). A CPU run's resident memory depends on
    it (results/tune_wmt_news_en_de/README.md)."""
    try:
        loaded = maps.read_text()
    except OSError:
        return "system"
    for name in ("jemalloc", "tcmalloc"):
        if f"lib{name}" in loaded:
            return name
    return "system"


def host_label(session: dict[str, Any]) -> str:
    """A session's host in a few words, e.g. "Intel Xeon ... (AVX512-BF16), 1 thread";
    UNRECORDED for sessions from before the record (2026-11-28)."""
    host = session.get("host")
    if not host:
        return UNRECORDED
    threads = host.get("threads")
    plural = "" if threads == 1 else "s"
    cpu = f"{host.get('cpu', 'CPU')} ({host.get('kind', '?')}), {threads} thread{plural}"
    device = host.get("device", "cpu")
    return cpu if device == "cpu" else f"{device}, {cpu}"


def record_session(
    run_dir: Path,
    step: int,
    precision: str,
    arithmetic: int = ARITHMETIC,
    device: torch.device | str = "cpu",
) -> None:
    """Append this session's line to `run_dir`/sessions.jsonl: where it starts, in what precision
    and arithmetic, with what code, on what host."""
    line = {"start_step": step, "precision": precision, **code_record(arithmetic)}
    line["host"] = host_record(device)
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
