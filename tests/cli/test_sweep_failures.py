"""ReportFailedRuns in the launching process and end_failed_run in a run: a failed run of a sweep
is recorded in the command's own folder, and the end of the sweep names it and exits with its
status (2 for a refusal, 3 for divergences only), or leaves the exit to a stopping sweep."""

from __future__ import annotations

import os

import pytest
from omegaconf import OmegaConf

from rpr_nmt.cli.sweep_failures import (
    FAILURES_ENV,
    ReportFailedRuns,
    end_failed_run,
    failures_folder,
)
from rpr_nmt.cli.sweep_stop import STOP_FILE_ENV


@pytest.fixture
def sweep(tmp_path, monkeypatch):
    monkeypatch.delenv(FAILURES_ENV, raising=False)
    monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    callback = ReportFailedRuns()
    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}})
    callback.on_multirun_start(config)
    return callback, config


def end_code(callback, config) -> int | None:
    try:
        callback.on_multirun_end(config)
    except SystemExit as ended:
        return ended.code
    return None


def test_a_single_run_exits_with_its_status(monkeypatch, capsys):
    monkeypatch.setenv(FAILURES_ENV, "/nowhere")  # inherited, but this run is not a sweep's job
    with pytest.raises(SystemExit) as ended:
        end_failed_run("runs/train/x", None, 3, "rpr-nmt-train: training diverged: nan")
    assert ended.value.code == 3
    assert capsys.readouterr().err == "rpr-nmt-train: training diverged: nan\n"


def test_failed_runs_are_named_at_the_end_with_the_refusals_status(sweep, tmp_path, capsys):
    callback, config = sweep
    assert os.environ[FAILURES_ENV] == str(failures_folder(tmp_path / "sweep", os.getpid()))
    end_failed_run("sweep/b", 3, 3, "rpr-nmt-train: training diverged: loss nan")  # returns
    end_failed_run("sweep/a", 1, 2, "rpr-nmt-train: error: the training set is empty")
    assert end_code(callback, config) == 2  # a refusal among them
    err = capsys.readouterr().err.splitlines()
    assert err[-3:] == [
        "rpr-nmt-train: 2 runs of the sweep failed, the others ran; mend and rerun the command "
        "to retry them:",
        "  sweep/a: error: the training set is empty",  # in job order
        "  sweep/b: training diverged: loss nan",
    ]
    assert not failures_folder(tmp_path / "sweep", os.getpid()).exists()
    assert FAILURES_ENV not in os.environ


def test_divergences_alone_end_with_3_and_no_failure_ends_quietly(sweep, capsys):
    callback, config = sweep
    end_failed_run("sweep/a", 0, 3, "rpr-nmt-train: training diverged: loss nan")
    assert end_code(callback, config) == 3
    callback.on_multirun_start(config)
    assert end_code(callback, config) is None
    assert "failed" not in capsys.readouterr().err.splitlines()[-1]


def test_a_stopping_sweep_names_its_failures_and_leaves_the_exit_to_the_stop(
    sweep, tmp_path, monkeypatch, capsys
):
    callback, config = sweep
    stop = tmp_path / "sweep" / ".stop-1"
    stop.parent.mkdir()
    stop.touch()
    monkeypatch.setenv(STOP_FILE_ENV, str(stop))
    end_failed_run("sweep/a", 0, 2, "rpr-nmt-train: error: bad data")
    assert end_code(callback, config) is None  # StopSweepOnSignal's end exits 130 after it
    assert "  sweep/a: error: bad data" in capsys.readouterr().err


def test_the_start_clears_a_killed_commands_records_of_the_same_pid(sweep, tmp_path):
    callback, config = sweep
    end_failed_run("sweep/a", 0, 2, "rpr-nmt-train: error: bad data")
    callback.on_multirun_start(config)  # the next command that happens to get this pid
    assert end_code(callback, config) is None
