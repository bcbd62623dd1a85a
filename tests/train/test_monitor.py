"""The progress bar shows the figures the trainer passes, and the time left under a limit."""

from __future__ import annotations

from rpr_nmt.train.monitor import Monitor


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


def test_disabled_monitor_does_nothing(tmp_path):
    monitor = Monitor(tmp_path / "rank1", enabled=False, start_step=0, max_steps=10)
    monitor.step(1, {"loss": 1.0, "lr": 1e-3, "tokens_per_sec": 1.0})
    monitor.close()
    assert not (tmp_path / "rank1").exists()
