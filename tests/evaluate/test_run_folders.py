"""rpr-nmt-evaluate and rpr-nmt-score name their folder after the second they start; a command
started in a second whose folder another one holds gets a folder of its own. Subprocesses on the
tiny checkpoints of tests/evaluate/tiny.py."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from rpr_nmt.cli.config_store import claim_run_dir
from tests.conftest import command_env
from tests.forkrun import run_module


@pytest.mark.parametrize("command,record", [("evaluate", "eval_test.json"),
                                            ("score", "score_test.json")])  # fmt: skip
def test_a_command_never_writes_into_another_commands_folder(tiny_run, tmp_path, command, record):
    # Probe D1: two commands started in the same second shared runs/<command>/<second>/; one's
    # results were lost. Here another command holds the folder of every second this one may
    # start in.
    runs = tmp_path / "runs"
    start = datetime.now()
    others = [runs / command / f"{start + timedelta(seconds=s):%Y-%m-%d_%H-%M-%S}"
              for s in range(300)]  # fmt: skip
    for folder in others:
        folder.mkdir(parents=True)
        (folder / record).write_text('{"other": true}\n')
    env = command_env(RPR_NMT_RUNS=str(runs))
    args = [f"checkpoint={tiny_run['a']}", "decode.beam_size=1", "decode.max_len_b=2"]
    out = run_module(f"rpr_nmt.cli.{command}", args, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert all(json.loads((f / record).read_text()) == {"other": True} for f in others)
    mine = sorted(set((runs / command).iterdir()) - set(others))
    assert len(mine) == 1 and mine[0].name.endswith("_2"), mine
    assert Path(str(mine[0]).removesuffix("_2")) in others  # the second it started in
    assert json.loads((mine[0] / record).read_text())["checkpoint"] == [str(tiny_run["a"])]


def test_claim_run_dir_takes_the_first_free_folder_once(tmp_path):
    base = str(tmp_path / "evaluate" / "2026-11-27_04-17-04")
    Path(base).mkdir(parents=True)
    Path(f"{base}_2").mkdir()
    assert claim_run_dir(base) == f"{base}_3" and Path(f"{base}_3").is_dir()
    assert claim_run_dir(base) == f"{base}_3"  # asked again by this process: the same folder
    fresh = str(tmp_path / "score" / "2026-11-27_04-17-05")
    assert claim_run_dir(fresh) == fresh and Path(fresh).is_dir()
