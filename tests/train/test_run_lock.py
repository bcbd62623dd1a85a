"""Two trainers on one run folder: the second refuses with one line naming the first."""

from __future__ import annotations

import os
import socket

from rpr_nmt.checkpoint import run_folder_lock
from tests.conftest import compose_command

from .conftest import run_train, tiny_overrides


def test_a_second_trainer_on_a_run_folder_refuses(corpus, cache_dir, tmp_path):
    # Issue 31: the same command started twice trained twice into one folder, without a word.
    run_dir = tmp_path / "run"
    args = tiny_overrides(corpus, cache_dir, run_dir, "train.max_steps=1")
    record = run_dir / ".hydra" / "config.yaml"
    record.parent.mkdir(parents=True)
    record.write_text("the running trainer's settings\n")
    with run_folder_lock(run_dir):  # this process is the running trainer
        second = run_train(args)
    assert second.returncode == 2, second.stderr[-3000:]
    assert second.stderr.startswith("rpr-nmt-train: error: ") and second.stderr.count("\n") == 1
    assert f"host {socket.gethostname()} pid {os.getpid()}" in second.stderr
    assert not (run_dir / "checkpoints").exists()
    assert record.read_text() == "the running trainer's settings\n"  # Hydra did not rewrite it
    record.unlink()
    done = run_train([*args, "train.evaluate_at_end=false"])  # the folder is free again
    assert done.returncode == 0, done.stderr[-3000:]
    with run_folder_lock(run_dir):  # and the trainer released it at its end
        pass


def test_torchruns_other_ranks_pass_the_busy_folder_check(tmp_path, monkeypatch):
    # Under torchrun every rank runs the Hydra callback; rank 0's trainer may already hold the lock
    # when rank 1 gets there, and rank 1 must not refuse its own job's folder.
    import pytest

    from rpr_nmt.cli.run_folder import RefuseBusyRunFolder

    run_dir = tmp_path / "run"
    config = compose_command([f"hydra.run.dir={run_dir}"], hydra=True)
    with run_folder_lock(run_dir):
        monkeypatch.setenv("RANK", "1")
        RefuseBusyRunFolder().on_run_start(config)  # returns
        monkeypatch.setenv("RANK", "0")
        with pytest.raises(SystemExit):
            RefuseBusyRunFolder().on_run_start(config)
