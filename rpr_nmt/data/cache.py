"""On-disk caches keyed by content hashes: atomic writes and key construction."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

CACHE_VERSION = 1  # bump when the cached formats or the cleaning rules change


def hash_key(*parts: Any) -> str:
    """sha256 of the reprs of parts (and the cache version): a cache key."""
    return hashlib.sha256(repr((CACHE_VERSION, *parts)).encode()).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Write bytes to path through a temporary file in the same folder and a rename.

    A crash mid-write leaves no half-written cache entry behind, and concurrent writers of the same
    key (ranks of one job) each install a complete file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
