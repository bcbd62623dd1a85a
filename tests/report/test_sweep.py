"""rpr-nmt-report over a sweep folder laid out as Hydra multirun and the trainer write it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rpr_nmt.cli.report import main
from rpr_nmt.report.sweep import find_runs, group_runs, markdown_table, reference_row

from .run_folders import write_run_folder, write_shaw_run


def test_runs_differing_in_seed_form_one_row_with_mean_and_spread(tmp_path):
    for k, seed, bleu in [(16, 1, 30.0), (16, 2, 32.0), (0, 1, 10.0), (0, 2, 10.0), (2, 1, 29.0)]:
        write_shaw_run(tmp_path, k, seed, bleu)
    rows = group_runs(find_runs(tmp_path))
    assert [r.setting for r in rows] == [
        "model.max_relative_position=0",
        "model.max_relative_position=2",
        "model.max_relative_position=16",
    ]
    assert [r.label for r in rows] == ["none", "Shaw k = 2", "Shaw k = 16"]
    table = markdown_table(rows)
    k16 = next(line for line in table.splitlines() if line.startswith("| Shaw k = 16 |"))
    assert "| 2 |" in k16  # two seeds
    assert "31.0 ± 1.4" in k16  # mean and sample standard deviation of 30 and 32
    k2 = next(line for line in table.splitlines() if line.startswith("| Shaw k = 2 |"))
    assert "29.0" in k2 and "±" not in k2.split("|")[4]


def test_cli_writes_table_and_plot(tmp_path, capsys):
    for k, bleu in [(0, 10.0), (1, 25.0), (4, 27.0), (64, 27.5)]:
        write_shaw_run(tmp_path, k, 1, bleu)
    assert main(["--significance", "none", str(tmp_path)]) == 0  # runs without a corpus
    assert "| Shaw k = 4 | 1 |" in (tmp_path / "report.md").read_text()
    png = tmp_path / "bleu_vs_k.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "written:" in capsys.readouterr().out


def test_no_plot_against_k_when_the_rows_differ_in_more_than_k(tmp_path):
    # The term sweep: k = 0, k = 16 with both terms and k = 16 with a^V alone; a plot against k
    # would draw a^V alone as a second k = 16 point. A plot left by earlier runs goes.
    for k, bleu in [(0, 10.0), (16, 27.0)]:
        write_shaw_run(tmp_path, k, 1, bleu)
    assert main(["--significance", "none", str(tmp_path)]) == 0  # runs without a corpus
    assert (tmp_path / "bleu_vs_k.png").exists()
    write_run(
        tmp_path / "values_only",
        ["model.relative_keys=false"],
        {"max_relative_position": 16, "relative_keys": False, "relative_values": True},
        seed=1,
    )
    assert main(["--significance", "none", str(tmp_path)]) == 0
    assert not (tmp_path / "bleu_vs_k.png").exists()
    assert "bleu_vs_k.png" not in (tmp_path / "report.md").read_text()


def test_cli_names_the_folder_when_there_are_no_runs(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_the_baseline_is_the_papers_model_else_the_first_row(tmp_path):
    for k in (0, 4, 16):
        write_shaw_run(tmp_path / "with", k, 1, 20.0 + k)
    rows = group_runs(find_runs(tmp_path / "with"))
    assert reference_row(rows).model["max_relative_position"] == 16
    named = reference_row(rows, "model.max_relative_position=4")
    assert named.model["max_relative_position"] == 4
    for k in (2, 4):
        write_shaw_run(tmp_path / "without", k, 1, 20.0 + k)
    rows = group_runs(find_runs(tmp_path / "without"))
    assert reference_row(rows).setting == "model.max_relative_position=2"


def test_statistics_without_a_test(tmp_path, capsys):
    for k, seed, bleu in [(16, 1, 30.0), (16, 2, 32.0), (16, 3, 34.0)]:
        write_shaw_run(tmp_path, k, seed, bleu)
    assert main(["--significance", "none", str(tmp_path)]) == 0
    stats = (tmp_path / "report.md").read_text().split("## Test scores over seeds")[1]
    assert "p (BLEU)" not in stats and "Student t" in stats
    # 30, 32, 34: mean 32, sd 2, t(0.975, 2) * 2 / sqrt(3) = 4.97
    assert "| 3 | 32.0 ± 2.0 [27.0, 37.0] |" in stats


def write_run(sweep: Path, overrides: list[str], model: dict, seed: int) -> Path:
    config = {"model": model, "train": {"seed": seed, "lr": 0.001, "ema_decay": None}}
    return write_run_folder(sweep, overrides, config, {"test_bleu": 30.0 + seed})


def test_a_setting_is_what_was_trained_not_how_the_overrides_spell_it(tmp_path):
    relative = {"max_relative_position": 16, "sinusoidal": False}
    absolute = {"max_relative_position": 0, "sinusoidal": True}
    # The same model from two sweeps (a reused baseline) and a third setting.
    write_run(tmp_path / "a", ["positions=relative", "train.seed=1"], relative, 1)
    write_run(tmp_path / "b", ["model.max_relative_position=16", "train.seed=2"], relative, 2)
    write_run(tmp_path / "c", ["positions=absolute", "train.seed=1"], absolute, 1)
    rows = group_runs(find_runs(tmp_path))
    assert [(r.setting, len(r.runs)) for r in rows] == [
        ("model.max_relative_position=0, model.sinusoidal=true", 1),
        ("model.max_relative_position=16, model.sinusoidal=false", 2),
    ]


def test_a_key_added_after_a_run_reads_as_its_default(tmp_path):
    # The GPU k sweep's seeds 1 and 2 ran before train.compile_scope existed, seed 3 after: their
    # configs differ only by the key, at its default, and the seeds must pair as one setting.
    model = {"max_relative_position": 16}
    write_run(tmp_path / "before", ["train.seed=1"], model, 1)
    after = write_run(tmp_path / "after", ["train.seed=2"], model, 2)
    whole = write_run(tmp_path / "whole", ["train.compile_scope=model", "train.seed=1"], model, 1)
    for run, scope in ((after, "layers"), (whole, "model")):
        path = run / ".hydra" / "config.yaml"
        config = yaml.safe_load(path.read_text())
        config["train"]["compile_scope"] = scope
        path.write_text(yaml.safe_dump(config))
    rows = group_runs(find_runs(tmp_path))
    assert sorted((r.setting, len(r.runs)) for r in rows) == [
        ("train.compile_scope=layers", 2),
        ("train.compile_scope=model", 1),
    ]


def test_one_setting_is_labelled_by_its_overrides(tmp_path):
    model = {"max_relative_position": 4, "sinusoidal": False}
    write_run(tmp_path / "a", ["positions=relative_k4", "train.seed=1"], model, 1)
    write_run(tmp_path / "b", ["positions=relative_k4", "train.seed=2"], model, 2)
    rows = group_runs(find_runs(tmp_path))
    assert [(r.setting, len(r.runs)) for r in rows] == [("positions=relative_k4", 2)]


def test_unfinished_runs_are_marked(tmp_path):
    # Issue 31, item 7: a run still training (no summary) vanished from the report without a
    # word, and one stopped by Ctrl-C read like a finished one.
    for k, bleu in [(0, 10.0), (16, 27.0)]:
        write_shaw_run(tmp_path, k, 1, bleu)
    write_shaw_run(tmp_path, 4, 1, 20.0)
    (tmp_path / "model.max_relative_position=4,train.seed=1" / "train_summary.json").unlink()
    write_shaw_run(tmp_path, 16, 2, 5.0)
    stopped = tmp_path / "model.max_relative_position=16,train.seed=2" / "train_summary.json"
    stopped.write_text(json.dumps({"test_bleu": 5.0, "steps": 3, "stopped_by": "signal"}))
    assert main(["--significance", "none", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "3 runs, 2 settings." in report
    assert (
        "**Unfinished:** 1 run(s) without train_summary.json (still running, or killed), left out "
        "of every table: model.max_relative_position=4,train.seed=1." in report
    )
    assert "**Unfinished:** 1 run(s) stopped before their budget" in report
    assert report.count("model.max_relative_position=16,train.seed=2") == 1


def test_make_demos_run_folder_reports_as_one_run(tmp_path, capsys):
    """`make demo` trains into runs/demo and evaluates into runs/demo/evaluate: the report read
    the evaluation's .hydra/ record as an unfinished run, and refused the lone run for the test
    output its paired tests would need, though one setting has nothing to pair with."""
    demo = tmp_path / "demo"
    demo.mkdir()
    model = {"max_relative_position": 16, "relative_keys": True, "relative_values": True}
    run = write_run_folder(demo, [], {"model": model}, {"steps": 2213})  # no overrides: demo/
    evaluation = run / "evaluate" / ".hydra"
    evaluation.mkdir(parents=True)
    (evaluation / "config.yaml").write_text(yaml.safe_dump({"checkpoint": "x.pt", "split": None}))
    assert main([str(run)]) == 0
    report = (run / "report.md").read_text()
    assert "Unfinished" not in report and "p (BLEU)" not in report
    assert "| Shaw k = 16 | 0 of 1 |" in report


def test_runs_of_code_that_trains_differently_are_refused_in_one_line(tmp_path, capsys):
    """A report over runs whose code rounds differently would read the code's difference as the
    settings': refused, nothing written (train_summary.json's sessions record the arithmetic)."""
    write_shaw_run(tmp_path, 0, 1, 10.0)
    write_shaw_run(tmp_path, 16, 1, 27.0)
    newer = tmp_path / "model.max_relative_position=16,train.seed=1" / "train_summary.json"
    summary = json.loads(newer.read_text())
    summary["sessions"] = [{"start_step": 0, "precision": "bf16", "arithmetic": 2}]
    newer.write_text(json.dumps(summary))
    assert main(["--significance", "none", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "trained by code that trains differently" in err and "arithmetic 2" in err
    assert not (tmp_path / "report.md").exists()
    summary["sessions"][0]["arithmetic"] = 1  # the same code as the runs from before the record
    newer.write_text(json.dumps(summary))
    assert main(["--significance", "none", str(tmp_path)]) == 0


def test_a_seed_without_a_test_score_is_not_counted_as_one(tmp_path):
    write_shaw_run(tmp_path, 16, 1, 27.0)
    write_shaw_run(tmp_path, 16, 2, 27.0)
    stopped = tmp_path / "model.max_relative_position=16,train.seed=2" / "train_summary.json"
    stopped.write_text(json.dumps({"steps": 3, "stopped_by": "signal"}))
    (row,) = group_runs(find_runs(tmp_path))
    assert row.seeds() == "1 of 2"
    assert markdown_table([row]).splitlines()[2].startswith("| Shaw k = 16 | 1 of 2 | ")


def test_a_corrupt_summary_is_named(tmp_path, capsys):
    write_shaw_run(tmp_path, 16, 1, 27.0)
    (tmp_path / "model.max_relative_position=16,train.seed=1" / "train_summary.json").write_text(
        '{\n"test_bleu": 27.0,,'
    )
    assert main(["--significance", "none", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "model.max_relative_position=16,train.seed=1/train_summary.json: not JSON" in err


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("${if_native_bf16:6000,2000}", "a value chosen by the host that trained the run"),
        ("${oc.env:RPR_NMT_TEST_UNSET_VARIABLE}", "RPR_NMT_TEST_UNSET_VARIABLE"),
    ],
)
def test_a_record_the_report_cannot_resolve_is_named_with_its_key(tmp_path, capsys, value, named):
    # The demo's batch size was recorded as ${if_native_bf16:6000,2000} before rpr-nmt-train
    # resolved it; the report stopped with OmegaConf's "Unsupported interpolation type".
    write_shaw_run(tmp_path, 16, 1, 27.0)
    config = tmp_path / "model.max_relative_position=16,train.seed=1" / ".hydra" / "config.yaml"
    config.write_text(yaml.safe_dump({"model": {}, "train": {"max_tokens": value}}))
    assert main(["--significance", "none", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{config}: train.max_tokens" in err and named in err


def test_a_short_hypothesis_file_is_counted_as_a_reader_counts_it(tmp_path):
    from rpr_nmt.report.runs import read_hypotheses

    write_shaw_run(tmp_path, 16, 1, 27.0)
    (run,) = find_runs(tmp_path)
    for text, counted in [("", 0), ("a\nb\nc\n", 3), ("a\nb\nc", 3)]:
        (run.path / "hyp_test.txt").write_text(text)
        with pytest.raises(FileNotFoundError, match=f"has {counted} lines for 40 sentences"):
            read_hypotheses(run, "test", 40)


def test_negative_samples_are_refused(tmp_path, capsys):
    write_shaw_run(tmp_path, 16, 1, 27.0)
    with pytest.raises(SystemExit) as stop:
        main(["--samples", "-5", str(tmp_path)])
    assert stop.value.code == 2 and "-5 is negative" in capsys.readouterr().err


def test_a_relative_corpus_root_says_where_it_was_looked_for(tmp_path, capsys, monkeypatch):
    """Probe U6: data=local's root (data/local) is relative; from another folder the report's
    advice to set RPR_NMT_DATA alone could not help."""
    for k in (16, 4):  # two settings: one alone has nothing to test, so reads no corpus
        write_shaw_run(tmp_path / "sweep", k, 1, 27.0)
        run = tmp_path / "sweep" / f"model.max_relative_position={k},train.seed=1"
        config_path = run / ".hydra"
        config = yaml.safe_load((config_path / "config.yaml").read_text())
        config["data"] = {"source": "local", "root": "data/local", "test_split": "test"}
        (config_path / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    assert main([str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert f"a relative root is read from the folder the report runs in, {tmp_path}" in err
    assert err.count("\n") == 1


def test_one_run_collected_twice_is_not_counted_as_two_seeds(tmp_path, capsys):
    # Probe F3: a run added again under another folder name (--collect of a run trained before,
    # with the sweep's seed 1 already there) made a row of 3 "seeds" out of 2.
    relative = {"max_relative_position": 16, "sinusoidal": False}
    sweep = tmp_path / "sweep"
    first = write_run(sweep, ["positions=relative", "train.seed=1"], relative, 1)
    write_run(sweep, ["positions=relative", "train.seed=2"], relative, 2)
    again = write_run(sweep, ["positions=relative"], relative, 1)  # a single run's folder name
    assert main(["--significance", "none", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    named = f"{again} and {first}", f"{first} and {again}"  # in the order they are found
    assert any(f"{n} are one setting with the same train.seed=1" in err for n in named)
    assert "they would count as two seeds" in err
    assert not (sweep / "report.md").exists()


def test_a_stopped_run_without_test_output_says_to_resume_it(tmp_path):
    # Probe F9: a run stopped by a signal before its evaluation was refused by the paired tests
    # with "the run must evaluate itself at the end (train.evaluate_at_end)", as if it never would.
    from rpr_nmt.report.sweep import read_test_output

    class Corpus:  # the references alone: the run's corpus is not what is tested here
        def references(self, run, split):
            return ["a b c"] * 3

    write_run_folder(
        tmp_path,
        ["train.seed=1"],
        {"model": {}, "train": {"seed": 1, "max_steps": 30}},
        {"steps": 13, "stopped_by": "signal"},
    )
    (run,) = find_runs(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        read_test_output(run, Corpus())
    assert str(error.value) == (
        f"{run.path} stopped at update 13 of 30 (a signal) and has no test output yet: rerun its "
        "training command to resume it (it evaluates at the end), move it out of the sweep, or "
        "give --significance none"
    )


def test_a_run_without_a_test_score_is_left_out_of_its_rows_tests_too(tmp_path, monkeypatch):
    # Probe G1: the mean came from the runs with a test score, Δ and p from every run with
    # hypotheses, so a row read "1 of 2 | 100.0 | -50.0": its own numbers disagreed.
    from dataclasses import asdict

    from rpr_nmt.config import DataConfig

    refs = [f"the {w} sat on the mat near the door today" for w in ("cat", "dog", "cow", "hen")]
    for lang in ("en", "de"):
        (tmp_path / "tiny").mkdir(exist_ok=True)
        (tmp_path / "tiny" / f"test.{lang}").write_text("\n".join(refs) + "\n")
    data = asdict(DataConfig(root=str(tmp_path / "tiny"), test_split="test"))
    sweep = tmp_path / "sweep"
    for k, seed, scored, hyps in [
        (16, 1, True, refs), (16, 2, True, refs), (4, 1, True, refs), (4, 2, False, ["x"] * 4),
    ]:  # fmt: skip
        model = {"max_relative_position": k, "relative_keys": True, "relative_values": True}
        config = {"data": data, "model": model, "train": {"seed": seed}}
        overrides = [f"model.max_relative_position={k}", f"train.seed={seed}"]
        summary = {"test_bleu": 100.0, "test_chrf": 100.0} if scored else {"steps": 3}
        write_run_folder(sweep, overrides, config, summary, hyps=hyps)
    assert main(["--samples", "100", str(sweep)]) == 0
    report = (sweep / "report.md").read_text()
    assert "| Shaw k = 4 | 1 of 2 | 100.0 | +0.0 | p 1.000 | 100.0 | +0.0 | p 1.000 |" in report
    assert (
        "- Shaw k = 4: 1 run(s) without a test score in train_summary.json, left out of its test "
        "figures and tests: model.max_relative_position=4,train.seed=2" in report
    )


def test_samples_without_a_test_are_refused(tmp_path, capsys):
    write_shaw_run(tmp_path, 16, 1, 27.0)
    with pytest.raises(SystemExit) as stop:
        main(["--samples", "300", "--significance", "none", str(tmp_path)])
    assert stop.value.code == 2
    assert "--samples goes with a test" in capsys.readouterr().err
    assert not (tmp_path / "report.md").exists()
