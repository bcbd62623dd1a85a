"""One trainer per run folder: the lock refuses a second holder by name and dies with its holder."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from rpr_nmt.checkpoint import RunFolderLockedError, run_folder_lock
from rpr_nmt.checkpoint.run_lock import run_folder_in_use

HOLD = (
    "import sys, time\n"
    "from rpr_nmt.checkpoint import run_folder_lock\n"
    "with run_folder_lock(sys.argv[1]):\n"
    "    print('held', flush=True)\n"
    "    time.sleep(600)\n"
)


def test_a_second_holder_is_refused_by_host_and_pid_until_the_first_is_killed(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "run")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(RunFolderLockedError) as refused:
            with run_folder_lock(tmp_path / "run"):
                pass
        message = str(refused.value)
        assert f"host {socket.gethostname()} pid {holder.pid}" in message
        assert str(tmp_path / "run") in message and "\n" not in message
        assert run_folder_in_use(tmp_path / "run") == message  # the probe before Hydra writes
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # no clean-up code runs: the kernel drops the lock
        holder.wait()
    assert run_folder_in_use(tmp_path / "run") == ""
    assert run_folder_in_use(tmp_path / "nowhere") == "" and not (tmp_path / "nowhere").exists()
    with run_folder_lock(tmp_path / "run") as path:
        assert path.read_text() == f"host {socket.gethostname()} pid {os.getpid()}\n"


def test_the_lock_is_released_at_the_end_of_the_block(tmp_path):
    # A sweep runs its jobs one after another in one process; each takes its folder's lock.
    for _ in range(2):
        with run_folder_lock(tmp_path):
            with pytest.raises(RunFolderLockedError):  # a second open file, even in-process
                with run_folder_lock(tmp_path):
                    pass
