"""Stopping a sweep without losing work: running runs save, queued runs do not start.

Ctrl-C (SIGINT) or SIGTERM during `rpr-nmt-train -m ...` creates the command's stop file,
<sweep dir>/.stop-<pid of the launching process>. Every run the command launches watches it
(rpr_nmt.train.signals.StopSignals), whether it trains in the launching process (the basic
launcher), in a joblib worker or in a submitit job: a running run finishes its update, saves and
ends; a run that starts afterwards returns at once. When the launcher is done, the command exits
with status 130; rerunning it resumes every run. The same signal again stops the launching process
at once, as Python's default does; the other kind (SIGTERM after Ctrl-C: docker stop, a time limit)
is one more request to stop, as in a single run (rpr_nmt.train.signals): killing the launcher would
end a container or job step with its workers mid-update.

The file is the command's own, not the sweep folder's: two commands may share one sweep folder
(two lanes of one sweep, each with its own settings), and stopping one must neither stop the other
nor be undone when the other ends. The runs learn its path from the environment variable
STOP_FILE_ENV, set before any run starts; the basic launcher's runs, joblib's workers and
submitit's jobs (sbatch exports the environment by default) all inherit it.

The callback below is registered in configs/hydra/train.yaml (`hydra.callbacks`): Hydra calls its
on_multirun_* hooks in the launching process only.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("rpr_nmt.train")

STOP_FILE_ENV = "RPR_NMT_SWEEP_STOP_FILE"
STOPPED_STATUS = 130  # the shell's status for a command ended by Ctrl-C


def stop_file(sweep_dir: str | Path, pid: int) -> Path:
    """The file whose existence stops the runs that the command with process id `pid` launches
    into `sweep_dir`."""
    return Path(sweep_dir) / f".stop-{pid}"


def run_stop_file() -> Path | None:
    """In a run of a sweep: the stop file of the command that launched it (None when the sweep
    was launched without StopSweepOnSignal, e.g. a config that drops hydra.callbacks)."""
    path = os.environ.get(STOP_FILE_ENV)
    return Path(path) if path else None


class StopSweepOnSignal(Callback):
    """In the launching process: a first SIGINT / SIGTERM creates the stop file instead of
    interrupting the launcher (which would kill its workers mid-update); the end of a stopped
    sweep exits with STOPPED_STATUS."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.signalled = False  # not the file: a run may create it before this handler runs
        self._previous: dict[int, Any] = {}
        self._received: set[int] = set()  # the kinds seen: only a repeated kind acts at once
        self._previous_env: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.path = stop_file(config.hydra.sweep.dir, os.getpid())
        self.path.unlink(missing_ok=True)  # left by a killed command that had this pid
        self._previous_env = os.environ.get(STOP_FILE_ENV)
        os.environ[STOP_FILE_ENV] = str(self.path.resolve())  # before any run or worker starts
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        assert self.path is not None
        name = signal.Signals(signum).name
        if signum in self._received:  # this kind before: stop at once
            signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
            signal.raise_signal(signum)
            return
        self._received.add(signum)
        if self.signalled:  # the other kind: already stopping, the runs must still save
            log.warning("%s received: already stopping, the runs still save first", name)
            return
        self.signalled = True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        log.warning(
            "%s received: running runs save and stop, queued runs will not start (again: stop "
            "at once)",
            name,
        )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        self._received.clear()
        if self._previous_env is None:
            os.environ.pop(STOP_FILE_ENV, None)
        else:
            os.environ[STOP_FILE_ENV] = self._previous_env
        if self.path is not None and self.path.exists():
            self.path.unlink()
            print(
                f"rpr-nmt-train: sweep stopped, its runs saved; rerun the command to resume "
                f"({config.hydra.sweep.dir})",
                file=sys.stderr,
            )
            sys.exit(STOPPED_STATUS)
