"""Perplexity overall, by source-length bucket and by target position, on hand-made scores."""

from __future__ import annotations

import json
import math
from dataclasses import asdict

import pytest

from rpr_nmt.config import ScoreJobConfig
from rpr_nmt.decode.forced import SentenceScore
from rpr_nmt.evaluate.likelihood import (
    bucket_table,
    by_source_length,
    by_target_position,
    corpus_perplexity,
    write_scores,
)
from rpr_nmt.report.lengths import DEFAULT_BOUNDS


def score(logprobs: list[float], src_len: int) -> SentenceScore:
    return SentenceScore(list(range(len(logprobs))), logprobs, sum(logprobs), src_len)


SCORES = [score([-1.0, -2.0, -3.0], src_len=4), score([-0.5, -0.5], src_len=12)]


def test_corpus_perplexity_pools_tokens():
    figures = corpus_perplexity(SCORES)
    assert (figures.tokens, figures.sentences) == (5, 2)
    assert figures.nll_per_token == pytest.approx(7.0 / 5)
    assert figures.perplexity == pytest.approx(math.exp(7.0 / 5))


def test_buckets_by_source_length_and_by_target_position():
    bounds = [1, 2, 11]
    source = by_source_length(SCORES, bounds)
    assert [(f.tokens, f.sentences) for f in source] == [(0, 0), (3, 1), (2, 1)]
    assert math.isnan(source[0].perplexity)
    assert source[1].perplexity == pytest.approx(math.exp(2.0))
    assert source[2].perplexity == pytest.approx(math.exp(0.5))
    target = by_target_position(SCORES, bounds)  # positions 1 | 2-10 | 11+
    assert [(f.tokens, f.sentences) for f in target] == [(2, 2), (3, 2), (0, 0)]
    assert target[0].nll_per_token == pytest.approx(0.75)
    assert target[1].nll_per_token == pytest.approx(5.5 / 3)
    table = bucket_table("target position", ["1", "2-10", "11+"], target)
    assert table.splitlines()[2] == f"| 1 | {math.exp(0.75):.2f} | 2 | 2 |"
    assert table.splitlines()[4] == "| 11+ | - | 0 | 0 |"


def test_default_buckets_are_those_of_the_length_report():
    assert tuple(ScoreJobConfig().bounds) == DEFAULT_BOUNDS


def test_write_scores_one_line_per_sentence_and_the_json(tmp_path):
    text, record = write_scores(tmp_path, "test", SCORES, {"perplexity": 4.0})
    assert text.read_text().splitlines() == [
        "-6.0000 ||| -1.0000 -2.0000 -3.0000",
        "-1.0000 ||| -0.5000 -0.5000",
    ]
    assert json.loads(record.read_text()) == {"perplexity": 4.0}


def test_an_empty_bucket_is_null_in_the_json_not_nan(tmp_path):
    # Probe K2: by_length=true wrote "perplexity": NaN for an empty bucket; JSON.parse refuses it.
    scores = [SentenceScore([5, 3], [-1.0, -0.5], -1.5, 4)]
    buckets = [asdict(f) for f in by_source_length(scores, [1, 11])]
    assert math.isnan(buckets[1]["perplexity"])
    _, json_path = write_scores(tmp_path, "pairs", scores, {"by_source_length": buckets})

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in {json_path}")

    record = json.loads(json_path.read_text(), parse_constant=refuse)
    assert record["by_source_length"][1]["perplexity"] is None
    assert record["by_source_length"][1]["tokens"] == 0
    assert record["by_source_length"][0]["perplexity"] == pytest.approx(math.exp(0.75))
