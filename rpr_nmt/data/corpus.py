"""Encoded corpora: BPE ids of aligned sentence pairs in flat arrays, cached as .npz files."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from rpr_nmt.data.cache import atomic_write
from rpr_nmt.data.tokenizer import Tokenizer

ID_DTYPE = np.int32  # vocabularies stay far below 2**31


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
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.fromiter(
            itertools.chain.from_iterable(rows), dtype=ID_DTYPE, count=int(offsets[-1])
        )
        return cls(flat, offsets)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

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

    def save(self, path: str | Path) -> None:
        """Write an uncompressed .npz (atomically)."""
        buf = io.BytesIO()
        np.savez(
            buf,
            src=self.src.flat,
            src_offsets=self.src.offsets,
            tgt=self.tgt.flat,
            tgt_offsets=self.tgt.offsets,
        )
        atomic_write(Path(path), buf.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> EncodedCorpus:
        """Read a corpus written by save()."""
        with np.load(path) as z:
            return cls(Ragged(z["src"], z["src_offsets"]), Ragged(z["tgt"], z["tgt_offsets"]))
