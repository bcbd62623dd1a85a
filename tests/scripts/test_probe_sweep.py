"""scripts/probe_sweep.sh: the position probe of every finished run of a sweep, as one table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.export.conftest import tiny_bpe, tiny_checkpoint  # noqa: F401  (fixtures)
from tests.inspection.test_statistics import checkpoint_of

SCRIPT = Path(__file__).parents[2] / "scripts" / "probe_sweep.sh"


def probe_sweep(sweep: Path, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PY": sys.executable, "SENTENCES": "4"}
    return subprocess.run(
        ["bash", str(SCRIPT), str(sweep), str(out)], env=env, capture_output=True, text=True,
        timeout=600, cwd=SCRIPT.parents[1],
    )  # fmt: skip


def test_every_finished_run_is_probed_once_into_one_table(tiny_checkpoint, tmp_path):  # noqa: F811
    sweep, out = tmp_path / "sweep", tmp_path / "probe"
    rope = checkpoint_of(
        tiny_checkpoint, tmp_path, relative_positions="rope", max_relative_position=0
    )
    for name, checkpoint, finished in [
        ("positions=relative", tiny_checkpoint, True),
        ("positions=rope", rope, True),
        ("positions=none", tiny_checkpoint, False),  # still training: no summary yet
        ("collected", None, True),  # copied into results/: no checkpoint
        ("positions=absolute", tiny_checkpoint, "signal"),  # a sweep stopped it: it resumes
    ]:
        (sweep / name / "checkpoints").mkdir(parents=True)
        if checkpoint is not None:
            shutil.copy(checkpoint, sweep / name / "checkpoints" / "last.pt")
        if finished == "signal":
            summary = {"steps": 25, "stopped_by": "signal"}
            (sweep / name / "train_summary.json").write_text(json.dumps(summary, indent=2))
        elif finished:
            (sweep / name / "train_summary.json").write_text("{}")
    done = probe_sweep(sweep, out)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "collected has no checkpoints/last.pt" in done.stderr
    assert "positions=absolute was stopped before its budget" in done.stderr
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "positions=relative", "positions=rope",
    ]  # fmt: skip
    table = (out / "probe.md").read_text()
    assert table.startswith("| setting | stack | runs | token alone | layer 0 |")
    assert {line.split(" | ")[0][2:] for line in table.splitlines()[2:]} == {"Shaw k = 4", "RoPE"}
    runs = json.loads((out / "probe.json").read_text())  # one record per run
    assert sorted(Path(run["checkpoint"]).parts[-3] for run in runs) == [
        "positions=relative", "positions=rope",
    ]  # fmt: skip
    again = probe_sweep(sweep, out)  # resumes: nothing inspected twice
    assert again.returncode == 0 and "== " not in again.stdout
    assert (out / "probe.md").read_text() == table


def test_a_sweep_without_a_probed_run_is_refused(tmp_path):
    (tmp_path / "sweep" / "run").mkdir(parents=True)  # unfinished
    done = probe_sweep(tmp_path / "sweep", tmp_path / "probe")
    assert done.returncode == 2 and "no finished run with a checkpoint" in done.stderr
    done = probe_sweep(tmp_path / "missing", tmp_path / "probe")
    assert done.returncode == 2 and "is not a folder" in done.stderr
    (tmp_path / "file").write_text("")
    done = probe_sweep(tmp_path / "sweep", tmp_path / "file")
    assert done.returncode == 2 and "file is a file, not a folder" in done.stderr


def test_a_refused_sweep_creates_no_output_folder(tmp_path):
    (tmp_path / "sweep" / "run").mkdir(parents=True)  # unfinished
    for sweep in (tmp_path / "sweep", tmp_path / "missing"):
        done = probe_sweep(sweep, tmp_path / "probe")
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert not (tmp_path / "probe").exists()


@pytest.mark.slow  # 7 s of make test
def test_a_damaged_checkpoint_is_left_out_and_the_others_still_make_the_table(
    tiny_checkpoint,  # noqa: F811
    tmp_path,
):
    # One run rpr-nmt-inspect failed on used to end the command: no table for the other runs.
    sweep, out = tmp_path / "sweep", tmp_path / "probe"
    for name in ("a_damaged", "b_fine"):
        (sweep / name / "checkpoints").mkdir(parents=True)
        (sweep / name / "train_summary.json").write_text("{}")
        shutil.copy(tiny_checkpoint, sweep / name / "checkpoints" / "last.pt")
    (sweep / "a_damaged" / "checkpoints" / "last.pt").write_text("cut short")
    done = probe_sweep(sweep, out)
    assert done.returncode == 1
    assert "a_damaged: rpr-nmt-inspect failed" in done.stderr
    assert "| Shaw k = 4 | encoder | 1 |" in (out / "probe.md").read_text()
