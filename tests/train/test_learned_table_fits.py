"""A learned position table shorter than the data is refused before training, in one line naming
the longest sentence, model.max_positions and the fix; one that holds the data trains, validates
(greedy BLEU capped at the table) and finishes."""

from __future__ import annotations

import json

import pytest

from rpr_nmt.config import DataConfig, ModelConfig
from rpr_nmt.data import EncodedCorpus, Ragged, prepare_data
from rpr_nmt.train import SettingsError, train
from rpr_nmt.train.setup import check_learned_table_fits

from .conftest import compose_config

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
