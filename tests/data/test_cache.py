"""Temporary files of the caches: named after their writer, removed only once it is gone, and
installed with the mode of the umask."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rpr_nmt.data import prepare_data
from rpr_nmt.data.cache import (
    STALE_AFTER_SECONDS,
    atomic_write,
    install_folder,
    owned_temporary,
    owned_temporary_folder,
    remove_stale_temporaries,
)
from rpr_nmt.train.monitor import write_summary


def dead_pid() -> int:
    """The process id of a process that has exited."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


def test_only_temporaries_of_gone_writers_are_removed(tmp_path):
    host = socket.gethostname()
    dead = tmp_path / f".a.npz.owner={host}={dead_pid()}=x1.tmp"
    live = tmp_path / f".b.npz.owner={host}={os.getpid()}=x2.tmp"
    other_host_recent = tmp_path / f".c.npz.owner=elsewhere={os.getpid()}=x3.tmp"
    unowned_old = tmp_path / "d.npz8f2k.tmp"  # written by an older version
    unowned_recent = tmp_path / "e.npz8f2k.tmp"
    keep = tmp_path / "f.npz"
    for path in (dead, live, other_host_recent, unowned_old, unowned_recent, keep):
        path.write_bytes(b"x")
    old = time.time() - STALE_AFTER_SECONDS - 60
    os.utime(unowned_old, (old, old))
    removed = remove_stale_temporaries(tmp_path)
    assert sorted(removed) == sorted([dead, unowned_old])
    assert (
        live.exists() and other_host_recent.exists() and unowned_recent.exists() and keep.exists()
    )
    assert remove_stale_temporaries(tmp_path / "missing") == []


def test_atomic_writes_name_their_writer_and_leave_nothing_behind(tmp_path):
    fd, name = owned_temporary(tmp_path / "x.bin")
    os.close(fd)
    assert f"owner={socket.gethostname()}={os.getpid()}=" in name and name.endswith(".tmp")
    os.unlink(name)
    atomic_write(tmp_path / "y.bin", b"data")
    assert [p.name for p in tmp_path.iterdir()] == ["y.bin"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_installed_files_and_folders_get_the_mode_of_the_umask(tmp_path, umask):
    # Probe: train_summary.json and the cached BPE model were 0600 (mkstemp's mode) where every
    # other file was 0644, and a teammate sharing RPR_NMT_CACHE or a run folder could not read them.
    previous = os.umask(umask)
    try:
        atomic_write(tmp_path / "bpe" / "tiny-v0.model", b"model")
        write_summary(tmp_path / "train_summary.json", {"steps": 1})
        install_folder(owned_temporary_folder(tmp_path / "corpus"), tmp_path / "corpus")
    finally:
        os.umask(previous)
    for name in ("bpe/tiny-v0.model", "train_summary.json"):
        assert _mode(tmp_path / name) == 0o666 & ~umask, name
    assert _mode(tmp_path / "corpus") == 0o777 & ~umask


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_installed_folder_that_lost_a_file_is_removed(tmp_path):
    def installed(name: str) -> Path:
        tmp = owned_temporary_folder(tmp_path / name)
        for file in ("src.npy", "cleaning.json"):
            (tmp / file).write_bytes(b"x")
        install_folder(tmp, tmp_path / name)
        return tmp_path / name

    damaged, complete = installed("damaged"), installed("complete")
    (damaged / "cleaning.json").unlink()
    older = tmp_path / "older"  # installed before folders listed their files: nothing to compare
    older.mkdir()
    assert remove_stale_temporaries(tmp_path) == [damaged]
    assert not damaged.exists() and complete.is_dir() and older.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["complete", "older"]  # nothing aside
    assert remove_stale_temporaries(tmp_path) == []


def test_a_damaged_encoded_entry_is_built_again(make_cfg, tiny_corpus):
    # A file deleted by hand from an installed cache entry: "cannot use .../cleaning.json: No
    # such file or directory: give another data.cache_dir" before; now the entry is rebuilt.
    cfg = make_cfg()
    first = prepare_data(cfg, splits=["train"], log=lambda _: None)
    (folder,) = [p for p in (tiny_corpus.parent / "cache" / "encoded").iterdir() if p.is_dir()]
    (folder / "cleaning.json").unlink()
    lines: list[str] = []
    again = prepare_data(cfg, splits=["train"], log=lines.append)
    assert again.reused["train"] is False and (folder / "cleaning.json").is_file()
    assert any(f"removed {folder}, an installed entry that lost a file" in line for line in lines)
    assert again.cleaning == first.cleaning
    assert np.array_equal(again.splits["train"].src.flat, first.splits["train"].src.flat)
