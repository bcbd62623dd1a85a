"""A run that fails in a sweep does not end the sweep: the other runs train on, and the command
names the failed runs at its end.

A run of `rpr-nmt-train -m ...` that is refused (bad data, an incompatible checkpoint, a setting
only its data can refute: status 2) or diverges (status 3) prints its one line as a single run
does, then records it in the command's failure folder, <sweep dir>/.failed-<pid>/, and returns.
Exiting instead ended the sweep there: the basic launcher started none of the runs after it, and
joblib killed the run training beside it mid-update (loky ends every worker when a job raises
SystemExit). When the launcher is done, the command lists the failed runs and exits with status 2
(3 when every failure was a divergence); rerunning it retries them and skips the finished ones.
A sweep that is also stopping (rpr_nmt.cli.sweep_stop) lists them and leaves the exit to the stop.

The folder is the command's own, as the stop file is: two commands sharing a sweep folder report
only their own runs. The runs learn its path from FAILURES_ENV, set before any run starts; the
callback is registered in configs/hydra/train.yaml after StopSweepOnSignal, so that its end comes
first (Hydra calls the end hooks in reverse order).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from rpr_nmt.cli.sweep_stop import run_stop_file

FAILURES_ENV = "RPR_NMT_SWEEP_FAILURES"
REFUSED_STATUS = 2


def failures_folder(sweep_dir: str | Path, pid: int) -> Path:
    """Where the runs that the command with process id `pid` launches record their failures."""
    return Path(sweep_dir) / f".failed-{pid}"


def end_failed_run(run_dir: str, job_num: int | None, status: int, line: str) -> None:
    """Print a failed run's one line; in a sweep (`job_num`: its job number) with a failure folder
    record it and return, else exit with `status`."""
    print(line, file=sys.stderr)
    folder = os.environ.get(FAILURES_ENV)
    if job_num is None or not folder:  # a single run, or a sweep without ReportFailedRuns
        sys.exit(status)
    record = {"run_dir": str(run_dir), "status": status, "line": line}
    path = Path(folder) / f"{job_num}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".tmp").write_text(json.dumps(record) + "\n", encoding="utf-8")
    path.with_suffix(".tmp").replace(path)


def read_failures(folder: Path) -> list[dict[str, Any]]:
    """The failures recorded in `folder`, in job order."""
    paths = sorted(folder.glob("*.json"), key=lambda p: int(p.stem)) if folder.is_dir() else []
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


class ReportFailedRuns(Callback):
    """In the launching process: gives the runs the command's failure folder, and at the end of
    the sweep names the failed runs and exits with their status."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self._previous_env: str | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.folder = failures_folder(config.hydra.sweep.dir, os.getpid())
        shutil.rmtree(self.folder, ignore_errors=True)  # left by a killed command with this pid
        self._previous_env = os.environ.get(FAILURES_ENV)
        os.environ[FAILURES_ENV] = str(self.folder.resolve())  # before any run or worker starts

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self._previous_env is None:
            os.environ.pop(FAILURES_ENV, None)
        else:
            os.environ[FAILURES_ENV] = self._previous_env
        if self.folder is None:
            return
        failures = read_failures(self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)
        if not failures:
            return
        runs = "run" if len(failures) == 1 else "runs"
        print(
            f"rpr-nmt-train: {len(failures)} {runs} of the sweep failed, the others ran; "
            "mend and rerun the command to retry them:",
            file=sys.stderr,
        )
        for failure in failures:
            line = failure["line"].removeprefix("rpr-nmt-train: ")
            print(f"  {failure['run_dir']}: {line}", file=sys.stderr)
        stop = run_stop_file()
        if stop is not None and stop.exists():  # stopping too: StopSweepOnSignal ends with 130
            return
        statuses = {failure["status"] for failure in failures}
        sys.exit(REFUSED_STATUS if REFUSED_STATUS in statuses else max(statuses))
