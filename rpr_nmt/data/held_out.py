"""Training pairs that share a sentence with the held-out splits (data.held_out_overlap).

A corpus assembled from test sets (data=wmt_news_en_de) can hold a sentence of its own valid or
test set: a headline or a short reply ("Warum?") recurs from year to year. A training pair overlaps
when its source or its target, stripped of surrounding white space, equals a sentence (of either
side) of data.valid_split or data.test_split. data.held_out_overlap says what happens to it:

    keep     not checked (the default: every corpus of before this setting trains as it did)
    drop     removed, and counted in the cleaning report (CleaningReport.overlap)
    refuse   DataError naming the first such pair and the split it shares a sentence with

The held-out splits are read whole (they are test-set sized) and kept as a set of strings.
"""

from __future__ import annotations

from collections.abc import Sequence

from rpr_nmt.config import DataConfig
from rpr_nmt.data.cache import hash_key
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.sources import TRAIN, read_parallel_text, source_fingerprint

MODES = ("keep", "drop", "refuse")  # the values of data.held_out_overlap


def check_mode(cfg: DataConfig) -> None:
    """Refuse a data.held_out_overlap that is not one of MODES (DataError)."""
    if cfg.held_out_overlap not in MODES:
        raise DataError(
            f"data.held_out_overlap={cfg.held_out_overlap!r} must be keep, drop or refuse"
        )


def held_out_splits(cfg: DataConfig) -> list[str]:
    """The splits training pairs are compared with: valid_split and test_split, once each."""
    return list(dict.fromkeys([cfg.valid_split, cfg.test_split]))


def training_fingerprint(cfg: DataConfig) -> str:
    """The fingerprint of the training text after the text filters: source_fingerprint of the
    training splits, and with held_out_overlap on, the mode and the held-out splits' text too (a
    new test set changes which training pairs are dropped). With "keep" it is source_fingerprint
    itself, so the caches of every corpus of before this setting stay valid."""
    check_mode(cfg)
    fingerprint = source_fingerprint(cfg, TRAIN)
    if cfg.held_out_overlap == "keep":
        return fingerprint
    held_out = [(split, source_fingerprint(cfg, split)) for split in held_out_splits(cfg)]
    return hash_key("held-out", fingerprint, cfg.held_out_overlap, held_out)


class HeldOutSentences:
    """The sentences of the held-out splits, to find the training pairs that share one.

    Args:
        sentences: sentence (stripped) -> the split it first occurs in.
        mode: "drop" or "refuse".
    """

    def __init__(self, sentences: dict[str, str], mode: str) -> None:
        self.sentences = sentences
        self.mode = mode

    @classmethod
    def from_config(cls, cfg: DataConfig) -> HeldOutSentences | None:
        """Read valid_split and test_split; None when held_out_overlap is "keep"."""
        check_mode(cfg)
        if cfg.held_out_overlap == "keep":
            return None
        sentences: dict[str, str] = {}
        for split in held_out_splits(cfg):
            for side in read_parallel_text(cfg, split):
                for line in side:
                    if line.strip():
                        sentences.setdefault(line.strip(), split)
        return cls(sentences, cfg.held_out_overlap)

    def overlapping(
        self, src: Sequence[str], tgt: Sequence[str], *, among: Sequence[bool], start: int = 0
    ) -> list[bool]:
        """Which of the pairs marked in `among` have a side equal to a held-out sentence.

        Args:
            src: source lines.
            tgt: target lines, aligned with src.
            among: the pairs to look at (those the filters before this one kept).
            start: the training pairs before src[0], for the message.

        Raises:
            DataError: with mode "refuse", at the first such pair.
        """
        found = self.sentences
        out = [a and (s.strip() in found or t.strip() in found) for a, s, t in zip(among, src, tgt)]
        if self.mode == "refuse" and any(out):
            i = out.index(True)
            side = src[i].strip() if src[i].strip() in found else tgt[i].strip()
            raise DataError(
                f"training pair {start + i + 1} shares the sentence {side!r} with split "
                f"'{found[side]}' (data.held_out_overlap=refuse): remove it from the training "
                "files, or set data.held_out_overlap=drop to drop such pairs (counted)"
            )
        return out
