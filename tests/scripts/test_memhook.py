"""scripts/memhook: a trainer started with it on PYTHONPATH logs its memory; nothing else does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HOOK = Path(__file__).resolve().parents[2] / "scripts" / "memhook"
LINE = re.compile(r"^\d\d:\d\d:\d\d rss \d+ arena \d+ inuse \d+ free \d+ mmap \d+$")


def run_as(tmp_path: Path, name: str) -> list[Path]:
    program = tmp_path / name
    program.write_text("import time\ntime.sleep(1)\n")
    env = dict(os.environ, PYTHONPATH=str(HOOK), MEMHOOK_LOG=str(tmp_path / "mem"))
    subprocess.run([sys.executable, str(program)], env=env, check=True, timeout=60)
    return sorted(tmp_path.glob("mem.*"))


def test_a_trainer_logs_its_memory_each_ten_seconds(tmp_path):
    logs = run_as(tmp_path, "rpr-nmt-train")
    assert len(logs) == 1
    lines = logs[0].read_text().splitlines()
    assert len(lines) == 1 and LINE.match(lines[0]), lines  # the first sample, at once


def test_another_program_is_left_alone(tmp_path):
    assert run_as(tmp_path, "rpr-nmt-evaluate") == []
