"""Streaming preparation gives what the whole-list preparation gave (tests/data/reference.py): the
same BPE model bytes, token ids, pair order, cleaning counts and batches."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from rpr_nmt.data import BatchIterator, EncodedCorpus, prepare_data, train_text
from rpr_nmt.data.sources import iter_parallel_text
from tests.data import reference
from tests.data.conftest import synthetic_pairs, write_lines


def _quiet(_: str) -> None:
    pass


def messy_pairs(n: int, seed: int) -> tuple[list[str], list[str]]:
    """Pairs with everything the filters remove: repeats (near and far), empty and whitespace-only
    sides, over-long pairs, bad length ratios, CRLF endings, U+2028 and non-ASCII text."""
    src, tgt = synthetic_pairs(n, seed)
    rng = random.Random(seed)
    for i in range(0, n, 9):  # exact repeats of earlier pairs, some far back (other chunks)
        j = rng.randrange(0, i + 1)
        src[i], tgt[i] = src[j], tgt[j]
    for i in range(3, n, 17):
        src[i] = rng.choice(["", " ", "\t", "\u3000"])
    for i in range(5, n, 23):
        tgt[i] = rng.choice(["", "  "])
    for i in range(7, n, 29):
        src[i] = " ".join(["the dog runs"] * rng.randint(20, 40))  # over max_tokens_per_sentence
    for i in range(11, n, 31):
        tgt[i] = tgt[i] + " " + " ".join(["GRÜN"] * rng.randint(20, 30))  # bad ratio
    for i in range(13, n, 37):
        src[i] = src[i] + "\r"  # CRLF line: the \r is dropped, as the old reader did
        tgt[i] = tgt[i].replace(" ", "\u2028", 1)  # not a line break
    return src, tgt


@pytest.fixture
def messy_corpus(tmp_path: Path) -> Path:
    """train (.gz, 700 pairs), extra (plain, 300, repeating some train pairs), valid (plain)."""
    root = tmp_path / "corpus"
    src, tgt = messy_pairs(700, 0)
    write_lines(root / "train.en.gz", src)
    write_lines(root / "train.de.gz", tgt)
    extra_src, extra_tgt = messy_pairs(300, 1)
    extra_src[::10], extra_tgt[::10] = src[:300:10], tgt[:300:10]  # repeats across splits
    write_lines(root / "extra.en", extra_src)
    write_lines(root / "extra.de", extra_tgt)
    valid_src, valid_tgt = messy_pairs(40, 2)
    write_lines(root / "valid.en", valid_src)
    write_lines(root / "valid.de", valid_tgt)
    return root


def assert_same_split(corpus: EncodedCorpus, ref: reference.ReferenceSplit) -> None:
    assert isinstance(corpus.src.flat, np.memmap)  # read from the cache, memory-mapped
    for got, want in zip(
        (corpus.src.flat, corpus.src.offsets, corpus.tgt.flat, corpus.tgt.offsets),
        (ref.src, ref.src_offsets, ref.tgt, ref.tgt_offsets),
    ):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def assert_same_batches(corpus: EncodedCorpus, ref: reference.ReferenceSplit) -> None:
    max_tokens = 200
    it = BatchIterator(
        corpus, max_tokens=max_tokens, pad_id=0, bos_id=2, eos_id=3, shuffle=True, seed=3
    )
    old = reference.make_batches(
        np.diff(ref.src_offsets) + 1, np.diff(ref.tgt_offsets) + 1, max_tokens
    )
    assert [b.tolist() for b in it.batches] == [b.tolist() for b in old]


@pytest.mark.parametrize(
    "overrides",
    [
        # two train splits, a cap inside the second, dedup, a BPE sample smaller than the text
        dict(train_splits=["train", "extra"], max_train_pairs=900, deduplicate=True,
             bpe_sample_sentences=500),
        # no dedup, all sentences train BPE, a source cap for length studies
        dict(deduplicate=False, bpe_sample_sentences=10_000, max_train_source_tokens=40),
        # dedup, cap inside the first split, tight ratio
        dict(max_train_pairs=450, deduplicate=True, max_length_ratio=1.5, bpe_sample_sentences=301),
    ],
)  # fmt: skip
@pytest.mark.parametrize("chunk_pairs", [37, 50_000])
def test_streaming_equals_whole_list_reference(make_cfg, messy_corpus, overrides, chunk_pairs):
    cfg = make_cfg(max_tokens_per_sentence=60, **overrides)
    data = prepare_data(cfg, splits=["train", "valid"], log=_quiet, chunk_pairs=chunk_pairs)
    proto, ref_train, ref_report = reference.prepare_train(cfg)
    assert data.tokenizer.proto == proto
    assert data.cleaning.to_dict() == ref_report
    assert ref_report["empty"] > 0 and ref_report["too_long"] > 0 and ref_report["bad_ratio"] > 0
    if cfg.deduplicate:
        assert ref_report["duplicates"] > 0
    assert_same_split(data.splits["train"], ref_train)
    assert_same_split(data.splits["valid"], reference.encode_split(cfg, "valid", proto))
    assert_same_batches(data.splits["train"], ref_train)
    again = prepare_data(cfg, splits=["train", "valid"], log=_quiet, chunk_pairs=chunk_pairs)
    assert all(again.reused.values()) and again.cleaning == data.cleaning
    assert_same_split(again.splits["train"], ref_train)


@pytest.mark.parametrize("streaming", [False, True])
def test_hub_streaming_equals_reference(make_cfg, tmp_path, monkeypatch, streaming):
    folder = tmp_path / "wmt_like"
    src, tgt = messy_pairs(400, 3)
    rows = [json.dumps({"translation": {"en": s, "de": t}}) for s, t in zip(src, tgt)]
    write_lines(folder / "train.jsonl", rows)
    cfg = make_cfg(
        source="hub", hub_dataset=str(folder), hub_splits={"train": "train"}, streaming=streaming,
        max_train_pairs=350, deduplicate=True, bpe_sample_sentences=400,
        max_tokens_per_sentence=60,
    )  # fmt: skip
    reads = []

    def counted(*args, **kwargs):
        reads.append(args[1])
        return iter_parallel_text(*args, **kwargs)

    monkeypatch.setattr(train_text, "iter_parallel_text", counted)
    data = prepare_data(cfg, splits=["train"], log=_quiet, chunk_pairs=64)
    # Count, sample, encode: a streamed split is fetched once and spooled for the later passes.
    assert reads == ["train"] * (1 if streaming else 3)
    proto, ref_train, ref_report = reference.prepare_train(cfg)
    assert data.tokenizer.proto == proto and data.cleaning.to_dict() == ref_report
    assert_same_split(data.splits["train"], ref_train)
    leftovers = [p.name for p in (tmp_path / "cache" / "encoded").iterdir() if p.is_file()]
    assert leftovers == []  # the spool of the streamed split is gone


def test_bpe_model_reused_when_only_filters_change(make_cfg, messy_corpus):
    # A cached BPE model with a missing encoded split: one pass cleans and encodes together.
    cfg = make_cfg(deduplicate=True, max_tokens_per_sentence=60, bpe_sample_sentences=500)
    prepare_data(cfg, splits=["train"], log=_quiet, chunk_pairs=50)
    changed = make_cfg(deduplicate=True, max_tokens_per_sentence=30, bpe_sample_sentences=500)
    data = prepare_data(changed, splits=["train"], log=_quiet, chunk_pairs=50)
    assert data.reused == {"bpe": True, "train": False}
    proto, ref_train, ref_report = reference.prepare_train(changed)
    assert data.tokenizer.proto == proto and data.cleaning.to_dict() == ref_report
    assert_same_split(data.splits["train"], ref_train)
