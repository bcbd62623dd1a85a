"""rpr-nmt-report --by-length: BLEU per source-length bucket from a run's own files."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from rpr_nmt.cli.report import main
from rpr_nmt.config import DataConfig
from rpr_nmt.data import Tokenizer
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.report.lengths import (
    BucketScores,
    bucket_labels,
    bucket_of,
    length_options,
    mean_differences,
    plot_by_length,
)

from .run_folders import write_run_folder

WORDS = "a man woman dog child rides runs sits on the red blue big small bike street park".split()


def test_buckets():
    bounds = (1, 11, 16, 31)
    assert bucket_labels(bounds) == ["1-10", "11-15", "16-30", "31+"]
    assert [bucket_of(n, bounds) for n in (0, 1, 10, 11, 15, 16, 30, 31, 99)] == [
        0, 0, 0, 1, 1, 2, 2, 3, 3,
    ]  # fmt: skip


def test_by_length_scores_each_bucket_from_the_run_files(tmp_path, capsys):
    # Short sources are translated perfectly, long ones not at all: the buckets must show it.
    short = [" ".join(WORDS[i : i + 5]) for i in range(8)]
    long = [" ".join(WORDS * 2)[: 60 + i] for i in range(4)]
    data = tmp_path / "corpus"
    data.mkdir()
    (data / "test.en").write_text("\n".join(short + long) + "\n")
    (data / "test.de").write_text("\n".join(short + long) + "\n")
    proto = train_bpe(short + long + WORDS, vocab_size=60, character_coverage=1.0)
    tokenizer = Tokenizer.from_proto(proto)
    assert max(len(tokenizer.encode(s)) for s in short) <= 10
    assert min(len(tokenizer.encode(s)) for s in long) >= 16

    data_cfg = asdict(DataConfig(root=str(data), test_split="test", max_train_source_tokens=10))
    config = {"data": data_cfg, "model": {"max_relative_position": 4, "relative_keys": True}}
    run = write_run_folder(
        tmp_path / "sweep", ["positions=relative"], config, {"test_bleu": 50.0},
        hyps=short + ["x"] * len(long), bpe=proto,
    )  # fmt: skip

    assert main(["--by-length", str(tmp_path / "sweep")]) == 0
    written = capsys.readouterr().out.splitlines()[-1]  # every file it wrote, named
    named = sorted(Path(name).name for name in written.removeprefix("written: ").split(", "))
    assert named == sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_file())
    assert "length_report.md" in named and "length_options.json" in named
    table = (tmp_path / "sweep" / "length_report.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| Shaw k = 4, a^K only |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "1"  # one seed
    assert cells[2] == "100.0"  # bucket 1-10: all 8 short sentences, exact
    assert "0.0" in cells[4:]  # the long sentences' bucket scores 0
    assert "(8)" in table.splitlines()[2]
    assert (tmp_path / "sweep" / "bleu_by_length.png").read_bytes()[:4] == b"\x89PNG"

    # Pooling a second split and choosing the buckets: 8 + 2 short, 4 + 1 long sentences.
    (data / "val.en").write_text("\n".join(short[:2] + long[:1]) + "\n")
    (data / "val.de").write_text("\n".join(short[:2] + long[:1]) + "\n")
    (run / "hyp_val.txt").write_text("\n".join(short[:2] + long[:1]) + "\n")
    pooled = ["--by-length", "--bounds", "1,16", "--splits", "val,test", str(tmp_path / "sweep")]
    assert main(pooled) == 0
    table = (tmp_path / "sweep" / "length_report.md").read_text()
    assert table.startswith("val + test BLEU by source length")
    head, _, row = table.splitlines()[2:5]
    assert "1-15 (10)" in head and "16+ (5)" in head
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "100.0" and float(cells[3]) < 100.0

    # Rebuilt without options (as `make results` does): the same buckets and splits as before.
    assert main(["--by-length", str(tmp_path / "sweep")]) == 0
    assert (tmp_path / "sweep" / "length_report.md").read_text() == table
    (tmp_path / "sweep" / "length_options.json").write_text("{bounds: 1")
    assert main(["--by-length", str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert "length_options.json: not JSON" in err and "--bounds" in err
    (tmp_path / "sweep" / "length_options.json").write_text("[1, 16]")
    assert main(["--by-length", str(tmp_path / "sweep")]) == 2
    assert "length_options.json: not an object" in capsys.readouterr().err


def test_the_second_panel_gives_each_setting_against_the_baseline_bucket_by_bucket(tmp_path):
    def seeds(*bleus):  # one BucketScores per seed over buckets 1-10, 11+
        return [BucketScores(["1-10", "11+"], [5, 3], list(b)) for b in bleus]

    results = {
        "sinusoid": seeds((40.0, 20.0), (42.0, 22.0)),  # means 41, 21
        "RoPE": seeds((41.0, 24.0), (43.0, 26.0)),  # means 42, 25
        "ALiBi": seeds((39.0, None), (40.0, None)),  # no sentence past 10 in its runs
    }
    assert mean_differences(results, "sinusoid") == {"RoPE": [1.0, 4.0], "ALiBi": [-1.5, None]}
    for baseline in ("sinusoid", None):  # two panels, or one without a baseline
        plot_by_length(results, tmp_path / "plot.png", cap=10, baseline=baseline)
        assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_bounds_must_increase(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--by-length", "--bounds", "1,16,11", "somewhere"])
    assert exit_info.value.code == 2
    assert "bounds must be increasing" in capsys.readouterr().err


@pytest.mark.parametrize(
    "option, needs",
    [("--bounds=1,11", "--by-length"), ("--splits=val", "--by-length"), ("--into=x", "--collect")],
)
def test_an_option_without_the_one_it_goes_with_is_refused(option, needs, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([option, "somewhere"])  # else ignored: a plain report, other buckets than asked for
    assert exit_info.value.code == 2
    assert f"goes with {needs}" in capsys.readouterr().err


def test_a_missing_corpus_is_a_clear_error(tmp_path, capsys):
    data_cfg = asdict(DataConfig(root=str(tmp_path / "nowhere"), test_split="test"))
    config = {"data": data_cfg, "model": {"max_relative_position": 4, "relative_keys": True}}
    proto = train_bpe(WORDS * 3, vocab_size=30, character_coverage=1.0)
    write_run_folder(
        tmp_path / "sweep", ["positions=relative"], config, {"test_bleu": 50.0},
        hyps=["a man"], bpe=proto,
    )  # fmt: skip
    assert main(["--by-length", str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert f"data.root is {tmp_path / 'nowhere'} here, not a folder" in err
    assert "set RPR_NMT_DATA to the folder holding nowhere/" in err
    assert not (tmp_path / "sweep" / "report.md").exists()  # nothing written
    (tmp_path / "nowhere").mkdir()  # the folder without the split's files
    assert main(["--by-length", str(tmp_path / "sweep")]) == 2
    assert "missing data file for split 'test'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "option, said",
    [
        ("--bounds=12,20", "start at 1"),  # was '12-19 (887)', 312 of them shorter than 12
        ("--bounds=5", "start at 1"),  # was '5+ (1000)'
        ("--splits=val,val", "distinct splits"),  # was every val sentence counted twice
        ("--splits=,", "distinct splits"),  # was the saved splits, silently
    ],
)
def test_bounds_from_above_1_and_a_split_given_twice_are_refused(option, said, capsys):
    # Probe K2.
    with pytest.raises(SystemExit) as exit_info:
        main(["--by-length", option, "somewhere"])
    assert exit_info.value.code == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize(
    "saved, said",
    [
        ('{"bounds": [12, 20]}', "start at 1"),
        ('{"bounds": [16, 1]}', "start at 1"),  # was a '16-0 (0)' bucket
        ('{"bounds": "abc"}', "start at 1"),  # was a TypeError traceback
        ('{"splits": "val"}', "not a list of distinct split names"),  # was splits 'v', 'a', 'l'
    ],
)
def test_saved_length_options_out_of_shape_are_named(saved, said, tmp_path):
    # Probe K2: length_options.json is reused by `make results` without --bounds/--splits.
    (tmp_path / "length_options.json").write_text(saved)
    with pytest.raises(ValueError, match=said) as error:
        length_options(tmp_path, None, None)
    assert "length_options.json" in str(error.value) and "delete it" in str(error.value)


def test_bounds_past_the_longest_sentence_are_refused_before_anything_is_written(tmp_path, capsys):
    # A last bucket past every sentence printed an empty column ('200+ (0)') and plotted nothing.
    short = [" ".join(WORDS[i : i + 5]) for i in range(8)]
    data = tmp_path / "corpus"
    data.mkdir()
    for lang in ("en", "de"):
        (data / f"test.{lang}").write_text("\n".join(short) + "\n")
    proto = train_bpe(short + WORDS, vocab_size=60, character_coverage=1.0)
    longest = max(len(Tokenizer.from_proto(proto).encode(s)) for s in short)
    config = {
        "data": asdict(DataConfig(root=str(data), test_split="test")),
        "model": {"max_relative_position": 4, "relative_keys": True},
    }
    sweep = tmp_path / "sweep"
    write_run_folder(
        sweep, ["positions=relative"], config, {"test_bleu": 50.0}, hyps=short, bpe=proto
    )
    before = sorted(p.name for p in sweep.iterdir())
    assert main(["--by-length", "--bounds", f"1,{longest},200", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"no test sentence has 200 BPE tokens or more (the longest has {longest})" in err
    assert sorted(p.name for p in sweep.iterdir()) == before  # nothing written
    assert main(["--by-length", "--bounds", f"1,{longest}", str(sweep)]) == 0  # the longest: fine
