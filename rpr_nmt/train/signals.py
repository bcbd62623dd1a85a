"""SIGINT and SIGTERM ask training to stop: the update ends, a checkpoint is saved, the run ends.

A second signal of the same kind restores the default behaviour (a second Ctrl-C interrupts at
once). A signal of the other kind is one more request to stop: SIGTERM after Ctrl-C (a time limit,
docker stop, a preempted SLURM job) still lets the update finish and the checkpoint be written,
instead of losing every update since the last save. The previous handlers come back when the
context exits: multirun jobs share one process.
A stop file shares the request between the jobs of a sweep (rpr_nmt.cli.sweep_stop): its existence
asks to stop as a signal does, and a signal received here creates it.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

log = logging.getLogger("rpr_nmt.train")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Clock = Callable[[], float]  # seconds, monotonic (time.perf_counter); the Trainer's is injectable


class StopRequest(Protocol):
    """Anything whose `requested` turns True when training should stop (StopSignals: SIGTERM);
    the Trainer's is injectable."""

    requested: bool


class StopSignals:
    """Context manager whose `requested` turns True on SIGINT or SIGTERM, or once `stop_file`
    exists (checked at each read: one stat per update)."""

    def __init__(self, stop_file: Path | None = None) -> None:
        self.signalled = False
        self.stop_file = stop_file
        self._previous: dict[int, Any] = {}
        self._received: set[int] = set()  # the kinds seen: only a repeated kind acts at once

    @property
    def requested(self) -> bool:
        return self.signalled or (self.stop_file is not None and self.stop_file.exists())

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # handlers only work there
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if signum in self._received:  # second signal of this kind: give the default back
            signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
            signal.raise_signal(signum)
            return
        self._received.add(signum)
        if self.signalled:  # the other kind: already stopping, the save must still happen
            log.warning("%s received: already stopping, still saving a checkpoint first", name)
            return
        self.signalled = True
        log.warning(
            "%s received: stopping after this update with a checkpoint, or before the first"
            " update without one",
            name,
        )
        if self.stop_file is not None:
            self.stop_file.touch()

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        self._received.clear()
