"""On-disk caches keyed by content hashes: atomic writes, their temporary files, key construction.

Every file is written through a temporary file in its own folder and renamed into place; a cache
entry made of several files (an encoded corpus) is written into a temporary folder that is renamed
as a whole. The temporary's name says who writes it (`.NAME.owner=HOST=PID=RANDOM.tmp`), so that a
process starting later can remove what a killed writer left behind without touching a file that a
live process (another job of the same sweep, sharing the cache) is still writing. Temporaries
get the mode open() and mkdir() would give (usual_mode), not mkstemp's private one, so that a
teammate sharing the cache or a run folder can read what is installed.

An installed folder lists its files in ENTRY_MANIFEST. Since folders are installed by rename,
never written in place, one that lacks a listed file was damaged afterwards (a file deleted by
hand), not half-written: remove_stale_temporaries removes it too, so that it is built again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

_OWNED = re.compile(r"\.owner=(?P<host>.+)=(?P<pid>\d+)=[^=/]*\.tmp$")
# Temporary files without an owner (older versions) or of another host count as stale after this.
STALE_AFTER_SECONDS = 6 * 3600

CACHE_VERSION = 1  # bump when the cached formats or the cleaning rules change
ENTRY_MANIFEST = ".entry-files.json"  # in an installed folder: the names of its files


def hash_key(*parts: Any) -> str:
    """sha256 of the reprs of parts (and the cache version): a cache key."""
    return hashlib.sha256(repr((CACHE_VERSION, *parts)).encode()).hexdigest()


def _owned_prefix(target: Path) -> str:
    """`.NAME.owner=HOST=PID=`: the start of the name of a temporary that will become `target`."""
    return f".{target.name}.owner={socket.gethostname()}={os.getpid()}="


def usual_mode(folder: bool = False) -> int:
    """The mode open() (0o666) or mkdir() (0o777) gives a new file or folder under this process's
    umask: mkstemp and mkdtemp create theirs private (0600, 0700), and renamed into place they
    would lock a teammate sharing the cache (RPR_NMT_CACHE) or a run folder out."""
    mask = os.umask(0)  # the umask can only be read by setting it
    os.umask(mask)
    return (0o777 if folder else 0o666) & ~mask


def owned_temporary(target: Path) -> tuple[int, str]:
    """Create the temporary file that will become `target`, with the usual mode (usual_mode):
    (open descriptor, path)."""
    fd, path = tempfile.mkstemp(prefix=_owned_prefix(target), suffix=".tmp", dir=target.parent)
    os.fchmod(fd, usual_mode())
    return fd, path


def owned_temporary_folder(target: Path) -> Path:
    """Create the temporary folder that will become the folder `target`, named like the files,
    with the usual mode (usual_mode)."""
    path = Path(tempfile.mkdtemp(prefix=_owned_prefix(target), suffix=".tmp", dir=target.parent))
    path.chmod(usual_mode(folder=True))
    return path


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def is_stale(path: Path, now: float | None = None) -> bool:
    """Whether a temporary file was left behind by a writer that is gone.

    Files of this host are stale when their writer's process no longer runs; files of other
    hosts, or without an owner in their name, when older than STALE_AFTER_SECONDS.
    """
    match = _OWNED.search(path.name)
    if match and match["host"] == socket.gethostname():
        return not _process_alive(int(match["pid"]))
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
    except FileNotFoundError:  # its writer just renamed it into place
        return False
    return age > STALE_AFTER_SECONDS


def missing_files(entry: Path) -> list[str]:
    """The files of an installed folder (install_folder) that are gone from it: [] when complete,
    or when it has no ENTRY_MANIFEST (installed by an older version: nothing to compare with)."""
    try:
        names = json.loads((entry / ENTRY_MANIFEST).read_text())
    except (OSError, ValueError):
        return []
    return [name for name in names if not (entry / name).is_file()]


def remove_damaged_entry(entry: Path) -> bool:
    """Delete the installed folder `entry` if it lacks a file its ENTRY_MANIFEST lists, so that
    its cache entry is built again.

    The folder is first renamed to a temporary of this process, then checked again: a complete
    folder installed meanwhile by another writer of the same key goes back into place.

    Returns:
        True when a damaged folder was removed.
    """
    if not missing_files(entry):
        return False
    aside = owned_temporary_folder(entry)  # empty: renaming a folder onto it replaces it
    try:
        os.rename(entry, aside)
    except OSError:  # another process moved it away first
        aside.rmdir()
        return False
    if not missing_files(aside):
        install_folder(aside, entry, manifest=False)
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporary files and folders (`*.tmp`) in `folder` whose writers are gone, and
    the installed folders in it that lost a file (remove_damaged_entry).

    Returns:
        The removed paths.
    """
    if not folder.is_dir():
        return []
    removed = [
        entry
        for entry in sorted(folder.iterdir())
        if entry.is_dir()
        and not entry.is_symlink()
        and not entry.name.endswith(".tmp")
        and remove_damaged_entry(entry)
    ]
    for path in folder.glob("*.tmp"):
        if is_stale(path):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def atomic_write(path: Path, data: bytes) -> None:
    """Write bytes to path through a temporary file in the same folder and a rename.

    A crash mid-write leaves no half-written cache entry behind, and concurrent writers of the same
    key (ranks of one job) each install a complete file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = owned_temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install_folder(tmp: Path, target: Path, *, manifest: bool = True) -> bool:
    """Rename the complete temporary folder `tmp` to `target` (atomic on one file system).

    When another writer installed `target` first (a concurrent job with the same key), its folder is
    kept and `tmp` is removed: both hold the same content.

    Args:
        tmp: the folder written (owned_temporary_folder).
        target: where it goes.
        manifest: list the files of `tmp` in ENTRY_MANIFEST first (see missing_files).

    Returns:
        True when this call installed `target`.
    """
    if manifest:
        names = sorted(p.name for p in tmp.iterdir() if p.is_file() and p.name != ENTRY_MANIFEST)
        (tmp / ENTRY_MANIFEST).write_text(json.dumps(names))
    try:
        os.rename(tmp, target)
        return True
    except OSError:
        if not target.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        return False
