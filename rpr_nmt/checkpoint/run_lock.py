"""One trainer per run folder: an OS file lock on RUN_DIR/train.lock, held while a run trains.

The same command started twice (a second terminal, a requeued job) would otherwise train twice
into one folder, interleaving metrics.jsonl and overwriting each other's checkpoints. The lock is
fcntl.flock on an open file: the kernel releases it when its process ends, however it ends
(SIGKILL, out-of-memory kill), so no stale lock is ever left to clear by hand. The file itself
stays; it names the last holder ("host NAME pid N"), which the refusal of a second trainer quotes.

Where flock is unsupported (some network file systems answer ENOLCK or EOPNOTSUPP) the run goes
on unlocked with a warning; docs/training.md ("The run lock") says what holds on network file
systems.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rpr_nmt.checkpoint.state import CheckpointError

log = logging.getLogger("rpr_nmt.checkpoint")

LOCK_FILE = "train.lock"
_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class RunFolderLockedError(CheckpointError):
    """Another process trains in this run folder; the message names its host and PID."""


def _in_use(path: Path, fd: int) -> str:
    """The refusal: the folder, the holder as its lock file names it, what to do."""
    holder = os.pread(fd, 256, 0).decode("utf-8", "replace").strip() or "host and PID not written"
    return (
        f"{path.parent} is in use by another trainer ({holder}, {path}): wait for it to end or "
        "stop it; two trainers in one run folder would mix their metrics and checkpoints"
    )


def run_folder_in_use(run_dir: str | Path) -> str:
    """Why `run_dir` cannot be trained in now (another process holds its lock), else "".

    A probe that takes and drops the lock, creating nothing: for refusing before anything is
    written into the folder (rpr_nmt.cli.run_folder); the trainer still takes the lock itself.
    """
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return ""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return _in_use(path, fd)
    except OSError:  # no locks on this file system: the trainer warns
        return ""
    finally:
        os.close(fd)
    return ""


def _lock(fd: int, path: Path) -> bool:
    """flock the open file without waiting: True once held, False where unsupported.

    Raises:
        RunFolderLockedError: another process holds it.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RunFolderLockedError(_in_use(path, fd)) from None
    except OSError as e:
        if e.errno not in _UNSUPPORTED:
            raise
        log.warning(
            "%s: this file system does not lock files (%s); training without the run-folder "
            "lock: make sure no other trainer uses %s", path, e.strerror, path.parent,
        )  # fmt: skip
        return False
    return True


@contextmanager
def run_folder_lock(run_dir: str | Path) -> Iterator[Path]:
    """Hold RUN_DIR/train.lock for the duration of the block; refuse if another process holds it.

    Args:
        run_dir: the run folder (created if missing).

    Yields:
        The lock file's path.

    Raises:
        RunFolderLockedError: another process holds the lock (one line naming its host and PID).
    """
    path = Path(run_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if _lock(fd, path):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"host {socket.gethostname()} pid {os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
