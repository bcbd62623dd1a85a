"""source=files: named file pairs under data.root, several references, misaligned pairs left out,
missing files refused before anything is written, held-out overlap dropped or refused, and the
data=wmt_news_en_de preset that uses them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.data import DataError, prepare_data, read_parallel_text
from rpr_nmt.data.file_pairs import count_lines, file_pairs
from rpr_nmt.data.held_out import training_fingerprint
from rpr_nmt.data.sources import TRAIN, source_fingerprint
from tests.data.conftest import synthetic_pairs, write_lines
from tests.forkrun import run_module

REPO = Path(__file__).resolve().parents[2]


def _quiet(_: str) -> None:
    pass


def write_set(root: Path, stem: str, src: list[str], tgt: list[str], ref: str = "") -> list[str]:
    """Write {stem}.en.gz and {stem}.{ref}de.gz; returns the pair as data.files names it."""
    names = [f"{stem}.en.gz", f"{stem}.{ref + '.' if ref else ''}de.gz"]
    write_lines(root / names[0], src)
    write_lines(root / names[1], tgt)
    return names


@pytest.fixture
def news(tmp_path):
    """tmp_path/corpus with two training sets, one of them with references refA and refB, and
    valid / test sets; returns (root, files) with files as data.files would list them."""
    root = tmp_path / "corpus"
    a_src, a_tgt = synthetic_pairs(40, seed=1)
    b_src, b_tgt = synthetic_pairs(30, seed=2)
    valid = synthetic_pairs(10, seed=3)
    test = synthetic_pairs(10, seed=4)
    files = {
        "train": [
            write_set(root, "set2008", a_src, a_tgt),
            write_set(root, "set2021.en-de", b_src, b_tgt, ref="refA"),
        ],
        "valid": [write_set(root, "dev", *valid)],
        "test": [write_set(root, "eval", *test)],
    }
    write_set(root, "set2021.en-de", b_src, [t.lower() for t in b_tgt], ref="refB")
    write_set(root, "unlisted", *synthetic_pairs(5, seed=5))  # in the folder, named nowhere
    return root, files


def files_cfg(make_cfg, root: Path, files: dict, **overrides):
    return make_cfg(source="files", root=str(root), files=files, **overrides)


def test_the_named_pairs_are_read_in_order_and_nothing_else(make_cfg, news):
    root, files = news
    cfg = files_cfg(make_cfg, root, files)
    src, tgt = read_parallel_text(cfg, TRAIN)
    a_src, a_tgt = synthetic_pairs(40, seed=1)
    b_src, b_tgt = synthetic_pairs(30, seed=2)
    assert (src, tgt) == (a_src + b_src, a_tgt + b_tgt)
    assert read_parallel_text(cfg, "valid") == synthetic_pairs(10, seed=3)
    before = source_fingerprint(cfg, TRAIN)
    write_set(root, "newer", *synthetic_pairs(5, seed=6))  # a new file in the folder
    assert source_fingerprint(cfg, TRAIN) == before


def test_a_set_with_several_references_is_read_with_the_one_named(make_cfg, news):
    root, files = news
    ref_b = [files["train"][0], ["set2021.en-de.en.gz", "set2021.en-de.refB.de.gz"]]
    cfg_a = files_cfg(make_cfg, root, files)
    cfg_b = files_cfg(make_cfg, root, {**files, "train": ref_b})
    b_src, b_tgt = synthetic_pairs(30, seed=2)
    src, tgt = read_parallel_text(cfg_b, TRAIN)
    assert (src[40:], tgt[40:]) == (b_src, [t.lower() for t in b_tgt])
    assert read_parallel_text(cfg_a, TRAIN)[1][40:] == b_tgt
    # The file list is part of the cache key: naming another reference prepares again.
    assert source_fingerprint(cfg_a, TRAIN) != source_fingerprint(cfg_b, TRAIN)


def test_a_training_pair_of_unequal_line_counts_is_left_out_and_logged(make_cfg, news):
    root, files = news
    src, tgt = synthetic_pairs(20, seed=7)
    short = write_set(root, "short", src, tgt[:-1])
    cfg = files_cfg(make_cfg, root, {**files, "train": [*files["train"], short]})
    lines: list[str] = []
    data = prepare_data(cfg, splits=["train"], log=lines.append)
    assert data.cleaning.read == 70  # 40 + 30: the 20 pairs of `short` are not read
    assert [x for x in lines if "left out" in x] == [
        "[data] left out short.en.gz / short.de.gz of data.files.train: 20 and 19 lines, "
        "not line-aligned"
    ]
    # Outside the training splits a misaligned pair is refused, as a misaligned local split is.
    cfg = files_cfg(make_cfg, root, {**files, "valid": [short]})
    with pytest.raises(DataError, match=r"split 'valid' is not line-aligned: .*short\.en\.gz"):
        read_parallel_text(cfg, "valid")


@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_a_missing_file_is_one_line_before_anything_is_written(make_cfg, news, split):
    root, files = news
    (root / files[split][0][1]).unlink()
    cfg = files_cfg(make_cfg, root, files)
    with pytest.raises(DataError) as e:
        prepare_data(cfg, splits=["train", "valid"], log=_quiet)
    assert "\n" not in str(e.value)
    assert str(e.value).startswith(f"missing data file {root / files[split][0][1]}: ")
    assert f"data.files.{split}" in str(e.value)
    assert not Path(cfg.cache_dir).exists()


def test_bad_entries_of_data_files_are_named(make_cfg, news):
    root, files = news
    with pytest.raises(DataError, match=r"data\.files\.train has the entry \['set2008\.en\.gz'\]"):
        file_pairs(files_cfg(make_cfg, root, {"train": [["set2008.en.gz"]]}), "train")
    with pytest.raises(DataError, match=r"split 'dev' has no entry in data\.files"):
        read_parallel_text(files_cfg(make_cfg, root, files), "dev")


def _overlapping_corpus(root: Path, files: dict) -> dict:
    """A training set with 2 pairs sharing a sentence with valid (source) or test (target, with
    other white space) and 3 repeats of an earlier pair."""
    valid_src = synthetic_pairs(10, seed=3)[0]
    test_tgt = synthetic_pairs(10, seed=4)[1]
    src, tgt = synthetic_pairs(12, seed=8)
    src += [valid_src[4], test_tgt[7].lower(), src[0], src[1], src[1]]
    tgt += [valid_src[4].upper(), f"  {test_tgt[7]} ", tgt[0], tgt[1], tgt[1]]
    return {**files, "train": [*files["train"], write_set(root, "mixed", src, tgt)]}


def test_training_pairs_sharing_a_held_out_sentence_are_dropped_and_counted(make_cfg, news):
    root, files = news
    files = _overlapping_corpus(root, files)
    cfg = files_cfg(make_cfg, root, files, held_out_overlap="drop", deduplicate=True)
    lines: list[str] = []
    report = prepare_data(cfg, splits=["train"], log=lines.append).cleaning
    assert (report.read, report.overlap, report.duplicates) == (87, 2, 3)
    assert report.kept == 82
    assert "2 sharing a sentence with the valid or test split, 3 duplicates" in "".join(lines)
    # "keep" checks nothing: every corpus of before the setting keeps its cache keys.
    kept = files_cfg(make_cfg, root, files, deduplicate=True)
    assert training_fingerprint(kept) == source_fingerprint(kept, TRAIN)
    assert training_fingerprint(cfg) != training_fingerprint(kept)
    report = prepare_data(kept, splits=["train"], log=_quiet).cleaning
    assert (report.overlap, report.duplicates, report.kept) == (0, 3, 84)


def test_a_new_test_set_changes_which_training_pairs_are_dropped(make_cfg, news):
    root, files = news
    cfg = files_cfg(make_cfg, root, _overlapping_corpus(root, files), held_out_overlap="drop")
    before = training_fingerprint(cfg)
    write_lines(root / files["test"][0][1], synthetic_pairs(10, seed=9)[1])
    assert training_fingerprint(cfg) != before


def test_refuse_names_the_first_pair_sharing_a_held_out_sentence(make_cfg, news):
    root, files = news
    cfg = files_cfg(make_cfg, root, _overlapping_corpus(root, files), held_out_overlap="refuse")
    valid_src = synthetic_pairs(10, seed=3)[0]
    with pytest.raises(DataError) as e:
        prepare_data(cfg, splits=["train"], log=_quiet)
    assert str(e.value).startswith(
        f"training pair 83 shares the sentence {valid_src[4]!r} with split 'valid'"
    )
    assert not list((Path(cfg.cache_dir) / "bpe").glob("*.model"))
    with pytest.raises(DataError, match=r"data\.held_out_overlap='yes' must be keep, drop or"):
        prepare_data(files_cfg(make_cfg, root, files, held_out_overlap="yes"), splits=["train"])


def _news_preset(*overrides: str):
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        return to_job_config(compose("train", overrides=["data=wmt_news_en_de", *overrides])).data


def test_the_news_preset_names_its_files():
    cfg = _news_preset("data.root=/nowhere")
    assert (cfg.source, cfg.deduplicate, cfg.held_out_overlap) == ("files", True, "drop")
    train = cfg.files["train"]
    assert len(train) == 17
    assert all(src.endswith(".en.gz") and tgt.endswith(".de.gz") for src, tgt in train)
    names = " ".join(name for pair in train for name in pair)
    for left_out in ("newssyscomb2009", "newstestB2020", "generaltest2023", "wmttest2024",
                     "newstest2013", "newstest2014", "refB", "refC", "refD"):  # fmt: skip
        assert left_out not in names
    assert cfg.files["valid"] == [["newstest2013.en.gz", "newstest2013.de.gz"]]
    assert cfg.files["test"] == [["newstest2014.en.gz", "newstest2014.de.gz"]]


def test_the_news_preset_files_are_there(shared_data):
    if not (shared_data / "wmt_news_ende").is_dir():
        pytest.skip(f"no wmt_news_ende/ in {shared_data}")
    cfg = _news_preset(f"data.root={shared_data / 'wmt_news_ende'}")
    counts = {
        split: [(count_lines(p.src), count_lines(p.tgt)) for p in file_pairs(cfg, split)]
        for split in ("train", "valid", "test")
    }
    assert all(a == b for pairs in counts.values() for a, b in pairs)
    assert sum(a for a, _ in counts["train"]) == 36464  # SOURCE.md's line counts, summed
    assert (counts["valid"], counts["test"]) == ([(3000, 3000)], [(3003, 3003)])


def test_the_train_command_refuses_a_missing_file_in_one_line(tmp_path):
    env = {**os.environ, "RPR_NMT_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    run_dir = tmp_path / "run"
    args = [
        "data=wmt_news_en_de", f"data.root={tmp_path / 'empty'}", "model=transformer_tiny",
        "train.device=cpu", f"hydra.run.dir={run_dir}",  # precision auto, as a user runs it
    ]  # fmt: skip
    out = run_module("rpr_nmt.cli.train", args, cwd=REPO, env=env)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        f"rpr-nmt-train: error: missing data file {tmp_path / 'empty' / 'news-test2008.en.gz'}: "
        "data.files.train names it but it is not there; set data.root to the folder holding it "
        "(data=wmt_news_en_de)"
    ]
    assert not run_dir.exists() and not (tmp_path / "cache").exists()
