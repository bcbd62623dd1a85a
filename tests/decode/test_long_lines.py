"""One line longer than a learned position table: scoring names its line in one PositionLimitError
(a ValueError), and translation refuses it as such, not as the model's error halfway through a
batch; every line that fits decodes as before."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.config import DecodeConfig, ModelConfig
from rpr_nmt.data import Tokenizer
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.decode import translate
from rpr_nmt.decode.constraints import PositionLimitError
from rpr_nmt.decode.forced import score_references
from rpr_nmt.model import build_model

WORDS = "a man woman dog child rides runs on the red blue bike street park".split()


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    g = torch.Generator().manual_seed(0)
    lines = [" ".join(WORDS[i] for i in torch.randint(0, len(WORDS), (6,), generator=g).tolist())
             for _ in range(100)]  # fmt: skip
    return Tokenizer.from_proto(train_bpe(lines, vocab_size=60, character_coverage=1.0))


def learned(tokenizer: Tokenizer, rows: int) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelConfig(
        d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
        absolute_positions="learned", max_positions=rows, max_relative_position=0,
        relative_positions="none",
    )  # fmt: skip
    return build_model(cfg, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id).eval()


def positions(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text)) + 1  # + EOS (a source), or BOS + ids (a reference)


def test_scoring_names_the_line_of_a_source_past_the_table(tokenizer):
    model = learned(tokenizer, 20)
    long = " ".join(WORDS * 2)
    sources, refs = ["a man rides", "the dog", long, "woman"], ["the man", "a dog", "bike", "a"]
    with pytest.raises(PositionLimitError) as error:
        score_references(model, tokenizer, sources, refs, DecodeConfig())
    n = positions(tokenizer, long)
    assert str(error.value) == (
        f"line 3: a source of {n} positions is longer than the learned position table "
        "(model.max_positions=20): shorten or split it, or use a model trained with a larger "
        "model.max_positions"
    )
    assert (error.value.line, error.value.side) == (3, "source")


def test_scoring_names_the_line_of_a_reference_past_the_table(tokenizer):
    model = learned(tokenizer, 20)
    long = " ".join(WORDS * 2)
    with pytest.raises(PositionLimitError, match=r"^line 2: a reference of \d+ positions"):
        score_references(model, tokenizer, ["a", "b"], ["a man", long], DecodeConfig())
    fits = score_references(model, tokenizer, ["a", "b"], ["a man", "the dog"], DecodeConfig())
    assert len(fits) == 2


@pytest.mark.parametrize("beam_size", [1, 4])
def test_translation_refuses_a_long_source_as_a_position_limit_error(tokenizer, beam_size):
    model = learned(tokenizer, 20)
    cfg = DecodeConfig(beam_size=beam_size, streams=1)
    short = ["a man rides on the street", "the dog"]
    assert len(translate(model, tokenizer, short, cfg)) == 2  # capped at 19 tokens: no error
    with pytest.raises(PositionLimitError, match=r"^line 3: a source of \d+ positions is longer"):
        translate(model, tokenizer, [*short, " ".join(WORDS * 2)], cfg)


def test_translation_checks_every_source_before_decoding_and_names_the_first_long_line(tokenizer):
    # Found in a length-sorted batch, the first long line in input order was not the one named
    # (a longer one later sorts first), and nothing said which line it was.
    model = learned(tokenizer, 20)
    long, longer = " ".join(WORDS * 2), " ".join(WORDS * 3)
    sentences = ["a man", "", long, "the dog", longer]
    with pytest.raises(PositionLimitError) as error:
        translate(model, tokenizer, sentences, DecodeConfig(streams=1), first_line=101)
    assert (error.value.line, error.value.positions) == (103, positions(tokenizer, long))
    assert str(error.value).startswith(f"line 103: a source of {positions(tokenizer, long)} ")
