"""Stopping a sweep without losing work: running runs save, queued runs do not start.

Ctrl-C (SIGINT) or SIGTERM during `rpr-nmt-train -m ...` creates the sweep's stop file,
<sweep dir>/.stop. Every run of the sweep watches it (rpr_nmt.train.signals.StopSignals), whether it
trains in the launching process (the basic launcher), in a joblib worker or in a submitit job: a
running run finishes its update, saves and ends; a run that starts afterwards returns at once. When
the launcher is done, the command exits with status 130; rerunning it resumes every run. A second
signal to the launching process stops it at once, as Python's default does.

The callback below is registered in configs/hydra/train.yaml (`hydra.callbacks`): Hydra calls its
on_multirun_* hooks in the launching process only.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("rpr_nmt.train")

STOP_FILE = ".stop"
STOPPED_STATUS = 130  # the shell's status for a command ended by Ctrl-C


def stop_file(sweep_dir: str | Path) -> Path:
    """The file whose existence stops the sweep in `sweep_dir`."""
    return Path(sweep_dir) / STOP_FILE


class StopSweepOnSignal(Callback):
    """In the launching process: a first SIGINT / SIGTERM creates the stop file instead of
    interrupting the launcher (which would kill its workers mid-update); the end of a stopped
    sweep exits with STOPPED_STATUS."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.signalled = False  # not the file: a run may create it before this handler runs
        self._previous: dict[int, Any] = {}

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.path = stop_file(config.hydra.sweep.dir)
        self.path.unlink(missing_ok=True)  # an earlier stop: this command resumes the sweep
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        assert self.path is not None
        if self.signalled:  # asked before: stop at once
            signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
            signal.raise_signal(signum)
            return
        self.signalled = True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        log.warning(
            "%s received: running runs save and stop, queued runs will not start (again: stop "
            "at once)",
            signal.Signals(signum).name,
        )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self.path is not None and self.path.exists():
            self.path.unlink()
            print(
                f"rpr-nmt-train: sweep stopped, its runs saved; rerun the command to resume "
                f"({config.hydra.sweep.dir})",
                file=sys.stderr,
            )
            sys.exit(STOPPED_STATUS)
