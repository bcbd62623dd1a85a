"""Learned absolute positions: rows added to the embeddings, and a clear error past the table."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import build_model
from rpr_nmt.model.embeddings import TokenEmbedding
from rpr_nmt.model.positions import LearnedPositions


def test_each_position_adds_its_own_row():
    torch.manual_seed(0)
    table = torch.nn.Embedding(10, 4)
    learned = LearnedPositions(6, 4)
    embed = TokenEmbedding(table, dropout=0.0, sinusoidal=False, learned=learned)
    tokens = torch.tensor([[3, 1, 4], [1, 5, 9]])
    x = embed(tokens, first_position=2)  # positions 2, 3, 4
    for b in range(2):
        for t in range(3):
            want = table.weight[tokens[b, t]] * 2.0 + learned.table[2 + t]  # sqrt(D) = 2
            torch.testing.assert_close(x[b, t], want, rtol=0, atol=1e-6)
    x.sum().backward()
    assert learned.table.grad[2:5].abs().sum() > 0 and learned.table.grad[[0, 1, 5]].eq(0).all()


def test_an_input_past_the_table_is_one_error_naming_its_length_and_the_key():
    learned = LearnedPositions(5, 4)
    assert learned(5).shape == (5, 4)
    with pytest.raises(ValueError, match=r"input of 6 positions .* model\.max_positions=5"):
        learned(6)
    with pytest.raises(ValueError, match=r"input of 7 positions"):  # a decoding step past it
        learned(1, first_position=6)


def test_a_model_refuses_a_source_longer_than_its_table():
    cfg = ModelConfig(
        d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
        absolute_positions="learned", max_positions=4, max_relative_position=0,
    )  # fmt: skip
    model = build_model(cfg, vocab_size=20, pad_id=0)
    model(torch.randint(1, 20, (1, 4)), torch.randint(1, 20, (1, 4)))
    with pytest.raises(ValueError, match=r"input of 5 positions .* model\.max_positions=4"):
        model(torch.randint(1, 20, (1, 5)), torch.randint(1, 20, (1, 4)))
    # One table per stack, in the embeddings only.
    names = [n for n, _ in model.named_parameters() if "learned" in n]
    assert names == ["encoder.embed.learned.table", "decoder.embed.learned.table"]
