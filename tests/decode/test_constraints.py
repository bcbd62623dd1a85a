"""The rules both searches share: length limits and the tokens allowed next."""

from __future__ import annotations

import math

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
