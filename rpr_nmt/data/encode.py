"""Encoding chunks of text into a corpus folder: sentencepiece on every core, filters per chunk.

While sentencepiece encodes one chunk (it releases the GIL), a helper thread reads and cleans the
next one, so reading can overlap encoding where a core is free.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import numpy as np

from rpr_nmt.config import DataConfig
from rpr_nmt.data.cleaning import CleaningReport, length_mask
from rpr_nmt.data.corpus import CorpusWriter, flatten
from rpr_nmt.data.tokenizer import Tokenizer

T = TypeVar("T")
Side = tuple[np.ndarray, np.ndarray]  # (flat ids, lengths) of one side of a chunk
_END = object()


def encode_threads(cfg: DataConfig) -> int:
    """Threads for encoding: data.encode_threads, or every core this process may use when 0."""
    threads = cfg.encode_threads
    if threads > 0:
        return threads
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def prefetch(items: Iterable[T]) -> Iterator[T]:
    """The items in order; a helper thread produces the next one while the caller uses this one."""
    it = iter(items)
    with ThreadPoolExecutor(1, thread_name_prefix="rpr-nmt-read") as pool:
        future = pool.submit(next, it, _END)
        while True:
            item = future.result()
            if item is _END:
                return
            future = pool.submit(next, it, _END)
            yield item  # type: ignore[misc]


class LengthFilter:
    """The length filters of cleaning.length_mask, applied chunk by chunk with summed counts.

    Args:
        cfg: max_tokens_per_sentence, max_length_ratio, max_train_source_tokens.

    Attributes:
        report: too_long, source_too_long, bad_ratio and kept, summed over the chunks so far.
    """

    def __init__(self, cfg: DataConfig) -> None:
        self.cfg, self.report = cfg, CleaningReport()

    def __call__(self, src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> np.ndarray:
        chunk = CleaningReport()
        keep = length_mask(
            src_lengths,
            tgt_lengths,
            max_tokens=self.cfg.max_tokens_per_sentence,
            max_ratio=self.cfg.max_length_ratio,
            report=chunk,
            max_source_tokens=self.cfg.max_train_source_tokens,
        )
        self.report.add(chunk)
        return keep


def _select(side: Side, keep: np.ndarray) -> Side:
    flat, lengths = side
    return flat[np.repeat(keep, lengths)], lengths[keep]


def encode_corpus(
    tok: Tokenizer,
    chunks: Iterable[tuple[list[str], list[str]]],
    folder: Path,
    *,
    threads: int,
    keep: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    finish: Callable[[CorpusWriter], None] | None = None,
) -> CorpusWriter:
    """Encode chunks of aligned text into the corpus folder `folder`, written as it goes.

    Args:
        tok: the BPE tokenizer.
        chunks: (source lines, target lines) chunks.
        folder: the corpus folder to create (installed only when everything succeeded).
        threads: sentencepiece threads.
        keep: maps a chunk's (source lengths, target lengths) to the mask of pairs to keep.
        finish: called before the folder is installed, e.g. to add a file or refuse the result.

    Returns:
        The closed writer (pairs, src_tokens, tgt_tokens).
    """
    with CorpusWriter(folder) as writer:
        for src, tgt in prefetch(chunks):
            s = flatten(tok.encode_batch(src, threads))
            t = flatten(tok.encode_batch(tgt, threads))
            if keep is not None:
                mask = keep(s[1], t[1])
                if not mask.all():
                    s, t = _select(s, mask), _select(t, mask)
            writer.append(s, t)
        if finish is not None:
            finish(writer)
        writer.close()
    return writer
