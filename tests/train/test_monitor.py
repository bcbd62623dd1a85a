"""The progress bar shows the figures the trainer passes, and the time left under a limit;
metrics.jsonl forgets what a resumed run redoes."""

from __future__ import annotations

import json
import os
import shutil
import threading

import pytest

from rpr_nmt.train.monitor import Monitor, drop_metrics_after


def test_bar_shows_loss_lr_speed_and_time_left(tmp_path):
    monitor = Monitor(tmp_path, enabled=True, start_step=3, max_steps=10)
    try:
        monitor.step(4, {"loss": 2.5, "lr": 1e-3, "tokens_per_sec": 6000.0})
        assert monitor.bar.n == 4
        assert "loss=2.500" in monitor.bar.postfix and "tok_s=6000" in monitor.bar.postfix
        assert "time_left" not in monitor.bar.postfix
        monitor.step(5, {"loss": 2.4, "lr": 1e-3, "tokens_per_sec": 6000.0, "minutes_left": 7.25})
        assert "time_left=7.2min" in monitor.bar.postfix
    finally:
        monitor.close()


def test_under_a_time_limit_the_bar_counts_the_limit(tmp_path):
    # 20 minutes, 5 of them spent by an earlier session: total and ETA follow the limit, not the
    # 100000 updates of max_steps.
    monitor = Monitor(
        tmp_path, enabled=True, start_step=40, max_steps=100000, time_limit_minutes=20,
        run_seconds=300.0,
    )  # fmt: skip
    try:
        assert monitor.bar.total == 1200 and monitor.bar.n == 300
        figures = {"loss": 2.0, "lr": 1e-3, "tokens_per_sec": 1.0, "minutes_left": 14.5}
        monitor.step(41, {**figures, "run_seconds": 330.2})
        assert monitor.bar.n == 330
        assert "step=41" in monitor.bar.postfix and "time_left=14.5min" in monitor.bar.postfix
        monitor.step(42, {**figures, "run_seconds": 5000.0})  # past the limit: the bar is full
        assert monitor.bar.n == 1200
    finally:
        monitor.close()


def test_disabled_monitor_does_nothing(tmp_path):
    monitor = Monitor(tmp_path / "rank1", enabled=False, start_step=0, max_steps=10)
    monitor.step(1, {"loss": 1.0, "lr": 1e-3, "tokens_per_sec": 1.0})
    monitor.close()
    assert not (tmp_path / "rank1").exists()


def test_metrics_after_the_resumed_step_are_dropped(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = [
        {"kind": "train", "step": 1},
        {"kind": "valid", "step": 2},
        {"kind": "train", "step": 3},
    ]
    text = "".join(json.dumps(x) + "\n" for x in lines)
    path.write_text(text)
    drop_metrics_after(path, 3)
    assert path.read_text() == text  # nothing after update 3: untouched
    drop_metrics_after(path, 2)
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [1, 2]
    drop_metrics_after(tmp_path / "none.jsonl", 0)  # no file yet: nothing to do
    assert not (tmp_path / "none.jsonl").exists()


def test_a_run_folder_removed_under_the_monitor_raises_in_the_trainer_alone(tmp_path):
    # The event writer's thread fails when the folder is gone; its OSError comes back in the
    # trainer (which reports it in one line), and the thread's own report is left out.
    seen = []
    hook = threading.excepthook
    threading.excepthook = seen.append
    run = tmp_path / "run"
    run.mkdir()
    try:
        monitor = Monitor(run, enabled=True, start_step=0, max_steps=10)
        shutil.rmtree(run)
        with pytest.raises(OSError) as raised:
            for step in range(1, 200):
                monitor.writer.add_scalar("train/loss", 1.0, step)
                monitor.writer.flush()
        assert os.fsdecode(raised.value.filename).startswith(str(run))
        assert seen == []
        other = threading.Thread(target=lambda: 1 / 0)  # any other thread's error as before
        other.start()
        other.join()
        assert [type(args.exc_value) for args in seen] == [ZeroDivisionError]
        monitor.bar.close()
    finally:
        threading.excepthook = hook
