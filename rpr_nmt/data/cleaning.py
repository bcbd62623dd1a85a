"""Cleaning the training split: empty lines, held-out sentences, duplicates, over-long pairs and
bad length ratios.

Text filters (empty or whitespace-only sides, optionally a sentence of the valid or test split
(rpr_nmt.data.held_out), optional de-duplication) run before BPE training; the length filters count
BPE tokens and run after encoding. Every filter reports how many pairs it
removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from itertools import compress

import numpy as np

from rpr_nmt.data.dedup import SeenHashes, pair_hashes
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.held_out import HeldOutSentences


@dataclass
class CleaningReport:
    """Pairs read and removed by each training-set filter."""

    read: int = 0  # pairs in the raw training text
    empty: int = 0  # a side empty or whitespace only
    overlap: int = 0  # a side equal to a valid or test sentence (held_out_overlap=drop)
    duplicates: int = 0  # repeats of an earlier (source, target) pair (deduplicate=true)
    too_long: int = 0  # a side over max_tokens_per_sentence BPE tokens
    source_too_long: int = 0  # source over max_train_source_tokens (length studies)
    bad_ratio: int = 0  # longer side over max_length_ratio x the shorter side (BPE tokens)
    kept: int = 0  # pairs left for training

    def summary(self, max_tokens: int, max_ratio: float, *, held_out: bool = False) -> str:
        """One log line with every count; the overlap count with `held_out` (when it was checked)
        or when pairs were dropped for it."""
        shown = held_out or self.overlap > 0
        overlap = f"{self.overlap} sharing a sentence with the valid or test split, " * shown
        return (
            f"{self.read} pairs read; removed {self.empty} with an empty or whitespace-only side, "
            f"{overlap}{self.duplicates} duplicates, {self.too_long} over {max_tokens} BPE tokens, "
            f"{self.source_too_long} over the source length cap, "
            f"{self.bad_ratio} over length ratio {max_ratio}; {self.kept} kept"
        )

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def add(self, other: CleaningReport) -> None:
        """Add another report's counts to these (reports of successive chunks)."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def check_nonempty(self, where: str, max_tokens: int, max_ratio: float) -> None:
        """Raise DataError when no pair survived, saying which filter removed what.

        Args:
            where: the training files or hub split, for the message.
            max_tokens: data.max_tokens_per_sentence, for the message.
            max_ratio: data.max_length_ratio, for the message.
        """
        if self.kept > 0:
            return
        raise DataError(
            f"the training set is empty after filtering ({where}): "
            f"{self.summary(max_tokens, max_ratio)}. Check the training files, or relax "
            "data.max_tokens_per_sentence / data.max_length_ratio / data.max_train_source_tokens."
        )


class PairFilter:
    """The text filters, chunk by chunk: empty or whitespace-only sides, a side that is a held-out
    sentence, then repeated pairs.

    Pairs are compared across all chunks seen so far through 8-byte hashes (rpr_nmt.data.dedup), so
    a corpus of any size is deduplicated in 8 bytes per unique pair, keeping first occurrences in
    order, as dict.fromkeys over the whole corpus would.

    Args:
        deduplicate: keep only the first occurrence of each (source, target) pair.
        report: its read, empty, overlap and duplicates counts grow with every chunk.
        held_out: the valid and test sentences to drop (or refuse) pairs by; None = not checked.
    """

    def __init__(
        self,
        *,
        deduplicate: bool,
        report: CleaningReport,
        held_out: HeldOutSentences | None = None,
    ) -> None:
        self.deduplicate = deduplicate
        self.report = report
        self.held_out = held_out
        self.seen = SeenHashes()

    def keep(self, src: Sequence[str], tgt: Sequence[str]) -> list[bool]:
        """Which pairs of the chunk pass (src and tgt aligned); updates the report."""
        # `s and not s.isspace()` is `s.strip() != ""` without building the stripped copy.
        keep = [
            bool(s) and bool(t) and not s.isspace() and not t.isspace() for s, t in zip(src, tgt)
        ]
        n_kept = sum(keep)
        start = self.report.read
        self.report.read += len(keep)
        self.report.empty += len(keep) - n_kept
        if self.held_out is not None and n_kept:
            shared = self.held_out.overlapping(src, tgt, among=keep, start=start)
            keep = [k and not o for k, o in zip(keep, shared)]
            self.report.overlap += n_kept - sum(keep)
            n_kept = sum(keep)
        if self.deduplicate and n_kept:
            index = [i for i, k in enumerate(keep) if k]
            first = self.seen.first_occurrences(
                pair_hashes([src[i] for i in index], [tgt[i] for i in index])
            )
            for i, new in zip(index, first.tolist()):
                keep[i] = new
            self.report.duplicates += n_kept - int(first.sum())
        return keep


def drop_empty_and_duplicates(
    src: Sequence[str], tgt: Sequence[str], *, deduplicate: bool, report: CleaningReport
) -> tuple[list[str], list[str]]:
    """Aligned pairs without empty or whitespace-only sides and, if asked, without repeated pairs.

    Args:
        src: source lines.
        tgt: target lines, aligned with src.
        deduplicate: keep only the first occurrence of each (source, target) pair.
        report: its read, empty and duplicates counts are filled in.

    Returns:
        The kept (source, target) lines, still aligned.
    """
    keep = PairFilter(deduplicate=deduplicate, report=report).keep(src, tgt)
    return list(compress(src, keep)), list(compress(tgt, keep))


def length_mask(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    *,
    max_tokens: int,
    max_ratio: float,
    report: CleaningReport,
    max_source_tokens: int | None = None,
) -> np.ndarray:
    """Which pairs pass the length filters (both counted in BPE tokens, EOS excluded).

    A pair is too long when a side has more than max_tokens tokens; else it has a bad ratio when its
    longer side exceeds max_ratio times its shorter side (at least 1 token); else, when
    max_source_tokens is given, its source is too long for a length study.

    Returns:
        A boolean mask over the pairs; report.too_long, bad_ratio and kept are filled in.
    """
    too_long = (src_lengths > max_tokens) | (tgt_lengths > max_tokens)
    longer = np.maximum(src_lengths, tgt_lengths)
    shorter = np.maximum(np.minimum(src_lengths, tgt_lengths), 1)
    bad_ratio = ~too_long & (longer > max_ratio * shorter)
    source_too_long = np.zeros_like(too_long)
    if max_source_tokens is not None:
        source_too_long = ~(too_long | bad_ratio) & (src_lengths > max_source_tokens)
    keep = ~(too_long | bad_ratio | source_too_long)
    report.too_long, report.bad_ratio = int(too_long.sum()), int(bad_ratio.sum())
    report.source_too_long, report.kept = int(source_too_long.sum()), int(keep.sum())
    return keep
