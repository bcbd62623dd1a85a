"""rpr-nmt-report --retrained NEW --against PUBLISHED: published settings retrained by changed code,
judged seed for seed, with made-up hypotheses whose verdicts are known.

The tiny corpus of test_position_study translates by copying. Published runs of the sinusoid and of
Shaw k = 16 copy every word but the last of 0, 1 or 2 sentences (seeds 1-3): a small spread.
Retrained by code "of arithmetic 2", the sinusoid differs as a rounding change would (other
sentences lose their last word), Shaw keeps every second word only: a change beyond rounding.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from rpr_nmt.cli.report import main
from rpr_nmt.config import DataConfig, ModelConfig
from rpr_nmt.evaluate import score_corpus
from tests.conftest import REPO, compose_command

from .run_folders import write_run_folder
from .test_position_study import LONG, SHORT, keep_every, write_corpus

SOURCES = SHORT + LONG


def shortened(indices: tuple[int, ...]) -> list[str]:
    """The copies, with the last word of the sentences at `indices` left out."""
    return [" ".join(s.split()[:-1]) if i in indices else s for i, s in enumerate(SOURCES)]


PUBLISHED = {1: shortened(()), 2: shortened((0,)), 3: shortened((0, 1))}
ROUNDED = {1: shortened((2,)), 2: shortened((3,)), 3: shortened((4, 5))}
HALVED = {seed: [keep_every(2, s) for s in SOURCES] for seed in (1, 2, 3)}


def write_run(
    folder: Path, name: str, seed: int, hyps: list[str], data: Path, arithmetic: int,
    train: dict | None = None,
) -> None:  # fmt: skip
    """One run of positions=`name` as --collect leaves it, trained with `arithmetic`
    (train.arithmetic in its config as a retraining sets it; published configs predate the key)."""
    positions = yaml.safe_load((REPO / "configs" / "positions" / f"{name}.yaml").read_text())
    config = {
        "data": asdict(DataConfig(root=str(data), test_split="test")),
        "model": {**asdict(ModelConfig()), **positions},
        "train": {
            "seed": seed,
            **({"arithmetic": arithmetic} if arithmetic > 1 else {}),
            **(train or {}),
        },
    }
    summary = {
        "test_bleu": score_corpus(hyps, SOURCES, "").bleu,
        "sessions": [{"start_step": 0, "precision": "bf16", "arithmetic": arithmetic}],
    }
    overrides = [f"positions={name}", f"train.seed={seed}"]
    write_run_folder(folder, overrides, config, summary, hyps=hyps)


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(published, retrained, corpus): both settings published; the retrained folder empty."""
    data = write_corpus(tmp_path)
    published, retrained = tmp_path / "published", tmp_path / "retrained"
    for name in ("absolute", "relative"):
        for seed, hyps in PUBLISHED.items():
            write_run(published, name, seed, hyps, data, arithmetic=1)
    retrained.mkdir()
    return published, retrained, data


def report_rows(folder: Path) -> dict[str, list[str]]:
    """retrained.md's first table: cells by setting."""
    table = (folder / "retrained.md").read_text().split("## Seed by seed")[0]
    rows = [line.strip("| ").split(" | ") for line in table.splitlines() if line.startswith("| ")]
    return {cells[0]: cells[1:] for cells in rows[1:]}


def test_a_rounding_change_passes_and_one_beyond_rounding_does_not(folders, capsys):
    published, retrained, data = folders
    for seed in (1, 2, 3):
        write_run(retrained, "absolute", seed, ROUNDED[seed], data, arithmetic=2)
        write_run(retrained, "relative", seed, HALVED[seed], data, arithmetic=2)
    args = ["--retrained", str(retrained), "--against", str(published), "--samples", "200"]
    assert main(args) == 1  # Shaw moved beyond rounding: the change does not land
    rows = report_rows(retrained)
    sinusoid, shaw = rows["sinusoid"], rows["Shaw k = 16"]
    assert sinusoid[3] == "yes" and sinusoid[-1] == "yes"  # inside the interval, rounding only
    assert ", same" in sinusoid[4]
    assert shaw[3] == "no" and shaw[-1] == "**no**" and ", worse" in shaw[4]
    assert float(shaw[2]) < -30  # Δ of means: half the words gone
    text = (retrained / "retrained.md").read_text()
    assert "**Verdict: some setting moved beyond rounding: the change does not land.**" in text
    assert "(arithmetic 1)" in text and "(arithmetic 2)" in text
    seeds = text.split("## Seed by seed")[1]
    assert seeds.count("| Shaw k = 16 |") == 3 and seeds.count("| sinusoid |") == 3
    assert "written:" in capsys.readouterr().out


def test_every_setting_within_rounding_lets_the_change_land(folders):
    published, retrained, data = folders
    for seed in (1, 2, 3):
        write_run(retrained, "absolute", seed, ROUNDED[seed], data, arithmetic=2)
    args = ["--retrained", str(retrained), "--against", str(published), "--samples", "200"]
    assert main(args) == 0
    assert list(report_rows(retrained)) == ["sinusoid"]  # only what was retrained is judged
    assert (
        "every setting is rounding only: the change may land"
        in (retrained / "retrained.md").read_text()
    )


def test_a_retraining_at_another_recipe_is_refused_naming_the_keys(folders, capsys):
    published, retrained, data = folders
    write_run(retrained, "absolute", 1, ROUNDED[1], data, arithmetic=2, train={"max_steps": 700})
    args = ["--retrained", str(retrained), "--against", str(published)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "retrains no published setting" in err and "train.max_steps" in err
    assert not (retrained / "retrained.md").exists()


def test_retrained_needs_its_published_folder_and_the_tests(folders, capsys):
    published, retrained, data = folders
    write_run(retrained, "absolute", 1, ROUNDED[1], data, arithmetic=2)
    assert main(["--retrained", str(retrained)]) == 2
    assert "--against PUBLISHED_DIR" in capsys.readouterr().err
    args = ["--retrained", str(retrained), "--against", str(published), "--significance", "none"]
    assert main(args) == 2
    assert "--significance bs or ar" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--against", str(published)])


def test_the_published_runs_are_not_judged_against_themselves(folders, capsys):
    published, retrained, data = folders
    for new, against in [(published, published), (published.parent, published)]:
        assert main(["--retrained", str(new), "--against", str(against)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "hold the same runs" in err
    assert not list(published.rglob("retrained.md"))


@pytest.mark.parametrize(
    "positions, published",
    [("absolute", "positions=absolute"), ("relative_k16", "model.max_relative_position=16")],
)
def test_experiment_retrain_published_trains_the_published_recipe(positions, published):
    """experiment=retrain_published, as its header runs it, composes each published setting's
    recipe to the key, so that --retrained accepts its runs."""
    from omegaconf import OmegaConf

    from rpr_nmt.report.retrained import recipe
    from rpr_nmt.report.runs import Run, find_runs

    folder = REPO / "results" / "compare_positions_multi30k_en_de"
    (old,) = [r for r in find_runs(folder) if r.path.name.startswith(f"{published},train.seed=1,")]
    overrides = [
        "experiment=retrain_published", f"positions={positions}", "train.seed=1",
        "train=cpu_short", "train.max_time_minutes=null", "train.max_steps=1400",
    ]  # fmt: skip
    config = OmegaConf.to_container(compose_command(overrides), resolve=True)
    assert config["train"]["arithmetic"] == 2  # what it retrains in; the published trained in 1
    assert recipe(Run(old.path, overrides, config, {})) == recipe(old)


def test_a_retrained_run_present_twice_is_refused(folders, capsys):
    # Probe F3: two copies of one seed-1 run were judged as two seeds ("37.91 ± 0.00").
    published, retrained, data = folders
    write_run(retrained, "absolute", 1, ROUNDED[1], data, arithmetic=2)
    write_run(retrained / "again", "absolute", 1, ROUNDED[1], data, arithmetic=2)
    assert main(["--retrained", str(retrained), "--against", str(published)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "are one setting with the same train.seed=1" in err
    assert not (retrained / "retrained.md").exists()


def test_a_folder_that_does_not_exist_is_named_as_such(folders, tmp_path, capsys):
    published, retrained, data = folders
    write_run(retrained, "absolute", 1, ROUNDED[1], data, arithmetic=2)
    for new, against, which in [
        (tmp_path / "nosuch", published, "retrained"),
        (retrained, tmp_path / "nosuch", "published"),
    ]:
        assert main(["--retrained", str(new), "--against", str(against)]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"rpr-nmt-report: {tmp_path / 'nosuch'} is not a folder: give the {which} runs' "
            "folder\n"
        )


def test_a_retraining_in_the_published_arithmetic_is_refused(folders, capsys):
    # Probe 2026-11-29: retrained in fp32 (which records arithmetic 1 whatever train.arithmetic
    # says) the runs were the published ones again, and the report said "the change may land".
    published, retrained, data = folders
    for seed in (1, 2, 3):
        write_run(retrained, "absolute", seed, PUBLISHED[seed], data, arithmetic=1)
    assert main(["--retrained", str(retrained), "--against", str(published)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trained in arithmetic 1, as the published runs" in err
    assert "there is no change to judge" in err
    assert not (retrained / "retrained.md").exists()


def test_a_retraining_without_a_published_seed_is_refused(folders, capsys):
    # Probe 2026-11-29: retrained with seed 4 alone, nothing could be tested seed against seed, yet
    # the verdict was "moved beyond rounding: the change does not land" with exit 1.
    published, retrained, data = folders
    write_run(retrained, "absolute", 4, ROUNDED[1], data, arithmetic=2)
    assert main(["--retrained", str(retrained), "--against", str(published)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sinusoid: retrained with train.seed=4" in err
    assert "published with train.seed=1,2,3: no seed in common" in err
    assert "retrain with train.seed=1,2,3" in err
    assert not (retrained / "retrained.md").exists()


def test_a_run_without_a_test_score_is_left_out_of_the_tests_as_of_the_mean(folders, capsys):
    # Probe K1: a retrained seed 3 without test_bleu in its summary was left out of the retrained
    # mean but paired against the published seed 3 (the tests rested on more seeds than the Δ).
    published, retrained, data = folders
    for seed in (1, 2):
        write_run(retrained, "absolute", seed, ROUNDED[seed], data, arithmetic=2)
    run = write_run_folder_unscored(retrained, 3, data)
    (run / "hyp_test.txt").write_text("\n".join(HALVED[3]) + "\n")
    args = ["--retrained", str(retrained), "--against", str(published), "--samples", "200"]
    main(args)
    text = (retrained / "retrained.md").read_text()
    seeds = text.split("## Seed by seed")[1]
    assert seeds.count("| sinusoid |") == 2 and "| sinusoid | 3 |" not in seeds
    assert f"without a test score in train_summary.json, left out: {run.name}" in text


def test_a_setting_without_a_scored_retrained_run_is_refused(folders, capsys):
    # Probe K1: with no retrained test score, the tests ran on the hypotheses and exit 1 said "the
    # change does not land" beside a "-" for the retrained mean.
    published, retrained, data = folders
    for seed in (1, 2):
        run = write_run_folder_unscored(retrained, seed, data)
    assert main(["--retrained", str(retrained), "--against", str(published)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sinusoid: no retrained run has a test score" in err
    assert run.is_dir() and not (retrained / "retrained.md").exists()


def write_run_folder_unscored(folder: Path, seed: int, data: Path) -> Path:
    """A retrained run of the sinusoid with hypotheses but no test_bleu in its summary."""
    write_run(folder, "absolute", seed, ROUNDED[seed], data, arithmetic=2)
    (run,) = folder.glob(f"*train.seed={seed}")
    summary = run / "train_summary.json"
    kept = {k: v for k, v in json.loads(summary.read_text()).items() if k != "test_bleu"}
    summary.write_text(json.dumps(kept))
    return run
