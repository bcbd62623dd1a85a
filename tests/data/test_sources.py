"""Raw text: local files (plain and .gz), hub datasets built on disk (both schemas), bad input."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import pytest

from rpr_nmt.data import DataError, read_parallel_text
from rpr_nmt.data.sources import iter_parallel_text, read_lines
from rpr_nmt.data.textfile import LineReader
from tests.data.conftest import synthetic_pairs, write_lines


def test_local_plain_and_gz(make_cfg, tiny_corpus):
    cfg = make_cfg()
    src, tgt = read_parallel_text(cfg, "train")  # .gz
    assert (len(src), len(tgt)) == (400, 400)
    assert (src, tgt) == synthetic_pairs(400, 0)
    assert read_parallel_text(cfg, "valid") == synthetic_pairs(30, 1)  # plain


def test_several_train_splits_concatenate_and_cap(make_cfg, tiny_corpus):
    cfg = make_cfg(train_splits=["train", "valid"])
    src, _ = read_parallel_text(cfg, "train")
    assert src == synthetic_pairs(400, 0)[0] + synthetic_pairs(30, 1)[0]
    src, tgt = read_parallel_text(
        make_cfg(train_splits=["train", "valid"], max_train_pairs=410), "train"
    )
    assert len(src) == len(tgt) == 410 and src[400] == synthetic_pairs(30, 1)[0][0]


def test_lines_split_on_newline_only(tmp_path):
    # U+2028 and form feeds are not line breaks in a corpus; CRLF endings are.
    path = write_lines(tmp_path / "x.en", ["a\u2028b", "c\x0cd", "e\r"])
    assert read_lines(path) == ["a\u2028b", "c\x0cd", "e"]


def test_line_count_mismatch_names_both_files_and_counts(make_cfg, tmp_path):
    root = tmp_path / "corpus"
    write_lines(root / "train.en", ["a", "b", "c"])
    write_lines(root / "train.de.gz", ["a", "b"])
    with pytest.raises(DataError) as e:
        read_parallel_text(make_cfg(), "train")
    msg = str(e.value)
    assert "train.en" in msg and "train.de.gz" in msg and "3 lines" in msg and "has 2" in msg


def test_invalid_utf8_names_file_and_line(make_cfg, tmp_path):
    root = tmp_path / "corpus"
    write_lines(root / "train.de", ["eins", "zwei", "drei"])
    (root / "train.en.gz").write_bytes(gzip.compress(b"one\ntwo\nthr\xffee\n"))
    with pytest.raises(DataError, match=r"train\.en\.gz: invalid UTF-8 on line 3"):
        read_parallel_text(make_cfg(), "train")


def test_missing_file_names_expected_paths(make_cfg, tmp_path):
    with pytest.raises(DataError) as e:
        read_parallel_text(make_cfg(), "valid")
    msg = str(e.value)
    root = tmp_path / "corpus"
    assert str(root / "valid.en") in msg and str(root / "valid.en.gz") in msg
    assert "data.root" in msg and "\n" not in msg
    assert "data.source=hub" not in msg  # data=local has no hub dataset to fall back on
    with pytest.raises(DataError, match=r"or use data.source=hub \(bentrevett/multi30k\)"):
        read_parallel_text(make_cfg(hub_dataset="bentrevett/multi30k"), "valid")


def test_a_folder_in_place_of_a_data_file_is_named_as_such(make_cfg, tmp_path):
    write_lines(tmp_path / "corpus" / "valid.en", ["a"])
    (tmp_path / "corpus" / "valid.de").mkdir()
    with pytest.raises(DataError, match=r"valid\.de is a folder, not a file of one side"):
        read_parallel_text(make_cfg(), "valid")


@pytest.mark.parametrize("cap", [2, 4, 5])
def test_a_capped_corpus_with_a_side_one_line_short_is_refused(make_cfg, tmp_path, cap):
    # Compared only up to data.max_train_pairs, a train.de missing line 3 passed, and every
    # pair after it was shifted by one.
    root = tmp_path / "corpus"
    write_lines(root / "train.en", ["a", "b", "c", "d", "e", "f"])
    write_lines(root / "train.de.gz", ["A", "B", "D", "E", "F"])
    with pytest.raises(DataError, match=r"train\.en has 6 lines but .*train\.de\.gz has 5"):
        read_parallel_text(make_cfg(max_train_pairs=cap), "train")


def test_a_split_past_the_cap_is_still_checked_for_alignment(make_cfg, tmp_path):
    root = tmp_path / "corpus"
    write_lines(root / "train.en", ["a", "b"])
    write_lines(root / "train.de", ["A", "B"])
    write_lines(root / "extra.en", ["c", "d"])
    write_lines(root / "extra.de", ["C"])
    cfg = make_cfg(train_splits=["train", "extra"], max_train_pairs=2)
    with pytest.raises(DataError, match=r"split 'extra' is not line-aligned"):
        read_parallel_text(cfg, "train")


def test_a_capped_aligned_corpus_still_reads(make_cfg, tmp_path):
    root = tmp_path / "corpus"
    write_lines(root / "train.en", ["a", "b", "c"])
    (root / "train.de").write_bytes(b"A\nB\nC")  # no newline after the last line
    assert read_parallel_text(make_cfg(max_train_pairs=2), "train") == (["a", "b"], ["A", "B"])


def test_a_corrupt_gz_is_a_one_line_data_error(make_cfg, tmp_path):
    root = tmp_path / "corpus"
    write_lines(root / "train.en", ["a man.", "the dog."] * 50)
    path = write_lines(root / "train.de.gz", ["ein mann.", "der hund."] * 50)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF  # the deflate stream's first byte: zlib.error, not a CRC mismatch
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"^cannot read .*train\.de\.gz: ") as e:
        read_parallel_text(make_cfg(), "train")
    assert "\n" not in str(e.value)


def _hub_folder(tmp_path: Path, schema: str) -> Path:
    """A dataset folder that datasets.load_dataset reads like a hub repo: one file per split."""
    folder = tmp_path / f"hub_{schema}"
    folder.mkdir()
    for split, n, seed in (("train", 50, 0), ("validation", 10, 1)):
        src, tgt = synthetic_pairs(n, seed)
        if schema == "translation":  # WMT14: {"translation": {"en": ..., "de": ...}}
            rows = [{"translation": {"de": t, "en": s}} for s, t in zip(src, tgt)]
        else:  # bentrevett/multi30k: flat "en" and "de" columns
            rows = [{"en": s, "de": t} for s, t in zip(src, tgt)]
        lines = [json.dumps(r, ensure_ascii=False) for r in rows]
        write_lines(folder / f"{split}.jsonl", lines)
    return folder


@pytest.mark.parametrize("schema", ["translation", "flat"])
@pytest.mark.parametrize("streaming", [False, True])
def test_hub_path_on_local_dataset(make_cfg, tmp_path, schema, streaming):
    folder = _hub_folder(tmp_path, schema)
    cfg = make_cfg(
        source="hub",
        root="/nonexistent",
        hub_dataset=str(folder),
        hub_splits={"train": "train", "valid": "validation"},
        streaming=streaming,
        max_train_pairs=20,
    )
    assert read_parallel_text(cfg, "valid") == synthetic_pairs(10, 1)
    src, tgt = read_parallel_text(cfg, "train")
    full_src, full_tgt = synthetic_pairs(50, 0)
    assert (src, tgt) == (full_src[:20], full_tgt[:20])


def test_hub_errors_are_data_errors(make_cfg, tmp_path):
    folder = _hub_folder(tmp_path, "flat")
    cfg = make_cfg(source="hub", hub_dataset=str(folder), hub_splits={"train": "train"})
    with pytest.raises(DataError, match="no entry in data.hub_splits"):
        read_parallel_text(cfg, "valid")
    with pytest.raises(DataError, match="expected a 'translation' column or columns 'en' and 'fr'"):
        read_parallel_text(replace(cfg, tgt_lang="fr"), "train")
    with pytest.raises(DataError, match="could not load hub dataset(.|\n)*HF_HUB_OFFLINE=1"):
        read_parallel_text(replace(cfg, hub_dataset=str(tmp_path / "missing")), "train")


@pytest.mark.parametrize("streaming", [False, True])
def test_hub_languages_not_in_the_translation_column_are_a_data_error(
    make_cfg, tmp_path, streaming
):
    """WMT14's schema with a language its configuration lacks (data=wmt14_en_de data.tgt_lang=fr):
    one line naming the languages found, not a KeyError or a datasets ValueError."""
    folder = _hub_folder(tmp_path, "translation")
    cfg = make_cfg(
        source="hub", hub_dataset=str(folder), hub_splits={"train": "train"}, streaming=streaming,
        tgt_lang="fr",
    )  # fmt: skip
    with pytest.raises(DataError, match=r"languages \['de', 'en'\].*data.tgt_lang"):
        read_parallel_text(cfg, "train")


@pytest.mark.parametrize("schema", ["translation", "flat"])
@pytest.mark.parametrize("streaming", [False, True])
def test_hub_rows_without_a_side_read_as_empty_lines(make_cfg, tmp_path, schema, streaming):
    """A null side in a hub row reads as an empty line, as in a local file (the training filter
    drops it), instead of a None that crashed the encoding of an evaluation split."""
    folder = tmp_path / "hub_nulls"
    folder.mkdir()
    pairs = [("a b", "c d"), (None, "e"), ("f", None)]
    if schema == "translation":
        rows = [{"translation": {"en": s, "de": t}} for s, t in pairs]
    else:
        rows = [{"en": s, "de": t} for s, t in pairs]
    write_lines(folder / "validation.jsonl", [json.dumps(r) for r in rows])
    cfg = make_cfg(
        source="hub", hub_dataset=str(folder), hub_splits={"valid": "validation"},
        streaming=streaming,
    )  # fmt: skip
    assert read_parallel_text(cfg, "valid") == (["a b", "", "f"], ["c d", "e", ""])


def test_real_multi30k_val(shared_data, make_cfg):
    cfg = make_cfg(root=str(shared_data / "multi30k"))
    src, tgt = read_parallel_text(cfg, "val")
    assert len(src) == len(tgt) == 1014
    assert all(s.strip() for s in src) and all(t.strip() for t in tgt)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_line_reader_across_small_blocks(tmp_path, suffix):
    # Blocks of 7 bytes: lines span blocks, CRLF endings split between blocks, a last line without
    # a newline, empty lines, multi-byte characters cut by block ends.
    lines = ["", "Grüße aus Köln", "a\r", "\u2028x\x0cy", "", "zz" * 20, "€€€", "last"]
    path = tmp_path / f"x.en{suffix}"
    data = "\n".join(lines).encode("utf-8")  # no final newline
    path.write_bytes(gzip.compress(data) if suffix else data)
    want = ["", "Grüße aus Köln", "a", "\u2028x\x0cy", "", "zz" * 20, "€€€", "last"]
    with LineReader(path, block_bytes=7) as reader:
        got = reader.take(3) + reader.take(2) + reader.take(100)
        assert reader.take(5) == [] and reader.taken == len(want)
    assert got == want == read_lines(path)


def test_invalid_utf8_line_counted_across_blocks(tmp_path):
    path = tmp_path / "x.en"
    path.write_bytes(b"one\ntwo\nthree\nfour\nfi\xffve\n")
    with pytest.raises(DataError, match=r"x\.en: invalid UTF-8 on line 5 \(byte 21:"):
        with LineReader(path, block_bytes=5) as reader:
            reader.take(10)


def test_chunks_are_aligned_and_capped(make_cfg, tiny_corpus):
    cfg = make_cfg(train_splits=["train", "valid"], max_train_pairs=410)
    chunks = list(iter_parallel_text(cfg, "train", chunk_pairs=64))
    assert [len(s) for s, _ in chunks] == [64] * 6 + [16, 10]  # a split's last chunk is shorter
    src = [line for s, _ in chunks for line in s]
    assert src == read_parallel_text(cfg, "train")[0]
    assert all(len(s) == len(t) for s, t in chunks)


def test_misaligned_files_found_while_streaming(make_cfg, tmp_path):
    root = tmp_path / "corpus"
    write_lines(root / "train.en", [f"s{i}" for i in range(100)])
    write_lines(root / "train.de.gz", [f"t{i}" for i in range(130)])
    with pytest.raises(DataError, match=r"train\.en has 100 lines but .*train\.de\.gz has 130"):
        list(iter_parallel_text(make_cfg(), "train", chunk_pairs=30))
