"""Results kept as data: collect a sweep's artefacts, then regenerate its tables from them alone.

The example is a sweep as the trainer leaves it (two settings x two seeds, each run with its
checkpoint, logs and Hydra files) on a tiny corpus; the hypotheses are made up so that every
number in the tables is known: the k = 16 runs translate every sentence, the k = 0 runs lose
every second word of every sentence.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import yaml

from rpr_nmt.cli.report import main
from rpr_nmt.config import DataConfig
from rpr_nmt.data import Tokenizer
from rpr_nmt.data.bpe import train_bpe

from .run_folders import write_run_folder

WORDS = "a man woman dog child rides runs sits on the red blue big small bike street park".split()
SHORT = [" ".join(WORDS[i : i + 4]) for i in range(10)]
LONG = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(4)]
TEST = SHORT + LONG  # 10 sentences of about 4-8 BPE tokens, 4 of about 30


def lose_every_second_word(sentence: str) -> str:
    return " ".join(w for i, w in enumerate(sentence.split()) if i % 2 == 0)


def write_corpus(root: Path) -> None:
    root.mkdir(parents=True)
    for split, lines in (("test", TEST), ("valid", SHORT[:3])):
        for lang in ("en", "de"):  # the "translation" copies its input
            (root / f"{split}.{lang}").write_text("\n".join(lines) + "\n")


def write_run(sweep: Path, k: int, seed: int, bpe: bytes, test_bleu: float) -> Path:
    """A finished run folder as rpr-nmt-train writes it."""
    overrides = [f"model.max_relative_position={k}", f"train.seed={seed}"]
    data = asdict(DataConfig(test_split="test", valid_split="valid"))
    data["root"] = "${oc.env:RPR_NMT_DATA,data}/tiny"  # as configs/data/*.yaml name it
    model = {"max_relative_position": k, "relative_keys": True, "relative_values": True}
    config = {"data": data, "model": {**model, "sinusoidal": False}, "train": {"seed": seed}}
    summary = {"test_bleu": test_bleu, "test_chrf": test_bleu + 20, "valid_bleu": test_bleu}
    test_hyps = TEST if k else [lose_every_second_word(s) for s in TEST]
    run = write_run_folder(sweep, overrides, config, summary, hyps=test_hyps)
    (run / ".hydra" / "hydra.yaml").write_text("hydra: {}\n")
    (run / "hyp_valid.txt").write_text("\n".join(SHORT[:3]) + "\n")
    (run / "eval_test.json").write_text(json.dumps({"bleu": test_bleu}))
    (run / "train.log").write_text("log\n")
    (run / "checkpoints").mkdir()
    torch.save({"model": {}, "bpe_model": bpe}, run / "checkpoints" / "step_0000002.pt")
    (run / "checkpoints" / "last.pt").symlink_to("step_0000002.pt")
    return run


@pytest.fixture
def published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Tokenizer]:
    """(sweep folder, data root, BPE tokenizer) of the example, RPR_NMT_DATA pointing at it."""
    data_root = tmp_path / "data"
    write_corpus(data_root / "tiny")
    monkeypatch.setenv("RPR_NMT_DATA", str(data_root))
    bpe = train_bpe(TEST + WORDS, vocab_size=40, character_coverage=1.0)
    sweep = tmp_path / "runs" / "sweeps" / "demo"
    for k, seed, bleu in [(16, 1, 40.0), (16, 2, 42.0), (0, 1, 20.0), (0, 2, 20.0)]:
        write_run(sweep, k, seed, bpe, bleu)
    write_run(sweep, 4, 1, bpe, 30.0)
    unfinished = sweep / "model.max_relative_position=4,train.seed=1"
    (unfinished / "hyp_test.txt").unlink()  # stopped before its evaluation
    return sweep, data_root, Tokenizer.from_proto(bpe)


def test_collect_copies_the_small_artefacts_and_the_source_lengths(published, tmp_path, capsys):
    sweep, _, tokenizer = published
    results = tmp_path / "results" / "demo"
    assert main(["--collect", str(sweep), "--into", str(results)]) == 0
    assert "skipped" in capsys.readouterr().err  # the unfinished run
    runs = sorted(p.name for p in results.iterdir())
    assert runs == [
        "model.max_relative_position=0,train.seed=1",
        "model.max_relative_position=0,train.seed=2",
        "model.max_relative_position=16,train.seed=1",
        "model.max_relative_position=16,train.seed=2",
    ]
    run = results / runs[0]
    files = sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())
    assert files == [
        ".hydra/config.yaml", ".hydra/overrides.yaml", "eval_test.json", "hyp_test.txt",
        "hyp_valid.txt", "src_lengths_test.txt", "src_lengths_valid.txt", "train_summary.json",
    ]  # fmt: skip
    lengths = [int(n) for n in (run / "src_lengths_test.txt").read_text().split()]
    assert lengths == [len(tokenizer.encode(s)) for s in TEST]
    config = (run / ".hydra" / "config.yaml").read_text()
    assert "${oc.env:RPR_NMT_DATA,data}/tiny" in config  # the data root stays portable


def test_collect_without_the_corpus_says_where_and_copies_nothing(
    published, tmp_path, monkeypatch, capsys
):
    # The source lengths read the corpus: without RPR_NMT_DATA it is not found, and the run's
    # folder under results/ must not be left half copied (its scores without its lengths).
    sweep, _, _ = published
    monkeypatch.setenv("RPR_NMT_DATA", str(tmp_path / "elsewhere"))
    results = tmp_path / "results" / "demo"
    assert main(["--collect", str(sweep), "--into", str(results)]) == 2
    err = capsys.readouterr().err
    assert "is not found" in err and "RPR_NMT_DATA" in err
    assert not results.exists()


def test_tables_regenerate_from_the_results_alone(published, tmp_path):
    sweep, _, tokenizer = published
    results = tmp_path / "results" / "demo"
    assert main(["--collect", str(sweep), "--into", str(results)]) == 0
    shutil.rmtree(sweep)  # no checkpoint, no run folder: only results/ and the corpus
    short_max = max(len(tokenizer.encode(s)) for s in SHORT)
    assert short_max < min(len(tokenizer.encode(s)) for s in LONG)
    assert main(["--by-length", "--bounds", f"1,{short_max + 1}", str(results)]) == 0

    report = (results / "report.md").read_text()
    stats = report.split("## Test scores over seeds")[1]
    assert "Baseline: Shaw k = 16." in stats  # the paper's model
    k0 = next(line for line in stats.splitlines() if line.startswith("| none |"))
    cells = [c.strip() for c in k0.strip("|").split("|")]
    assert cells[:2] == ["none", "2"]  # the reader's name for the setting, the seeds
    assert cells[2] == "20.0 ± 0.0 [20.0, 20.0]"  # constant over seeds: zero-width interval
    assert cells[4].endswith("*")  # worse on every sentence, in both seed pairs
    assert float(cells[3]) < 0
    k16 = next(line for line in stats.splitlines() if "| Shaw k = 16 (baseline) |" in line)
    # 40 and 42: sd 1.41, t(0.975, 1) = 12.71, half-width 12.71 * 1.41 / sqrt(2) = 12.7
    assert "41.0 ± 1.4 [28.3, 53.7]" in k16
    assert (results / "test_bleu_by_setting.png").read_bytes()[:4] == b"\x89PNG"
    claims = report.split("## The claims")[1]
    assert "- **without any position information the model collapses" in claims
    assert ": holds. against Shaw k = 16 (41.0 ± 1.4 [28.3, 53.7]): none: 20.0" in claims

    lengths = (results / "length_report.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in lengths.splitlines()[4:6]}
    k16 = [c.strip() for c in rows["Shaw k = 16"].strip("|").split("|")]
    assert k16[1:] == ["2", "100.0 ± 0.0 [100.0, 100.0]", "100.0 ± 0.0 [100.0, 100.0]"]
    k0 = [c.strip() for c in rows["none"].strip("|").split("|")]
    for cell in k0[2:]:  # the same hypotheses in both seeds: below 100, no spread
        mean, rest = cell.split(" ± ")
        assert float(mean) < 100 and rest.startswith("0.0 [")
    assert (results / "bleu_by_length.png").read_bytes()[:4] == b"\x89PNG"


def test_an_unknown_baseline_names_the_settings(published, capsys):
    sweep, _, _ = published
    assert main(["--baseline", "model.max_relative_position=3", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "'model.max_relative_position=3' is not a setting" in err
    assert "settings: 'none', 'Shaw k = 4', 'Shaw k = 16'" in err  # as the tables name them


def test_the_baseline_is_named_as_the_table_names_it_or_by_its_keys(published):
    sweep, _, _ = published
    shutil.rmtree(sweep / "model.max_relative_position=4,train.seed=1")  # the unfinished run
    for name in ("none", "model.max_relative_position=0"):
        assert main(["--baseline", name, str(sweep)]) == 0
        report = (sweep / "report.md").read_text()
        assert "Baseline: none." in report and "| none (baseline) | 2 |" in report
        # The claims keep their own baseline: the collapse is still judged against Shaw k = 16.
        assert ": holds. against Shaw k = 16 (41.0 ± 1.4 [28.3, 53.7]): none: 20.0" in report


def test_a_run_without_its_test_output_fails_the_report_and_writes_nothing(published, capsys):
    # The sweep's k = 4 run stopped before its evaluation: its tests cannot be made, and a report
    # with "-" for them would be read as "no difference".
    sweep, _, _ = published
    before = {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()}
    assert main([str(sweep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "model.max_relative_position=4,train.seed=1/hyp_test.txt is missing" in err
    assert "--significance none" in err
    assert {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()} == before
    # A length report of another split can be made, but the main report's tests cannot: neither
    # is written.
    assert main(["--by-length", "--splits", "valid", str(sweep)]) == 2
    assert "hyp_test.txt is missing" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in sweep.rglob("*") if p.is_file()} == before
    assert main(["--significance", "none", str(sweep)]) == 0  # the tables alone, as asked


def run_files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by its path inside it."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def collected(published, tmp_path: Path) -> tuple[Path, Path, dict[str, bytes]]:
    """(sweep, results folder, its files): the example's sweep collected once."""
    sweep, _, _ = published
    results = tmp_path / "results" / "demo"
    assert main(["--collect", str(sweep), "--into", str(results)]) == 0
    return sweep, results, run_files(results)


def test_collect_refuses_another_run_under_a_collected_runs_name(published, tmp_path, capsys):
    # Probe 2026-11-29: where_positions and where_positions_lengths name their runs alike (the
    # cap is the experiment's, not an override): the second collection overwrote the first's
    # runs without a word, and the report then paired capped rows with uncapped ones.
    sweep, results, before = collected(published, tmp_path)
    capped = tmp_path / "runs" / "sweeps" / "capped"
    shutil.copytree(sweep, capped, symlinks=True)
    for config in capped.rglob(".hydra/config.yaml"):
        config.write_text(
            config.read_text().replace(
                "max_train_source_tokens: null", "max_train_source_tokens: 15"
            )
        )
    capsys.readouterr()
    assert main(["--collect", str(capped), "--into", str(results)]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # after the unfinished run's "skipped" line
    assert err.startswith("rpr-nmt-report: ") and "differs in data.max_train_source_tokens" in err
    assert "collect into another folder" in err
    assert run_files(results) == before  # nothing copied


def test_collecting_a_run_again_replaces_its_files(published, tmp_path):
    # The same run collected again after more updates replaces its copy; a file the run no longer
    # has does not outlive it beside the new summary (the probe found a run's summary next to
    # another's hyp_valid.txt and eval_valid.json).
    sweep, results, _ = collected(published, tmp_path)
    run = sweep / "model.max_relative_position=16,train.seed=1"
    (run / "hyp_valid.txt").unlink()
    config = run / ".hydra" / "config.yaml"
    config.write_text(config.read_text().replace("seed: 1", "seed: 1\n  max_steps: 2800"))
    (run / "train_summary.json").write_text(json.dumps({"test_bleu": 41.0, "test_chrf": 61.0}))
    assert main(["--collect", str(sweep), "--into", str(results)]) == 0
    copy = results / run.name
    assert not (copy / "hyp_valid.txt").exists() and not (copy / "src_lengths_valid.txt").exists()
    assert json.loads((copy / "train_summary.json").read_text())["test_bleu"] == 41.0


def test_collect_refuses_runs_of_another_arithmetic(published, tmp_path, capsys):
    # Probe 2026-11-29: a run of train.arithmetic=2 collected beside arithmetic-1 runs exited 0;
    # every report of the folder was then refused, and its earlier verdicts stayed behind.
    sweep, results, before = collected(published, tmp_path)
    other = tmp_path / "runs" / "sweeps" / "arithmetic2"
    run = sweep / "model.max_relative_position=16,train.seed=1"
    shutil.copytree(run, other / "seed3", symlinks=True)
    summary = json.loads((run / "train_summary.json").read_text())
    summary["sessions"] = [{"start_step": 0, "precision": "bf16", "arithmetic": 2}]
    (other / "seed3" / "train_summary.json").write_text(json.dumps(summary))
    capsys.readouterr()
    assert main(["--collect", str(other), "--into", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"collecting into {results} would mix arithmetics" in err, err
    assert "arithmetic 2" in err and "arithmetic 1" in err
    assert run_files(results) == before


def test_collect_skips_a_run_stopped_by_a_signal(published, tmp_path, capsys):
    # Probe K3: a finished run resumed for more updates and stopped (Ctrl-C) keeps its earlier
    # hyp_test.txt beside a summary of the later steps without a test score: it was collected.
    sweep, _, _ = published
    run = sweep / "model.max_relative_position=16,train.seed=2"
    (run / "train_summary.json").write_text(json.dumps({"steps": 3, "stopped_by": "signal"}))
    results = tmp_path / "results" / "demo"
    assert main(["--collect", str(sweep), "--into", str(results)]) == 0
    assert f"skipped {run}: stopped before its budget" in capsys.readouterr().err
    assert not (results / run.name).exists()


def test_collect_takes_a_tuning_run_by_its_validation_split(published, tmp_path):
    sweep, _, tokenizer = published
    tuning = sweep.parent / "tune"
    bpe = train_bpe(TEST + WORDS, vocab_size=40, character_coverage=1.0)
    run = write_run(tuning, 16, 1, bpe, 40.0)
    config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    config["train"]["evaluate_test"] = False  # a tuning run: no test hypotheses
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "hyp_test.txt").unlink()
    (run / "eval_test.json").unlink()
    results = tmp_path / "results" / "tune"
    assert main(["--collect", str(tuning), "--into", str(results)]) == 0
    copy = results / run.name
    files = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
    assert files == [
        ".hydra/config.yaml", ".hydra/overrides.yaml", "hyp_valid.txt", "src_lengths_valid.txt",
        "train_summary.json",
    ]  # fmt: skip
    lengths = [int(n) for n in (copy / "src_lengths_valid.txt").read_text().split()]
    assert lengths == [len(tokenizer.encode(s)) for s in SHORT[:3]]


def test_a_tuning_run_collected_again_after_scoring_its_test_replaces_its_copy(published, tmp_path):
    sweep, _, _ = published
    tuning = sweep.parent / "tune"
    bpe = train_bpe(TEST + WORDS, vocab_size=40, character_coverage=1.0)
    run = write_run(tuning, 16, 1, bpe, 40.0)
    config_path = run / ".hydra" / "config.yaml"
    scored = config_path.read_text()
    config = yaml.safe_load(scored)
    config["train"]["evaluate_test"] = False
    config_path.write_text(yaml.safe_dump(config))
    test_files = {name: (run / name).read_bytes() for name in ("hyp_test.txt", "eval_test.json")}
    for name in test_files:
        (run / name).unlink()
    results = tmp_path / "results" / "tune"
    assert main(["--collect", str(tuning), "--into", str(results)]) == 0
    config_path.write_text(scored)  # the same run folder, rerun with train.evaluate_test=true
    for name, data in test_files.items():
        (run / name).write_bytes(data)
    assert main(["--collect", str(tuning), "--into", str(results)]) == 0
    copy = results / run.name
    assert (copy / "hyp_test.txt").read_bytes() == test_files["hyp_test.txt"]
    assert (copy / ".hydra" / "config.yaml").read_text() == scored


def test_a_folder_of_tuning_runs_is_tabled_not_reported(published, tmp_path, capsys):
    sweep, _, _ = published
    for run in sweep.iterdir():
        config_path = run / ".hydra" / "config.yaml"
        config = yaml.safe_load(config_path.read_text())
        config["train"]["evaluate_test"] = False
        config_path.write_text(yaml.safe_dump(config))
    assert main([str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "a tuning run (train.evaluate_test=false)" in err and err.count("\n") == 1
    assert f"python scripts/tuning_table.py {sweep}" in err
    assert not (sweep / "report.md").exists()
    results = tmp_path / "results" / "tuned"
    assert main(["--collect", str(sweep), "--into", str(results)]) == 0
    assert f"table: python scripts/tuning_table.py {results}" in capsys.readouterr().out
