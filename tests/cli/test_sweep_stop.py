"""StopSweepOnSignal in the launching process: its stop file is the command's own, its runs find
it through the environment, and the end of the sweep restores what it changed."""

from __future__ import annotations

import os
import signal

import pytest
from omegaconf import OmegaConf

from rpr_nmt.cli.sweep_stop import (
    STOP_FILE_ENV,
    STOPPED_STATUS,
    StopSweepOnSignal,
    run_stop_file,
    stop_file,
)


def sweep_config(sweep_dir):
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}}})


def test_runs_find_their_commands_stop_file_and_the_end_restores_the_environment(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(STOP_FILE_ENV, "/elsewhere/.stop-1")  # e.g. a sweep launching a sweep
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    callback = StopSweepOnSignal()
    callback.on_multirun_start(sweep_config(tmp_path / "sweep"))
    own = stop_file(tmp_path / "sweep", os.getpid())
    assert own.name == f".stop-{os.getpid()}"
    assert run_stop_file() == own.resolve()
    callback.on_multirun_end(sweep_config(tmp_path / "sweep"))  # not stopped: returns
    assert os.environ[STOP_FILE_ENV] == "/elsewhere/.stop-1"
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def test_a_signal_creates_the_commands_stop_file_and_the_end_exits_130(tmp_path, monkeypatch):
    monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    callback = StopSweepOnSignal()
    config = sweep_config(tmp_path / "sweep")
    other = tmp_path / "sweep" / ".stop-999999"  # another command's, in the same folder
    other.parent.mkdir(parents=True)
    other.touch()
    callback.on_multirun_start(config)
    signal.raise_signal(signal.SIGTERM)  # the handler: creates the file, does not exit
    created = run_stop_file().exists()
    with pytest.raises(SystemExit) as ended:  # also gives the signal handlers back
        callback.on_multirun_end(config)
    assert created
    assert ended.value.code == STOPPED_STATUS
    assert not stop_file(tmp_path / "sweep", os.getpid()).exists()
    assert other.exists()  # neither start nor end removes another command's stop
    assert STOP_FILE_ENV not in os.environ


def test_without_the_callback_runs_have_no_stop_file(monkeypatch):
    monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    assert run_stop_file() is None


def test_sigterm_after_ctrl_c_keeps_the_launcher_until_its_runs_save_a_repeat_stops_at_once(
    tmp_path, monkeypatch
):
    # SIGTERM after Ctrl-C (docker stop, a time limit): killing the launcher then would end a
    # container or job step with its joblib workers mid-update. Only a repeated kind acts at once.
    monkeypatch.delenv(STOP_FILE_ENV, raising=False)
    outer: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: outer.append(signum))
    try:
        callback = StopSweepOnSignal()
        config = sweep_config(tmp_path / "sweep")
        callback.on_multirun_start(config)
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGTERM)  # the other kind: still stopping, not at once
        still_running = list(outer)
        signal.raise_signal(signal.SIGTERM)  # the same kind again: the previous handler
        with pytest.raises(SystemExit) as ended:
            callback.on_multirun_end(config)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert still_running == []
    assert outer == [signal.SIGTERM]
    assert ended.value.code == STOPPED_STATUS
