"""Which stack needs word order, end to end: rpr-nmt-report on an experiment=where_positions sweep
beside the position study's rows, with made-up hypotheses whose verdicts are known.

The study's rows are those of test_position_study (the sinusoid, Shaw k = 16 and RoPE copy every
word of the short sources; none keeps every second word). Here a method in the decoder only keeps
every second word of every source (word order lost in the encoder), and one in the encoder only
copies as the method in both stacks does, short and long sources alike.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from rpr_nmt.cli.report import main

from .test_position_study import LONG, SHORT, keep_every, verdicts, write_corpus, write_study

PLACED = ("absolute", "relative", "rope")  # positions=<name>: the sinusoid, Shaw k = 16, RoPE


def write_placements(study: Path) -> None:
    """Each method of PLACED in the encoder only and in the decoder only, seeds 1 and 2, as copies
    of its both-stack runs with positions_in and the hypotheses changed."""
    for name in PLACED:
        for stacks in ("encoder", "decoder"):
            for seed in (1, 2):
                both = study / f"positions={name},train.seed={seed}"
                run = study / f"model.positions_in={stacks},positions={name},train.seed={seed}"
                shutil.copytree(both, run)
                config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
                config["model"]["positions_in"] = stacks
                (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
                if stacks == "decoder":
                    hyps = [keep_every(2, s) for s in SHORT + LONG]
                    (run / "hyp_test.txt").write_text("\n".join(hyps) + "\n")
                else:  # as the both-stack run wrote them, long sources included
                    hyps = (both / "hyp_test.txt").read_text().splitlines()
                    (run / "hyp_test.txt").write_text("\n".join(SHORT + hyps[len(SHORT) :]) + "\n")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("where")
    sweep = root / "results" / "where_positions_tiny"
    write_study(sweep, write_corpus(root))
    for name in ("learned", "alibi", "t5"):  # the study's other methods: not placed here
        for seed in (1, 2):
            shutil.rmtree(sweep / f"positions={name},train.seed={seed}")
    write_placements(sweep)
    assert main(["--by-length", "--samples", "300", str(sweep)]) == 0
    return sweep


def tables(section: str) -> list[list[str]]:
    """The Markdown tables of a report section, each as its lines (the header's rule left out)."""
    found, current = [], []
    for line in section.splitlines() + [""]:
        if line.startswith("|-"):
            continue
        if line.startswith("| "):
            current.append(line)
        elif current:
            found, current = [*found, current], []
    return found


def test_one_table_answers_the_question(sweep: Path):
    report = (sweep / "report.md").read_text()
    section = report.split("## Which stack needs word order")[1].split("\n## ")[0]
    table = tables(section)[0]
    assert table[0] == "| method | both stacks | encoder only | decoder only | none |"
    names = [line.split(" | ")[0].removeprefix("| ") for line in table[1:]]
    assert names == ["sinusoid", "Shaw k = 16", "RoPE"]
    for line in table[1:]:
        cells = line.strip("| ").split(" | ")
        assert "Δ" not in cells[1]  # the method in both stacks is what the others are tested on
        assert all("Δ" in cell and "p " in cell for cell in cells[2:])
    sinusoid = table[1].strip("| ").split(" | ")
    assert "(Δ +0.0, p 1.000 (max 1.000))" in sinusoid[2]  # encoder only: the same output
    assert sinusoid[3].endswith(" *)") and "(Δ -" in sinusoid[3]  # decoder only: worse, every pair
    assert "2 seeds" in section


@pytest.mark.parametrize("name", ["report.md", "length_report.md"])
def test_each_seed_pair_is_listed(sweep: Path, name: str):
    # The table gives the median and largest p over seed pairs; each pair's Δ and p follow it.
    section = (sweep / name).read_text().split("## Which stack needs word order")[1]
    pairs = tables(section.split("\n## ")[0])[1]
    assert pairs[0] == "| method | placement | seed 1 | seed 2 |"
    rows = [line.strip("| ").split(" | ") for line in pairs[1:]]
    assert [row[:2] for row in rows] == [
        [method, placement]
        for method in ("sinusoid", "Shaw k = 16", "RoPE")
        for placement in ("encoder only", "decoder only", "none")
    ]
    for _, placement, *cells in rows:
        assert all(re.fullmatch(r"Δ [+-]\d+\.\d\d, p \d\.\d{3}", cell) for cell in cells)
        if placement == "encoder only":  # the same output as in both stacks
            assert cells == ["Δ +0.00, p 1.000"] * 2
        if placement == "none":  # every pair worse
            assert all(cell.startswith("Δ -") and float(cell[-5:]) < 0.05 for cell in cells)


def test_the_placement_claims_are_judged_per_method(sweep: Path):
    found = verdicts((sweep / "report.md").read_text())
    encoder = {c: v for c, v in found.items() if c.startswith("word order is needed in the enc")}
    causal = {c: v for c, v in found.items() if c.startswith("the decoder's causal mask")}
    assert len(encoder) == len(causal) == 3
    for claim, text in encoder.items():
        assert text.startswith("holds. against "), claim
        assert "(decoder only): " in text and text.endswith("*")
    assert all(text.startswith("holds. against ") for text in causal.values())
    lead = "the decoder's causal mask supplies its order: RoPE in the encoder"
    rope = next(text for claim, text in causal.items() if claim.startswith(lead))
    assert rope.startswith("holds. against RoPE (") and "RoPE (encoder only): " in rope


def test_unseen_lengths_judge_a_decoder_without_positions(sweep: Path):
    found = verdicts((sweep / "length_report.md").read_text())
    carried = {c: v for c, v in found.items() if c.startswith("a decoder without positions")}
    assert len(carried) == 3 and all(v.startswith("holds. ") for v in carried.values())


def test_the_length_report_answers_it_past_the_training_lengths(sweep: Path):
    # Kazemnejad et al.'s question is about the sentences past the cap: the length report's
    # placement table tests each placement against the same method in both stacks there, not
    # against the sinusoid as its other table does.
    report = (sweep / "length_report.md").read_text()
    section = report.split("## Which stack needs word order, past the training lengths")[1]
    section = section.split("\n## ")[0]
    assert f"on the {len(LONG)} test sentences longer than" in section
    table = tables(section)[0]
    assert table[0] == "| method | both stacks | encoder only | decoder only | none |"
    cells = {line.split(" | ")[0][2:]: line.strip("| ").split(" | ")[1:] for line in table[1:]}
    assert list(cells) == ["sinusoid", "Shaw k = 16", "RoPE"]
    for method, (both, encoder, decoder, none) in cells.items():
        assert "Δ" not in both
        assert "(Δ +0.0, p 1.000 (max 1.000))" in encoder  # as in both stacks, past the cap too
        assert none.endswith(" *)")
        if method == "sinusoid":  # lost past the cap wherever it is (the study's made-up rows)
            assert "(Δ +0.0, p 1.000 (max 1.000))" in decoder
        else:
            assert decoder.endswith(" *)") and "(Δ -" in decoder
    assert "(1 seed" not in section and "2 seeds" in section


def test_a_complete_sweep_reports_nothing_missing(sweep: Path):
    for name in ("report.md", "length_report.md"):
        assert "not what the table tests them against" not in (sweep / name).read_text()


def placed_only(root: Path, dropped: tuple[str, ...], runs: tuple[str, ...] = ()) -> Path:
    """The fixture's sweep laid out afresh in `root`, without the study's rows named in
    `dropped` (positions=<name>, both seeds) and the run folders named in `runs`, reported."""
    sweep = root / "where_positions_tiny"
    write_study(sweep, write_corpus(root))
    write_placements(sweep)
    for name in ("learned", "alibi", "t5", *dropped):
        for seed in (1, 2):
            shutil.rmtree(sweep / f"positions={name},train.seed={seed}")
    for run in runs:
        shutil.rmtree(sweep / run)
    assert main(["--samples", "100", str(sweep)]) == 0
    return sweep


def test_a_sweep_of_placements_alone_says_what_to_add(tmp_path: Path):
    # experiment=where_positions alone, as its one command trains it: the both-stack and none rows
    # are the position study's runs. Without them nothing can be tested; the report says so and
    # how to add them, instead of leaving the section out.
    sweep = placed_only(tmp_path, ("absolute", "relative", "rope", "none"))
    section = (sweep / "report.md").read_text().split("## Which stack needs word order")[1]
    assert not tables(section.split("\n## ")[0])
    lead = "This sweep has methods in one stack only but not what the table tests them against: "
    assert lead + "sinusoid, Shaw k = 16 and RoPE in both stacks, and the model without" in section
    assert "model.positions_in=both, and with positions=none" in section
    assert "rpr-nmt-report --collect RUN --into FOLDER" in section


def test_a_method_without_its_both_stack_row_is_named_under_the_table(tmp_path: Path):
    # The sinusoid and Shaw have their both-stack rows and are tabled; RoPE's is missing, so RoPE
    # is named instead of silently left out, and the none column is there.
    sweep = placed_only(tmp_path, ("rope",))
    section = (sweep / "report.md").read_text().split("## Which stack needs word order")[1]
    table = tables(section.split("\n## ")[0])[0]
    assert [line.split(" | ")[0][2:] for line in table[1:]] == ["sinusoid", "Shaw k = 16"]
    assert "tests them against: RoPE in both stacks. Train them" in section
    assert "(the sweep's command with model.positions_in=both)" in section


def test_a_placement_without_a_seed_in_common_says_so(tmp_path: Path):
    # Probe F10: RoPE in both stacks with seed 1 only and in the encoder only with seed 2 only:
    # the cell showed a bare score, and the seed-pair table left the row out without a word.
    runs = ("positions=rope,train.seed=2", "model.positions_in=encoder,positions=rope,train.seed=1")
    sweep = placed_only(tmp_path, (), runs)
    section = (sweep / "report.md").read_text().split("## Which stack needs word order")[1]
    rope = next(line for line in tables(section)[0] if line.startswith("| RoPE |"))
    encoder = rope.strip("| ").split(" | ")[2]
    assert encoder.endswith("(not tested: no seed in common with both stacks)")


def test_runs_of_two_recipes_get_no_placement_table_and_no_claims(sweep: Path, tmp_path: Path):
    # Probe 2026-11-29: where_positions and where_positions_lengths collected into one folder.
    # The table and the claims pick rows by position settings alone: the sinusoid's both-stack row
    # was paired with the uncapped runs of its placements, one "none" row served every method, and
    # --by-length read the cap of whichever run sorted first. Under two recipes the reports now
    # give the main table with a note naming the key instead, and keep no verdicts.
    mixed = tmp_path / "mixed"
    shutil.copytree(sweep, mixed)
    for run in mixed.glob("model.positions_in=*,positions=absolute,*"):
        config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
        config["data"]["max_train_source_tokens"] = None  # trained on every length
        (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    assert main(["--by-length", "--samples", "100", str(mixed)]) == 0
    note = "the runs differ in data.max_train_source_tokens besides their position settings"
    report, lengths = (mixed / "report.md").read_text(), (mixed / "length_report.md").read_text()
    for text in (report, lengths):
        assert note in text and "Which stack needs word order" not in text
        assert "Each claim tests the settings it judges" not in text  # no verdict
    assert "No claims and no placement table: " in report
    assert "Past the training lengths\n\nNo tests past the training cap" in lengths
    assert "| setting | seeds | valid BLEU | test BLEU |" in report  # the main table stays
    assert not (mixed / "claims.json").exists() and not (mixed / "length_claims.json").exists()


def test_the_position_fields_are_the_models():
    # recipe_keys tells a position setting from the recipe by these names: one that left the
    # schema, or a position field added without them, would count as a recipe.
    from dataclasses import fields

    from rpr_nmt.config import POSITION_FIELDS, ModelConfig

    names = [f.name for f in fields(ModelConfig)]
    assert set(POSITION_FIELDS) <= set(names)
    assert set(names) - set(POSITION_FIELDS) == {
        "d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers", "dropout",
        "attention_dropout", "activation_dropout", "tie_embeddings", "pre_norm",
    }  # fmt: skip
