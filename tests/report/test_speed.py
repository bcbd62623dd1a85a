"""A benchmark sitting's speed and memory in the report's table (rpr_nmt/report/speed.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rpr_nmt.report.runs import Run
from rpr_nmt.report.speed import SPEED_FILE, load_speed
from rpr_nmt.report.sweep import Row, markdown_table

SITTING = {
    "command": "python scripts/bench_train.py --variants absolute rope --json speed.json",
    "date": "2026-11-25 19:30 UTC",
    "host": "host: AVX512 CPU (CPU with AVX512-BF16), 2 threads",
    "rows": [
        {"label": "sinusoid", "precision": "bf16", "tokens_per_sec": 14705.2,
         "time_ratio_to_sinusoid": 1.0, "peak_memory_mib": 1787.3},
        {"label": "RoPE", "precision": "bf16", "tokens_per_sec": 13929.0,
         "time_ratio_to_sinusoid": 1.066, "peak_memory_mib": 1783.1},
    ],
}  # fmt: skip
SINUSOID = {"sinusoidal": True, "max_relative_position": 0}
ROPE = {"absolute_positions": "none", "relative_positions": "rope", "max_relative_position": 0}
LEARNED = {"absolute_positions": "learned", "max_relative_position": 0}


def row(model: dict, tokens_per_sec: float) -> Row:
    summary = {"test_bleu": 30.0, "train_tokens_per_sec": tokens_per_sec}
    run = Run(Path("run"), [], {"model": model}, summary)
    return Row("s", model, [run])


def table_rows(text: str) -> dict[str, list[str]]:
    lines = [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    return {cells[0]: cells for cells in lines}


def test_the_sittings_figures_replace_the_runs_tokens_per_second(tmp_path: Path):
    (tmp_path / SPEED_FILE).write_text(json.dumps(SITTING))
    speed = load_speed(tmp_path)
    text = markdown_table([row(SINUSOID, 111.0), row(ROPE, 222.0), row(LEARNED, 333.0)], speed)
    cells = table_rows(text)
    head = cells["setting"]
    assert "tokens/s" not in head  # the runs' own speed is gone, 111 / 222 / 333 with it
    assert head[-2:] == ["train tok/s bf16 (x sinusoid)", "peak MiB bf16"]
    assert cells["RoPE"][-2:] == ["13,929 (1.07)", "1,783"]
    assert cells["sinusoid"][-2:] == ["14,705 (1.00)", "1,787"]
    assert cells["learned"][-2:] == ["-", "-"]  # not measured in that sitting
    assert "2026-11-25 19:30 UTC" in text and SITTING["command"] in text


def test_a_sitting_without_memory_leaves_the_memory_cell_empty(tmp_path: Path):
    rows = [{**SITTING["rows"][1], "peak_memory_mib": None}]  # bench_train.py --no-memory
    (tmp_path / SPEED_FILE).write_text(json.dumps({**SITTING, "rows": rows}))
    cells = table_rows(markdown_table([row(ROPE, 222.0)], load_speed(tmp_path)))
    assert cells["RoPE"][-2:] == ["13,929 (1.07)", "-"]


def test_without_a_sitting_the_table_keeps_the_runs_tokens_per_second(tmp_path: Path):
    assert load_speed(tmp_path) is None
    cells = table_rows(markdown_table([row(ROPE, 222.0)], None))
    assert "tokens/s" in cells["setting"] and "222" in cells["RoPE"]


@pytest.mark.parametrize(
    "content, named",
    [
        ("{not json", "not JSON"),
        (json.dumps({k: v for k, v in SITTING.items() if k != "host"}), "no host"),
        (json.dumps({**SITTING, "rows": [{"label": "RoPE"}]}), r"rows\[0\] has no precision"),
    ],
)
def test_a_broken_sitting_file_is_named(tmp_path: Path, content: str, named: str):
    (tmp_path / SPEED_FILE).write_text(content)
    with pytest.raises(ValueError, match=named) as err:
        load_speed(tmp_path)
    assert str(tmp_path / SPEED_FILE) in str(err.value)


def test_a_sitting_that_times_two_arithmetics_is_refused(tmp_path: Path):
    """bench_train.py --arithmetic 1 2 writes twins under one label: no table may take either."""
    twin = {**SITTING["rows"][1], "arithmetic": 2, "tokens_per_sec": 15000.0}
    (tmp_path / SPEED_FILE).write_text(json.dumps({**SITTING, "rows": [*SITTING["rows"], twin]}))
    with pytest.raises(ValueError, match=r"speed.json: rows of arithmetic 1 and 2"):
        load_speed(tmp_path)
