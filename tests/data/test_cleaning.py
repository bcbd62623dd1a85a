"""Training-set filters: each removes what it should and reports its count; empty result fails."""

from __future__ import annotations

import numpy as np
import pytest

from rpr_nmt.data import DataError, prepare_data
from rpr_nmt.data.cleaning import (
    CleaningReport,
    PairFilter,
    drop_empty_and_duplicates,
    length_mask,
)
from rpr_nmt.data.dedup import SeenHashes
from tests.data.conftest import synthetic_pairs, write_lines


def test_empty_and_duplicates():
    src = ["a", " ", "b", "a", "c", "a"]
    tgt = ["x", "y", "\t", "x", "z", "w"]
    report = CleaningReport()
    s, t = drop_empty_and_duplicates(src, tgt, deduplicate=True, report=report)
    assert (s, t) == (["a", "c", "a"], ["x", "z", "w"])
    assert (report.read, report.empty, report.duplicates) == (6, 2, 1)
    report = CleaningReport()
    s, _ = drop_empty_and_duplicates(src, tgt, deduplicate=False, report=report)
    assert len(s) == 4 and report.duplicates == 0


def test_length_and_ratio():
    src_len = np.array([5, 300, 4, 10, 1, 2])
    tgt_len = np.array([6, 5, 13, 30, 3, 0])
    report = CleaningReport()
    keep = length_mask(src_len, tgt_len, max_tokens=256, max_ratio=3.0, report=report)
    # 300 > 256; 13 > 3 * 4; 30 <= 3 * 10 kept; 3 <= 3 * 1 kept; 2 > 3 * max(0, 1) is not.
    assert keep.tolist() == [True, False, False, True, True, True]
    assert (report.too_long, report.bad_ratio, report.kept) == (1, 1, 4)


def test_filters_in_prepare_are_logged(make_cfg, tmp_path):
    src, tgt = synthetic_pairs(200)
    src += ["", "the dog", "the " * 40 + "dog", "A man."]
    tgt += ["LEER", "   ", "DOG", "A MAN RUNS " * 15]
    root = tmp_path / "corpus"
    write_lines(root / "train.en", src + src[:5])
    write_lines(root / "train.de", tgt + tgt[:5])
    lines: list[str] = []
    cfg = make_cfg(deduplicate=True, max_tokens_per_sentence=30)
    data = prepare_data(cfg, splits=["train"], log=lines.append)
    r = data.cleaning
    assert (r.read, r.empty, r.duplicates) == (209, 2, 5)
    assert (
        r.too_long >= 2
        and r.kept == len(data.splits["train"]) == 209 - 7 - r.too_long - r.bad_ratio
    )
    assert any("2 with an empty or whitespace-only side, 5 duplicates" in line for line in lines)


def test_empty_training_set_says_which_filter(make_cfg, tmp_path):
    root = tmp_path / "corpus"
    write_lines(root / "train.en", ["", "  ", "a"])
    write_lines(root / "train.de", ["x", "y", " "])
    with pytest.raises(
        DataError, match="empty after filtering.*3 pairs read; removed 3 with an empty"
    ):
        prepare_data(make_cfg(), splits=["train"], log=lambda _: None)


def test_empty_after_length_filter(make_cfg, tiny_corpus):
    cfg = make_cfg(max_tokens_per_sentence=2)
    with pytest.raises(
        DataError, match=r"removed .* 0 duplicates, 400 over 2 BPE tokens.*; 0 kept"
    ):
        prepare_data(cfg, splits=["train"], log=lambda _: None)


def test_source_length_cap_for_length_studies(make_cfg, tmp_path):
    src_len = np.array([5, 16, 15, 300])
    tgt_len = np.array([5, 16, 15, 5])
    report = CleaningReport()
    keep = length_mask(
        src_len, tgt_len, max_tokens=256, max_ratio=100.0, report=report, max_source_tokens=15
    )
    assert keep.tolist() == [True, False, True, False]
    assert (report.too_long, report.source_too_long, report.kept) == (1, 1, 2)

    src, tgt = synthetic_pairs(200)
    write_lines(tmp_path / "corpus" / "train.en", src)
    write_lines(tmp_path / "corpus" / "train.de", tgt)
    full = prepare_data(make_cfg(), splits=["train"], log=lambda _: None)
    cap = int(np.median(full.splits["train"].src_lengths))
    capped = prepare_data(make_cfg(max_train_source_tokens=cap), splits=["train"], log=print)
    assert int(capped.splits["train"].src_lengths.max()) <= cap
    assert (
        len(capped.splits["train"]) == len(full.splits["train"]) - capped.cleaning.source_too_long
    )
    assert capped.cleaning.source_too_long > 0


def test_whitespace_test_is_strip():
    # PairFilter's `s and not s.isspace()` must decide exactly as the old `s.strip()` did.
    for c in map(chr, range(0x110000)):
        assert (c.strip() == "") == c.isspace()


def test_seen_hashes_is_a_set():
    rng = np.random.default_rng(0)
    seen, reference = SeenHashes(), set()
    for size in rng.integers(0, 400, size=60):  # many runs, merged at different sizes
        hashes = rng.integers(0, 5000, size=size).astype(np.uint64)  # repeats within and across
        mask = seen.first_occurrences(hashes)
        want = []
        for h in hashes.tolist():
            want.append(h not in reference)
            reference.add(h)
        assert mask.tolist() == want
    assert len(seen) == len(reference) and seen.nbytes == 8 * len(reference)
    assert len(seen._runs) <= 12


def test_pair_filter_over_chunks_equals_whole_list():
    src, tgt = synthetic_pairs(300)
    src, tgt = src * 2 + ["a", "a "], tgt * 2 + ["x", "x"]  # "a" and "a " are different pairs
    src[10], tgt[20] = " ", "\u3000"
    whole = CleaningReport()
    want = drop_empty_and_duplicates(src, tgt, deduplicate=True, report=whole)
    assert want == tuple(map(list, zip(*dict.fromkeys(
        (s, t) for s, t in zip(src, tgt) if s.strip() and t.strip()))))  # fmt: skip
    report = CleaningReport()
    filt = PairFilter(deduplicate=True, report=report)
    got_src, got_tgt = [], []
    for i in range(0, len(src), 37):
        keep = filt.keep(src[i : i + 37], tgt[i : i + 37])
        got_src += [s for s, k in zip(src[i : i + 37], keep) if k]
        got_tgt += [t for t, k in zip(tgt[i : i + 37], keep) if k]
    assert (got_src, got_tgt) == want and report == whole
    assert (report.read, report.empty, report.duplicates) == (602, 2, 298)
