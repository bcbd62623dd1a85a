"""scripts/export_pairs.py: the training pairs after the text filters, in order; valid and test as
read; --as renames; bad input is exit status 2 with nothing written."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data.conftest import write_lines

from ..conftest import REPO, load_script

export = load_script("export_pairs")

# (source, target) training pairs and what the text filters do with them.
TRAIN = [
    ("A dog runs.", "EIN HUND LÄUFT ."),  # kept
    ("", "LEER ."),  # empty source
    ("Why?", "WARUM ANDERS ."),  # source is a valid sentence (held_out_overlap=drop)
    ("A dog runs.", "EIN HUND LÄUFT ."),  # a repeat of the first pair (deduplicate=true)
    ("   ", "NUR LEERZEICHEN ."),  # whitespace-only source
    ("A cat sits.", "EINE KATZE SITZT ."),  # kept
    ("A dog runs.", "EIN ANDERER HUND ."),  # kept: the same source, another target
    ("Something else.", "  Warum?  "),  # target, stripped, is a test sentence
    ("Two men walk.", "ZWEI MÄNNER GEHEN ."),  # kept
]
KEPT = [TRAIN[0], TRAIN[5], TRAIN[6], TRAIN[8]]
VALID = (["Why?", "Hello there."], ["Wieso?", "Hallo ."])
TEST = (["Yes.", "No."], ["Warum?", "Nein ."])


@pytest.fixture
def corpus(tmp_path) -> Path:
    """tmp_path/corpus with {train,valid,test}.{en,de}.gz; returns the folder."""
    root = tmp_path / "corpus"
    for split, (src, tgt) in (("train", list(zip(*TRAIN))), ("valid", VALID), ("test", TEST)):
        write_lines(root / f"{split}.en.gz", src)
        write_lines(root / f"{split}.de.gz", tgt)
    return root


def overrides(root: Path, *extra: str) -> list[str]:
    return [
        "data=local", f"data.root={root}", "data.deduplicate=true",
        "data.held_out_overlap=drop", *extra,
    ]  # fmt: skip


def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]


def pairs(out: Path, name: str) -> list[tuple[str, str]]:
    return list(zip(read_gz(out / f"{name}.en.gz"), read_gz(out / f"{name}.de.gz")))


@pytest.mark.parametrize(
    ("cap", "kept"), [(None, KEPT), (4, KEPT[:1])], ids=["all", "max_train_pairs=4"]
)
def test_training_pairs_are_those_left_by_the_text_filters_in_order(
    tmp_path, corpus, capsys, cap, kept
):
    out = tmp_path / "out"
    extra = [] if cap is None else [f"data.max_train_pairs={cap}"]
    assert export.main([str(out), *overrides(corpus, *extra)]) == 0
    assert pairs(out, "train") == kept
    assert pairs(out, "valid") == list(zip(*VALID))  # as read, "Why?" included
    assert pairs(out, "test") == list(zip(*TEST))
    assert sorted(p.name for p in out.iterdir()) == [
        f"{s}.{lang}.gz" for s in ("test", "train", "valid") for lang in ("de", "en")
    ]
    printed = capsys.readouterr().out
    read = len(TRAIN) if cap is None else cap
    assert f"train: {len(kept)} pairs" in printed
    assert "valid: 2 pairs" in printed and "test: 2 pairs" in printed
    assert f"text filters removed {read - len(kept)} of the {read} training pairs" in printed
    assert "length filters NOT applied" in printed


def test_as_renames_the_files_from_the_command_line(tmp_path, corpus):
    out = tmp_path / "out"
    args = [str(out), *overrides(corpus), "--as", "valid=val", "--as", "test=test_2016_flickr"]
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "export_pairs.py"), *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        f"{s}.{lang}.gz" for s in ("test_2016_flickr", "train", "val") for lang in ("de", "en")
    ]
    assert pairs(out, "val") == list(zip(*VALID))
    assert pairs(out, "test_2016_flickr") == list(zip(*TEST))
    assert pairs(out, "train") == KEPT
    assert "-> val.*.gz" in done.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--as", "dev=val"], "unknown split 'dev'"),
        (["--as", "valid"], "NAME must be"),
        (["--as", "valid=test"], "would both be written as test"),
        (["data.held_out_overlap=refuse"], "held_out_overlap=refuse"),  # refused mid-export
        (["data.no_such_key=1"], "no_such_key"),
    ],
    ids=["unknown-split", "no-name", "collision", "refused-while-writing", "bad-override"],
)
def test_bad_input_is_exit_2_with_nothing_written(tmp_path, corpus, capsys, extra, message):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("earlier\n")
    assert export.main([str(out), *overrides(corpus), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert [p.name for p in out.iterdir()] == ["keep.txt"]  # no export, no temporary file


def test_an_out_dir_that_is_a_file_or_a_missing_corpus_file_is_refused(tmp_path, corpus, capsys):
    as_file = tmp_path / "out"
    as_file.write_text("not a folder\n")
    assert export.main([str(as_file), *overrides(corpus)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert as_file.read_text() == "not a folder\n"
    (corpus / "test.de.gz").unlink()
    missing = tmp_path / "new"
    assert export.main([str(missing), *overrides(corpus)]) == 2
    assert "test.de" in capsys.readouterr().err
    assert not missing.exists()
