"""Encoded corpora: BPE ids of aligned sentence pairs in flat arrays, cached as .npy folders.

A cached corpus is a folder of four 1-D .npy files: src.npy and tgt.npy (int32 ids of all rows,
concatenated) and src_offsets.npy and tgt_offsets.npy (int64 row boundaries, n + 1 values). They are
written as the encoding goes (CorpusWriter) and read memory-mapped (EncodedCorpus.load), so a
process's memory does not grow with the corpus and the processes of one machine share the pages.
"""

from __future__ import annotations

import io
import itertools
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

import numpy as np

from rpr_nmt.data.cache import install_folder, owned_temporary_folder
from rpr_nmt.data.tokenizer import Tokenizer

ID_DTYPE = np.int32  # vocabularies stay far below 2**31
OFFSET_DTYPE = np.int64  # WMT14 En-Fr has more than 2**31 tokens per side
ARRAYS = ("src", "src_offsets", "tgt", "tgt_offsets")  # the files of a corpus folder, + ".npy"


class Ragged(Sequence[np.ndarray]):
    """Variable-length rows in one flat array plus offsets: row i is flat[offsets[i]:offsets[i+1]].

    Args:
        flat: all rows concatenated, shape (total,).
        offsets: row boundaries, shape (n + 1,), offsets[0] = 0.
    """

    def __init__(self, flat: np.ndarray, offsets: np.ndarray) -> None:
        self.flat = flat
        self.offsets = offsets

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]]) -> Ragged:
        flat, lengths = flatten(rows)
        offsets = np.zeros(len(rows) + 1, dtype=OFFSET_DTYPE)
        np.cumsum(lengths, out=offsets[1:])
        return cls(flat, offsets)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def nbytes(self) -> int:
        """Bytes held by the two arrays."""
        return self.flat.nbytes + self.offsets.nbytes

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:  # type: ignore[override]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        return self.flat[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for a, b in zip(self.offsets[:-1], self.offsets[1:]):
            yield self.flat[a:b]

    def select(self, index: np.ndarray) -> Ragged:
        """The rows at `index` (int indices or a boolean mask), in that order."""
        index = np.flatnonzero(index) if index.dtype == bool else np.asarray(index)
        starts, lengths = self.offsets[index], self.lengths[index]
        offsets = np.zeros(len(index) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # Position p of the output comes from starts[row(p)] + (p - offsets[row(p)]).
        rows = np.repeat(np.arange(len(index)), lengths)
        gather = starts[rows] + np.arange(int(offsets[-1])) - offsets[rows]
        return Ragged(self.flat[gather], offsets)


class EncodedCorpus:
    """Aligned BPE-encoded sentence pairs (ids only: no BOS or EOS).

    Args:
        src: source rows.
        tgt: target rows, as many as src.
    """

    def __init__(self, src: Ragged, tgt: Ragged) -> None:
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} source rows but {len(tgt)} target rows")
        self.src = src
        self.tgt = tgt

    @classmethod
    def encode(
        cls,
        tokenizer: Tokenizer,
        src: Sequence[str],
        tgt: Sequence[str],
        num_threads: int | None = None,
    ) -> EncodedCorpus:
        """Encode aligned lines with the tokenizer (batched, on num_threads threads)."""
        return cls(
            Ragged.from_lists(tokenizer.encode_batch(src, num_threads)),
            Ragged.from_lists(tokenizer.encode_batch(tgt, num_threads)),
        )

    @property
    def src_lengths(self) -> np.ndarray:
        return self.src.lengths

    @property
    def tgt_lengths(self) -> np.ndarray:
        return self.tgt.lengths

    def __len__(self) -> int:
        return len(self.src)

    def select(self, index: np.ndarray) -> EncodedCorpus:
        """The pairs at `index` (int indices or a boolean mask)."""
        return EncodedCorpus(self.src.select(index), self.tgt.select(index))

    def save(self, folder: str | Path) -> None:
        """Write the four arrays into `folder` (a temporary folder renamed into place)."""
        target = Path(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = owned_temporary_folder(target)
        arrays = (self.src.flat, self.src.offsets, self.tgt.flat, self.tgt.offsets)
        for name, array in zip(ARRAYS, arrays):
            np.save(tmp / f"{name}.npy", np.asarray(array))
        install_folder(tmp, target)

    @classmethod
    def load(cls, folder: str | Path) -> EncodedCorpus:
        """Open a corpus folder (written by save() or CorpusWriter) memory-mapped, read-only."""
        src, src_offsets, tgt, tgt_offsets = (_open(Path(folder) / f"{n}.npy") for n in ARRAYS)
        return cls(Ragged(src, src_offsets), Ragged(tgt, tgt_offsets))


def _open(path: Path) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r")
    except ValueError:  # an empty array cannot be memory-mapped
        return np.load(path)


def flatten(rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(flat ID_DTYPE ids, int64 lengths) of rows such as sentencepiece's lists of ids."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    flat = np.fromiter(
        itertools.chain.from_iterable(rows), dtype=ID_DTYPE, count=int(lengths.sum())
    )
    return flat, lengths


class NpyAppender:
    """A 1-D .npy file written as it grows.

    The file starts with a header of HEADER_BYTES placeholder bytes; close() writes the real header,
    with the final length, over it. numpy pads its version-1.0 header to 128 bytes for any 1-D shape
    below 10^30, so the data never moves.

    Args:
        path: the file to create.
        dtype: the element type.
    """

    HEADER_BYTES = 128

    def __init__(self, path: Path, dtype: np.dtype | type) -> None:
        self.path, self.dtype, self.length = path, np.dtype(dtype), 0
        self._file = open(path, "wb")  # noqa: SIM115 - closed in close()
        self._file.write(b"\0" * self.HEADER_BYTES)

    def append(self, values: np.ndarray) -> None:
        """Append values (converted to the file's dtype)."""
        array = np.ascontiguousarray(values, dtype=self.dtype)
        self._file.write(array.data)
        self.length += len(array)

    def abort(self) -> None:
        """Close the file without finishing it."""
        self._file.close()

    def close(self) -> None:
        """Write the header with the final length and close the file."""
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                  "shape": (self.length,)}  # fmt: skip
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, header)
        data = buf.getvalue()
        if len(data) != self.HEADER_BYTES:
            raise RuntimeError(f"{self.path}: .npy header of {len(data)} bytes, expected 128")
        self._file.seek(0)
        self._file.write(data)
        self._file.close()


class CorpusWriter:
    """Writes encoded pairs chunk by chunk into a corpus folder, installed as a whole at the end.

    The arrays grow in a temporary folder next to `folder` (named by its writer, see
    rpr_nmt.data.cache); close() renames it to `folder`. Leaving the `with` block by an exception
    removes the temporary folder.

    Args:
        folder: the corpus folder to create.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = owned_temporary_folder(folder)
        self._files = {n: NpyAppender(self.tmp / f"{n}.npy", _dtype(n)) for n in ARRAYS}
        self.pairs, self.src_tokens, self.tgt_tokens = 0, 0, 0
        for name in ("src_offsets", "tgt_offsets"):
            self._files[name].append(np.zeros(1))

    def __enter__(self) -> CorpusWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is not None:
            for f in self._files.values():
                f.abort()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def append(
        self, src: tuple[np.ndarray, np.ndarray], tgt: tuple[np.ndarray, np.ndarray]
    ) -> None:
        """Append pairs given as (flat ids, lengths) of each side."""
        for side, (flat, lengths) in (("src", src), ("tgt", tgt)):
            end = self.src_tokens if side == "src" else self.tgt_tokens
            self._files[side].append(flat)
            self._files[f"{side}_offsets"].append(end + np.cumsum(lengths))
        self.pairs += len(src[1])
        self.src_tokens += len(src[0])
        self.tgt_tokens += len(tgt[0])

    def extra_file(self, name: str) -> Path:
        """A path inside the folder being written, for files that belong to the entry."""
        return self.tmp / name

    def close(self) -> None:
        """Finish the arrays and rename the folder into place."""
        for f in self._files.values():
            f.close()
        install_folder(self.tmp, self.folder)


def _dtype(name: str) -> type:
    return OFFSET_DTYPE if name.endswith("offsets") else ID_DTYPE
