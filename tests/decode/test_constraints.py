"""The rules both searches share: length limits and the tokens allowed next."""

from __future__ import annotations

import math

import pytest
import torch

from rpr_nmt.decode import max_output_lengths, next_token_logprobs

PAD, BOS, EOS = 0, 2, 3
RULES = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)
NEG_INF = float("-inf")


def test_output_lengths_count_the_source_eos_and_respect_min_len():
    src = torch.tensor([[5, 6, EOS], [5, EOS, PAD]])
    got = max_output_lengths(src, max_len_a=1.5, max_len_b=1, min_len=0, pad_id=PAD)
    assert got.tolist() == [5, 4]  # floor(1.5 * 3 + 1), floor(1.5 * 2 + 1)
    got = max_output_lengths(src, max_len_a=0.0, max_len_b=1, min_len=3, pad_id=PAD)
    assert got.tolist() == [3, 3]


def test_next_token_logprobs_forbid_specials_early_eos_and_all_but_eos_at_the_limit():
    V = 6
    logits = torch.arange(2 * 2 * V, dtype=torch.bfloat16).view(4, 1, V) / 7  # 2 sentences x 2
    full = torch.log_softmax(logits[:, -1].float(), dim=-1).view(2, 2, V)
    max_len = torch.tensor([4, 2])  # sentence 1 is at its limit when t = 2

    early = next_token_logprobs(logits, 0, max_len, min_len=1, **RULES)
    assert early.shape == (2, 2, V) and early.dtype == torch.float32
    for token in (PAD, BOS, EOS):
        assert (early[..., token] == NEG_INF).all()
    assert torch.equal(early[..., [1, 4, 5]], full[..., [1, 4, 5]])  # not renormalised

    at_limit = next_token_logprobs(logits, 2, max_len, min_len=1, **RULES)
    assert torch.equal(at_limit[0, :, EOS], full[0, :, EOS])  # EOS allowed again
    assert torch.equal(at_limit[0, :, 4:], full[0, :, 4:])
    assert torch.equal(at_limit[1, :, EOS], full[1, :, EOS])  # only EOS, at its probability
    others = [token for token in range(V) if token != EOS]
    assert (at_limit[1][:, others] == NEG_INF).all()


def test_next_token_logprobs_of_greedy_rows_and_of_the_newest_position():
    logits = torch.randn(3, 4, 5)  # 3 sentences, one row each, a block of 4 positions
    got = next_token_logprobs(logits, 5, torch.tensor([9, 9, 9]), min_len=0, **RULES)
    assert got.shape == (3, 1, 5)
    want = torch.log_softmax(logits[:, -1], dim=-1)
    assert torch.equal(got[:, 0, 4], want[:, 4]) and math.isinf(got[0, 0, PAD])


def test_a_learned_decoder_table_caps_the_limit_below_min_len_too():
    src = torch.tensor([[5, 6, EOS], [5, EOS, PAD]])
    got = max_output_lengths(src, max_len_a=1.5, max_len_b=1, min_len=9, pad_id=PAD)
    assert got.tolist() == [9, 9]
    got = max_output_lengths(
        src, max_len_a=1.5, max_len_b=1, min_len=9, pad_id=PAD, max_positions=5
    )
    assert got.tolist() == [4, 4]  # BOS + 4 tokens fill the 5 rows; EOS is predicted at the 5th


@pytest.mark.parametrize("a", [math.nan, math.inf])
def test_a_max_len_a_that_is_not_finite_is_refused(a):
    """NaN or inf made every limit min_len (floor(nan).long() is the smallest long), silently."""
    with pytest.raises(ValueError, match=f"^max_len_a={a} must be a finite number"):
        max_output_lengths(torch.tensor([[5, EOS]]), max_len_a=a, max_len_b=1, min_len=1, pad_id=0)


def test_at_the_limit_eos_is_allowed_even_before_min_len():
    V = 6
    logits = torch.arange(2 * V, dtype=torch.float32).view(2, 1, V) / 5  # 2 sentences, beam 1
    full = torch.log_softmax(logits[:, -1], dim=-1).view(2, 1, V)
    got = next_token_logprobs(logits, 3, torch.tensor([3, 8]), min_len=9, **RULES)
    assert torch.equal(got[0, 0, EOS], full[0, 0, EOS])  # capped at 3: ending is all that is left
    assert (got[0, 0, [t for t in range(V) if t != EOS]] == NEG_INF).all()
    assert got[1, 0, EOS] == NEG_INF and torch.equal(got[1, 0, 4:], full[1, 0, 4:])
