"""The cleaned training text as a stream of chunks that can be read more than once.

Preparing a corpus that does not fit in memory takes up to three passes over the training text:
count the cleaned pairs (the BPE sample is drawn from that count), collect the sampled pairs, and
encode. The first pass applies the text filters (empty sides, held-out sentences, duplicates) and
remembers which raw pairs survived, one byte per raw pair; later passes re-read the raw text and
use that mask, so the pairs are hashed once. A streamed hub split is fetched once: when more
passes follow the first, it spools the cleaned chunks to a temporary file in the cache (about the
size of the text), which the later passes read.
"""

from __future__ import annotations

import os
import pickle
from itertools import compress
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np

from rpr_nmt.config import DataConfig
from rpr_nmt.data.bpe import sample_pairs
from rpr_nmt.data.cache import owned_temporary
from rpr_nmt.data.cleaning import CleaningReport, PairFilter
from rpr_nmt.data.held_out import HeldOutSentences
from rpr_nmt.data.sources import TRAIN, Chunks, iter_parallel_text


def describe_train(cfg: DataConfig) -> str:
    """The training files or hub splits, for messages."""
    names = ", ".join(cfg.train_splits)
    if cfg.source == "hub":
        return f"hub dataset {cfg.hub_dataset} splits {names}"
    if cfg.source == "files":
        return f"the files of data.files {names} under {cfg.root}"
    return f"{cfg.root}/{{{names}}}.{{{cfg.src_lang},{cfg.tgt_lang}}}"


class TrainText:
    """The training pairs after the text filters, chunk by chunk, as often as asked.

    Use as a context manager: leaving it removes the spool file of a streamed hub split.

    Args:
        cfg: the data config (source, splits, deduplicate, ...).
        spool_dir: where a streamed hub split is spooled (the cache's encoded/ folder).
        chunk_pairs: raw pairs per chunk.

    Attributes:
        report: read, empty, overlap and duplicates are filled in by the first complete pass.
        pairs: cleaned pairs (None until a pass has completed).
    """

    def __init__(self, cfg: DataConfig, spool_dir: Path, chunk_pairs: int) -> None:
        self.cfg, self.spool_dir, self.chunk_pairs = cfg, spool_dir, chunk_pairs
        self.report = CleaningReport()
        self.pairs: int | None = None
        self._kept: list[np.ndarray] | None = None  # per raw chunk: which pairs survived
        self._spool: Path | None = None
        self._streamed = cfg.source == "hub" and cfg.streaming

    def __enter__(self) -> TrainText:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._spool is not None:
            self._spool.unlink(missing_ok=True)

    def chunks(self) -> Chunks:
        """The cleaned (source, target) lines in chunks; the first pass applies the filters.

        Raises:
            DataError: unreadable input, or no pair left by the text filters (at the end of the
                first pass).
        """
        if self.pairs is None:
            return self._first_pass(spool=False)  # nothing else reads the text after this pass
        if self._spool is not None:
            return self._read_spool()
        return self._replay()

    def count(self) -> int:
        """The number of cleaned pairs (a full pass, unless one has been made).

        Counting comes before the passes that sample and encode, so a streamed hub split is spooled.
        """
        if self.pairs is None:
            for _ in self._first_pass(spool=self._streamed):
                pass
        assert self.pairs is not None
        return self.pairs

    def bpe_sentences(self, n: int) -> list[str]:
        """The BPE training sentences: bpe.sample_pairs' pairs, all sources first, then targets."""
        picks = sample_pairs(self.count(), n)
        src: list[str] = []
        tgt: list[str] = []
        base = 0
        for s, t in self.chunks():
            if picks is None:
                src += s
                tgt += t
            else:
                lo, hi = np.searchsorted(picks, [base, base + len(s)])
                local = (picks[lo:hi] - base).tolist()
                src += [s[i] for i in local]
                tgt += [t[i] for i in local]
            base += len(s)
        src += tgt
        return src

    def _first_pass(self, *, spool: bool) -> Chunks:
        cfg, report = self.cfg, CleaningReport()
        held_out = HeldOutSentences.from_config(cfg)
        filt = PairFilter(deduplicate=cfg.deduplicate, report=report, held_out=held_out)
        kept: list[np.ndarray] = []
        out = self._open_spool() if spool else None
        try:
            for src, tgt in iter_parallel_text(cfg, TRAIN, self.chunk_pairs):
                keep = filt.keep(src, tgt)
                kept.append(np.array(keep, dtype=bool))
                chunk = list(compress(src, keep)), list(compress(tgt, keep))
                if out is not None:
                    pickle.dump(chunk, out, protocol=pickle.HIGHEST_PROTOCOL)
                if chunk[0]:
                    yield chunk
        finally:
            if out is not None:
                out.close()
        report.kept = report.read - report.empty - report.overlap - report.duplicates
        report.check_nonempty(
            describe_train(cfg), cfg.max_tokens_per_sentence, cfg.max_length_ratio
        )
        self.report, self.pairs, self._kept = report, report.kept, kept

    def _replay(self) -> Chunks:
        assert self._kept is not None
        raw = iter_parallel_text(self.cfg, TRAIN, self.chunk_pairs)
        for i, (src, tgt) in enumerate(raw):
            keep = self._kept[i] if i < len(self._kept) else np.zeros(0, dtype=bool)
            if len(keep) != len(src):
                raise RuntimeError(
                    f"the training text changed while it was prepared ({describe_train(self.cfg)}):"
                    f" chunk {i} has {len(src)} pairs, {len(keep)} before; run again"
                )
            keep_list = keep.tolist()
            if any(keep_list):
                yield list(compress(src, keep_list)), list(compress(tgt, keep_list))

    def _open_spool(self) -> BinaryIO:
        if self._spool is not None:  # left by an earlier, unfinished pass
            self._spool.unlink(missing_ok=True)
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        fd, path = owned_temporary(self.spool_dir / f"{self.cfg.name}-train-spool")
        self._spool = Path(path)
        return os.fdopen(fd, "wb")

    def _read_spool(self) -> Chunks:
        assert self._spool is not None
        with open(self._spool, "rb") as f:
            while True:
                try:
                    chunk = pickle.load(f)
                except EOFError:
                    return
                if chunk[0]:
                    yield chunk
