"""Lines of local UTF-8 text files (plain or .gz), read a block at a time.

Lines are split on "\\n" only (never str.splitlines, which also splits on form feeds and U+2028 and
would misalign a pair), and one trailing "\\r" is removed; a byte order mark opening the file is
not part of its first line. A corpus of any size is read with memory for one block and the lines
taken from it.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, NoReturn

from rpr_nmt.data.errors import DataError

BLOCK_BYTES = 1 << 24  # bytes read (after decompression) per block: 16 MiB
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark: dropped at the start of a file, never text


class LineReader:
    """The lines of one file, handed out in lists of at most n by take(n).

    Args:
        path: a UTF-8 text file, gzip-compressed when its name ends in .gz.
        block_bytes: bytes read at a time.

    Raises:
        DataError: the file is missing or unreadable, or a line is not valid UTF-8 (the message
            gives the line number and byte offset).
    """

    def __init__(self, path: str | Path, block_bytes: int = BLOCK_BYTES) -> None:
        self.path = Path(path)
        self.block_bytes = block_bytes
        try:
            self._file: BinaryIO = (
                gzip.open(self.path, "rb") if self.path.suffix == ".gz" else open(self.path, "rb")
            )  # type: ignore[assignment]
        except FileNotFoundError as e:
            raise DataError(f"missing file: {self.path}") from e
        except OSError as e:
            raise DataError(f"cannot read {self.path}: {e}") from e
        self._lines: list[str] = []  # decoded lines of the current block
        self._next = 0  # first line of _lines not taken yet
        self._rest = b""  # bytes after the last newline read so far
        self._offset = 0  # file offset of _rest
        self._decoded = 0  # lines decoded before the current block
        self.taken = 0  # lines handed out so far

    def __enter__(self) -> LineReader:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def take(self, n: int) -> list[str]:
        """The next n lines, fewer only at the end of the file."""
        out: list[str] = []
        while len(out) < n:
            if self._next == len(self._lines) and not self._fill():
                break
            stop = min(len(self._lines), self._next + n - len(out))
            out += self._lines[self._next : stop]
            self._next = stop
        self.taken += len(out)
        return out

    def count_all(self) -> int:
        """Lines in the whole file: those taken so far plus the rest, which this reads and drops.

        The rest is counted in its bytes, not decoded: a line-count check over a capped corpus
        reads it whole, and lines past the cap are never used as text.
        """
        n = self.taken + len(self._lines) - self._next
        open_line = bool(self._rest)  # bytes after the last newline: one more line at the end
        while block := self._read():
            n += block.count(b"\n")
            open_line = not block.endswith(b"\n") if b"\n" in block else open_line or bool(block)
        self.taken = n + open_line
        self._lines, self._next, self._rest = [], 0, b""
        return self.taken

    def _read(self) -> bytes:
        try:
            return self._file.read(self.block_bytes)
        except (OSError, EOFError, zlib.error) as e:  # zlib.error: a corrupt .gz (a flipped byte)
            raise DataError(f"cannot read {self.path}: {e}") from e

    def _fill(self) -> bool:
        """Decode the next block's complete lines into _lines; False at the end of the file."""
        while True:
            block = self._read()
            data = self._rest + block
            if not block:  # end of file: what follows the last newline is the last line
                if not data:
                    return False
                cut, self._rest = len(data), b""
                break
            cut = data.rfind(b"\n")
            if cut >= 0:
                self._rest = data[cut + 1 :]
                break
            self._rest = data  # no newline yet: a line longer than a block
        self._decoded += len(self._lines)
        view = memoryview(data)[:cut]
        skip = len(BOM) if self._offset == 0 and bytes(view[: len(BOM)]) == BOM else 0
        self._lines, self._next = self._decode(view[skip:], skip).split("\n"), 0
        if data.find(b"\r", 0, cut) >= 0:  # CRLF line endings
            self._lines = [x[:-1] if x.endswith("\r") else x for x in self._lines]
        self._offset += cut + 1
        return True

    def _decode(self, data: memoryview, skipped: int = 0) -> str:
        """The block's text; `skipped` bytes before `data` were dropped (a BOM)."""
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as e:
            line = self._decoded + bytes(data[: e.start]).count(b"\n") + 1
            byte = self._offset + skipped + e.start
            raise DataError(
                f"{self.path}: invalid UTF-8 on line {line} "
                f"(byte {byte}: {bytes(data[e.start : e.start + 4])!r}); "
                "re-encode the file as UTF-8"
            ) from e


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file, gzip-compressed when its name ends in .gz.

    Args:
        path: the file.

    Returns:
        The lines without their line endings ("\\n" or "\\r\\n").

    Raises:
        DataError: the file is missing or not valid UTF-8 (the message gives the line number).
    """
    with LineReader(path) as reader:
        return reader.take(1 << 62)


def read_aligned(
    src_path: Path, tgt_path: Path, *, split: str, chunk_pairs: int, limit: int | None = None
) -> Iterator[tuple[list[str], list[str]]]:
    """Aligned chunks of two line-aligned files, at most chunk_pairs lines each, up to limit lines.

    The files' full line counts are compared even when limit stops the reading early: a side
    missing one line shifts every pair after it, capped or not.

    Raises:
        DataError: a file is missing or unreadable, or the files differ in line count.
    """
    with LineReader(src_path) as src, LineReader(tgt_path) as tgt:
        while limit is None or src.taken < limit:
            n = chunk_pairs if limit is None else min(chunk_pairs, limit - src.taken)
            s, t = src.take(n), tgt.take(n)
            if len(s) != len(t):
                _misaligned(split, src_path, src.count_all(), tgt_path, tgt.count_all())
            if not s:
                return
            yield s, t
        n_src, n_tgt = src.count_all(), tgt.count_all()  # capped: the lines past limit, counted
        if n_src != n_tgt:
            _misaligned(split, src_path, n_src, tgt_path, n_tgt)


def _misaligned(split: str, src_path: Path, n_src: int, tgt_path: Path, n_tgt: int) -> NoReturn:
    raise DataError(
        f"split '{split}' is not line-aligned: {src_path} has {n_src} lines but {tgt_path} has "
        f"{n_tgt}; fix the files so that line i of one translates line i of the other"
    )
