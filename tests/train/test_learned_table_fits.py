"""A learned position table shorter than the data is refused before training, in one line naming
the longest sentence, model.max_positions and the fix; one that holds the data trains, validates
(greedy BLEU capped at the table) and finishes."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from rpr_nmt.config import DataConfig, ModelConfig
from rpr_nmt.data import EncodedCorpus, Ragged, prepare_data
from rpr_nmt.train import SettingsError, train
from rpr_nmt.train.training_data import check_learned_table_fits

from .conftest import compose_config, run_train, tiny_overrides

LEARNED = dict(absolute_positions="learned", max_relative_position=0, relative_positions="none")
QUIET = ("train.evaluate_at_end=false",)


def corpus_of(src_lengths: list[int], tgt_lengths: list[int]) -> EncodedCorpus:
    rows = lambda lengths: Ragged.from_lists([[5] * n for n in lengths])  # noqa: E731
    return EncodedCorpus(rows(src_lengths), rows(tgt_lengths))


SPLITS = {"train": corpus_of([3, 26, 4], [5, 9, 2]), "valid": corpus_of([4, 6], [7, 5])}


def test_a_table_shorter_than_a_training_pair_names_it_and_both_fixes():
    model = ModelConfig(**LEARNED, max_positions=16)
    with pytest.raises(SettingsError) as error:
        check_learned_table_fits(model, DataConfig(max_tokens_per_sentence=256), SPLITS)
    assert str(error.value) == (
        "model.max_positions=16 is shorter than the data: the longest train source takes 27 "
        "positions (26 tokens + EOS); raise model.max_positions to at least 27, or lower "
        "data.max_tokens_per_sentence=256 to 15"
    )
    check_learned_table_fits(ModelConfig(**LEARNED, max_positions=27), DataConfig(), SPLITS)


def test_a_validation_sentence_past_the_table_is_not_mended_by_the_length_filter():
    splits = {**SPLITS, "valid": corpus_of([4, 6], [7, 73])}
    with pytest.raises(SettingsError) as error:
        check_learned_table_fits(ModelConfig(**LEARNED, max_positions=64), DataConfig(), splits)
    assert str(error.value) == (
        "model.max_positions=64 is shorter than the data: the longest valid target takes 74 "
        "positions (73 tokens + BOS); raise model.max_positions to at least 74 "
        "(data.max_tokens_per_sentence=256 filters the training pairs only)"
    )


def test_only_the_stacks_with_the_table_and_only_learned_tables_are_checked():
    check_learned_table_fits(ModelConfig(**LEARNED, max_positions=10, positions_in="decoder"),
                             DataConfig(), SPLITS)  # fmt: skip
    with pytest.raises(SettingsError, match="the longest train source takes 27 positions"):
        check_learned_table_fits(ModelConfig(**LEARNED, max_positions=10, positions_in="encoder"),
                                 DataConfig(), SPLITS)  # fmt: skip
    check_learned_table_fits(ModelConfig(max_positions=10), DataConfig(), SPLITS)  # the sinusoid


def longest_positions(corpus, cache_dir) -> int:
    config = compose_config(corpus, cache_dir)
    data = prepare_data(config.data, splits=["train", "valid"], log=lambda _: None)
    return max(
        int(ragged.lengths.max()) + 1
        for split in data.splits.values()
        for ragged in (split.src, split.tgt)
    )


def test_training_refuses_a_short_table_before_the_first_update(corpus, cache_dir, tmp_path):
    config = compose_config(corpus, cache_dir, "positions=learned", "model.max_positions=6")
    with pytest.raises(SettingsError, match=r"^model\.max_positions=6 is shorter than the data"):
        train(config, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_table_that_holds_the_data_trains_and_validates_within_it(corpus, cache_dir, tmp_path):
    """The validation BLEU decodes up to 1.2 S + 10 tokens, past a table that holds the data
    exactly: capped at its last row, it finishes (it failed at the first validation)."""
    rows = longest_positions(corpus, cache_dir)
    config = compose_config(
        corpus, cache_dir, "positions=learned", f"model.max_positions={rows}",
        "train.max_steps=4", *QUIET,
    )  # fmt: skip
    summary = train(config, tmp_path / "run")
    assert summary["steps"] == 4
    valid = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert any("bleu" in row for row in valid if row["kind"] == "valid")


@pytest.fixture(scope="module")
def long_test_corpus(corpus, tmp_path_factory):
    """The tiny corpus whose test split's line 5 is longer than any table that holds the rest."""
    root = tmp_path_factory.mktemp("long_test")
    for path in corpus.iterdir():
        shutil.copy(path, root / path.name)
    for lang, word in (("en", "dog"), ("de", "hund")):
        lines = (root / f"test.{lang}").read_text(encoding="utf-8").splitlines()
        lines[4] = " ".join([word] * 80)
        (root / f"test.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_a_new_run_refuses_a_test_source_past_the_table_before_training(
    long_test_corpus, cache_dir, tmp_path
):
    rows = longest_positions(long_test_corpus, cache_dir)
    table = ("positions=learned", f"model.max_positions={rows}", "train.max_steps=4")
    config = compose_config(long_test_corpus, cache_dir, *table)
    with pytest.raises(SettingsError) as error:
        train(config, tmp_path / "run")
    assert re.fullmatch(
        rf"local split 'test' line 5: a source of \d+ positions is longer than the learned "
        rf"position table \(model\.max_positions={rows}\): the evaluation at the end of training "
        r"cannot translate it, nor can rpr-nmt-evaluate with this model; raise "
        r"model\.max_positions to at least \d+, or set train\.evaluate_at_end=false",
        str(error.value),
    )
    assert not (tmp_path / "run" / "checkpoints").exists()
    train(compose_config(long_test_corpus, cache_dir, *table, *QUIET), tmp_path / "quiet")


def test_the_evaluation_at_the_end_names_a_long_test_source_and_keeps_the_checkpoints(
    long_test_corpus, cache_dir, tmp_path
):
    """A run trained before the check above (here: without the final evaluation) and rerun with
    it: rpr-nmt-train says which test line and what to do in one line, exit 2; it was a
    traceback after the checkpoints were saved."""
    rows = longest_positions(long_test_corpus, cache_dir)
    table = ("positions=learned", f"model.max_positions={rows}", "train.max_steps=4")
    run_dir = tmp_path / "run"
    train(compose_config(long_test_corpus, cache_dir, *table, *QUIET), run_dir)
    saved = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    out = run_train(tiny_overrides(long_test_corpus, cache_dir, run_dir, *table))
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    error = out.stderr.splitlines()[-1]  # after the progress bar's
    assert re.fullmatch(
        rf"rpr-nmt-train: error: local split 'test' line 5: a source of \d+ positions is longer "
        rf"than the learned position table \(model\.max_positions={rows}\): .*; the checkpoints "
        rf"in {re.escape(str(run_dir / 'checkpoints'))} are kept: evaluate another split "
        rf"\(rpr-nmt-evaluate checkpoint={re.escape(str(run_dir))} split=\.\.\.\), or train a new "
        r"run with model\.max_positions of at least \d+ to evaluate this one",
        error,
    )
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == saved
