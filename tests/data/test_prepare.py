"""prepare_data: encoded splits, their on-disk cache, and cache keys that follow the inputs."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
from dataclasses import replace

import numpy as np
import pytest

from rpr_nmt.data import EncodedCorpus, Ragged, prepare_data, read_parallel_text
from rpr_nmt.data.encode import encode_corpus
from tests.data.conftest import synthetic_pairs, write_lines
from tests.data.test_cache import dead_pid


def _quiet(_: str) -> None:
    pass


def test_encodes_splits_like_the_tokenizer(make_cfg, tiny_corpus):
    cfg = make_cfg()
    data = prepare_data(cfg, splits=["train", "valid"], log=_quiet)
    assert set(data.splits) == {"train", "valid"}
    valid = data.splits["valid"]
    src, tgt = read_parallel_text(cfg, "valid")
    assert len(valid) == 30
    for i in (0, 7, 29):
        assert valid.src[i].tolist() == data.tokenizer.encode(src[i])
        assert valid.tgt[i].tolist() == data.tokenizer.encode(tgt[i])
    assert valid.src_lengths.tolist() == [len(data.tokenizer.encode(s)) for s in src]


def test_encoded_cache_reused(make_cfg, tiny_corpus):
    cfg = make_cfg()
    first = prepare_data(cfg, splits=["train", "test"], log=_quiet)
    assert first.reused == {"bpe": False, "train": False, "test": False}
    files = sorted((tiny_corpus.parent / "cache" / "encoded").glob("*/*.npy"))
    assert len(files) == 8  # two folders of src, src_offsets, tgt, tgt_offsets
    mtimes = [f.stat().st_mtime_ns for f in files]
    lines: list[str] = []
    second = prepare_data(cfg, splits=["train", "test"], log=lines.append)
    assert second.reused == {"bpe": True, "train": True, "test": True}
    assert [f.stat().st_mtime_ns for f in files] == mtimes
    assert any("cached" in line for line in lines)
    assert second.cleaning == first.cleaning
    for split in ("train", "test"):
        a, b = first.splits[split], second.splits[split]
        assert np.array_equal(a.src.flat, b.src.flat) and np.array_equal(
            a.tgt.offsets, b.tgt.offsets
        )


def test_cache_follows_content_and_filters(make_cfg, tiny_corpus):
    cfg = make_cfg()
    prepare_data(cfg, splits=["train", "valid"], log=_quiet)
    # A changed filter re-encodes train only; the BPE model does not depend on it.
    again = prepare_data(replace(cfg, max_length_ratio=2.0), splits=["train", "valid"], log=_quiet)
    assert again.reused == {"bpe": True, "train": False, "valid": True}
    # Changed validation text re-encodes that split.
    src, tgt = synthetic_pairs(30, 5)
    write_lines(tiny_corpus / "valid.en", src)
    write_lines(tiny_corpus / "valid.de", tgt)
    again = prepare_data(cfg, splits=["valid"], log=_quiet)
    assert again.reused == {"bpe": True, "valid": False}
    assert again.splits["valid"].src[0].tolist() == again.tokenizer.encode(src[0])


def test_a_tilde_in_root_and_cache_dir_is_the_home_folder(make_cfg, tiny_corpus, monkeypatch):
    # A `~` the shell did not expand made a folder named `~` in the current folder.
    home, cwd = tiny_corpus.parent, tiny_corpus.parent / "cwd"
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    first = prepare_data(make_cfg(root="~/corpus", cache_dir="~/cache"), splits=["train"],
                         log=_quiet)  # fmt: skip
    assert first.reused == {"bpe": False, "train": False}
    assert list(cwd.iterdir()) == [] and len(list((home / "cache" / "bpe").iterdir())) == 1
    # The same cache entries as the spelled-out paths: no key holds the path.
    again = prepare_data(make_cfg(), splits=["train"], log=_quiet)
    assert again.reused == {"bpe": True, "train": True}


def test_corpus_save_load_and_select(tmp_path):
    corpus = EncodedCorpus(
        Ragged.from_lists([[5, 6], [7], [8, 9, 10]]), Ragged.from_lists([[4], [], [11, 12]])
    )
    corpus.save(tmp_path / "c")
    loaded = EncodedCorpus.load(tmp_path / "c")
    assert isinstance(loaded.src.flat, np.memmap) and loaded.src.offsets.dtype == np.int64
    assert [r.tolist() for r in loaded.src] == [[5, 6], [7], [8, 9, 10]]
    assert loaded.tgt_lengths.tolist() == [1, 0, 2]
    picked = loaded.select(np.array([2, 0]))
    assert [r.tolist() for r in picked.src] == [[8, 9, 10], [5, 6]]
    assert [r.tolist() for r in picked.tgt] == [[11, 12], [4]]
    assert len(loaded.select(np.array([True, False, True]))) == 2


def test_real_multi30k_val_prepared(shared_data, make_cfg):
    # Small BPE on a slice of the real corpus: train is capped, val is encoded whole.
    cfg = make_cfg(
        name="multi30k_en_de",
        root=str(shared_data / "multi30k"),
        max_train_pairs=2000,
        vocab_size=500,
        max_tokens_per_sentence=128,
    )
    data = prepare_data(cfg, splits=["train", "val"], log=_quiet)
    assert len(data.splits["val"]) == 1014
    assert data.cleaning.read == 2000 and len(data.splits["train"]) == data.cleaning.kept
    src, _ = read_parallel_text(cfg, "val")
    assert data.tokenizer.decode(data.splits["val"].src[0]) == src[0]


def test_prepare_from_hub_schema_dataset(make_cfg, tmp_path):
    # The hub code path end to end, on a local folder of WMT14-schema files (no network).
    folder = tmp_path / "wmt_like"
    for split, n, seed in (("train", 300, 0), ("test", 20, 1)):
        src, tgt = synthetic_pairs(n, seed)
        rows = [json.dumps({"translation": {"en": s, "de": t}}) for s, t in zip(src, tgt)]
        write_lines(folder / f"{split}.jsonl", rows)
    cfg = make_cfg(
        source="hub",
        hub_dataset=str(folder),
        hub_splits={"train": "train", "test": "test"},
        streaming=True,
        max_train_pairs=250,
    )
    data = prepare_data(cfg, splits=["train", "test"], log=_quiet)
    assert data.cleaning.read == 250 and len(data.splits["test"]) == 20
    assert prepare_data(cfg, splits=["train", "test"], log=_quiet).reused["train"]


def test_npz_caches_of_the_old_format_are_not_read(make_cfg, tiny_corpus):
    # An .npz of the old layout at any name stays untouched and unread; the split is encoded again.
    cfg = make_cfg()
    first = prepare_data(cfg, splits=["valid"], log=_quiet)
    encoded = tiny_corpus.parent / "cache" / "encoded"
    (folder,) = [p for p in encoded.iterdir() if p.is_dir()]
    shutil.rmtree(folder)
    bogus = EncodedCorpus(Ragged.from_lists([[7]]), Ragged.from_lists([[7]]))
    buf = io.BytesIO()
    np.savez(buf, src=bogus.src.flat, src_offsets=bogus.src.offsets, tgt=bogus.tgt.flat,
             tgt_offsets=bogus.tgt.offsets)  # fmt: skip
    old = encoded / f"{folder.name}.npz"
    old.write_bytes(buf.getvalue())
    lines: list[str] = []
    again = prepare_data(cfg, splits=["valid"], log=lines.append)
    assert again.reused == {"bpe": True, "valid": False} and old.is_file()
    assert any("1 encoded caches of the old .npz format" in line for line in lines)
    assert np.array_equal(again.splits["valid"].src.flat, first.splits["valid"].src.flat)


def test_interrupted_writers_leave_nothing_behind(make_cfg, tiny_corpus):
    cfg = make_cfg()
    encoded = tiny_corpus.parent / "cache" / "encoded"
    encoded.mkdir(parents=True)
    host, dead = socket.gethostname(), dead_pid()
    stale_folder = encoded / f".tiny-train-vabc.owner={host}={dead}=x1.tmp"
    (stale_folder).mkdir()
    (stale_folder / "src.npy").write_bytes(b"partial")
    stale_spool = encoded / f".tiny-train-spool.owner={host}={dead}=x2.tmp"
    stale_spool.write_bytes(b"partial")
    live = encoded / f".tiny-valid-vabc.owner={host}={os.getpid()}=x3.tmp"
    live.mkdir()
    lines: list[str] = []
    prepare_data(cfg, splits=["train"], log=lines.append)
    assert not stale_folder.exists() and not stale_spool.exists() and live.is_dir()
    assert sum("left by an interrupted writer" in line for line in lines) == 2

    # A writer that fails half-way removes its temporary folder and installs nothing.
    def broken(texts, num_threads=None):
        raise RuntimeError("killed")

    tok_cfg = make_cfg(max_tokens_per_sentence=100)  # another key: encodes again
    data = prepare_data(tok_cfg, splits=["train"], log=_quiet)
    before = sorted(p.name for p in encoded.iterdir())
    data.tokenizer.encode_batch = broken
    with pytest.raises(RuntimeError, match="killed"):
        encode_corpus(data.tokenizer, [(["a"], ["b"])], encoded / "x", threads=1)
    assert sorted(p.name for p in encoded.iterdir()) == before


def test_empty_split_encodes_to_empty_arrays(make_cfg, tiny_corpus):
    write_lines(tiny_corpus / "empty.en", [])
    write_lines(tiny_corpus / "empty.de", [])
    data = prepare_data(make_cfg(), splits=["empty"], log=_quiet)
    again = prepare_data(make_cfg(), splits=["empty"], log=_quiet)
    assert again.reused["empty"] and len(data.splits["empty"]) == len(again.splits["empty"]) == 0
    assert again.splits["empty"].src.offsets.tolist() == [0]
