"""Length buckets, shared by rpr-nmt-report --by-length (BLEU by source length) and rpr-nmt-score
by_length=true (perplexity by source length and by target position).

A bucket is named by its first length: bounds (1, 11, 16, 21) are the buckets 1-10, 11-15, 16-20
and 21+. Plain Python: the report reads it without torch.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_BOUNDS", "bucket_labels", "bucket_of"]

DEFAULT_BOUNDS = (1, 11, 16, 21, 26, 31)


def bucket_labels(bounds: Sequence[int]) -> list[str]:
    """'1-10', '11-15', ..., '31+' for bounds (1, 11, 16, ..., 31)."""
    labels = [f"{lo}-{hi - 1}" for lo, hi in zip(bounds, bounds[1:])]
    return labels + [f"{bounds[-1]}+"]


def bucket_of(length: int, bounds: Sequence[int]) -> int:
    """Index of the bucket holding `length` (lengths under the first bound go to the first)."""
    index = 0
    for i, lower in enumerate(bounds):
        if length >= lower:
            index = i
    return index
