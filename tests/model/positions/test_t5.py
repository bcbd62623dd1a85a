"""T5's bucketed bias against Raffel et al.'s bucketing, written per offset, and its sharing."""

from __future__ import annotations

import math

import pytest
import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import build_model
from rpr_nmt.model.multihead import RelativeMultiheadAttention
from rpr_nmt.model.positions import PositionTerms, T5Bias, t5_bucket

from .reference import check_against_naive

CPU = torch.device("cpu")


def paper_bucket(offset: int, *, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """One offset j - i: exact buckets for small distances, log-spaced up to max_distance."""
    u, base = num_buckets, 0
    if bidirectional:
        u //= 2
        base = u if offset > 0 else 0
        n = abs(offset)
    else:
        n = max(-offset, 0)
    exact = u // 2
    if n < exact:
        return base + n
    return base + min(
        u - 1, exact + int(math.log(n / exact) / math.log(max_distance / exact) * (u - exact))
    )


def test_buckets_by_hand_for_t5s_defaults():
    def bucket(offsets, bidirectional):
        t = torch.tensor(offsets)
        return t5_bucket(t, bidirectional=bidirectional, num_buckets=32, max_distance=128).tolist()

    # Encoder: 16 buckets a side, 8 exact; j > i in 16 .. 31.
    assert bucket([0, -1, -7, 1, 7], True) == [0, 1, 7, 17, 23]
    assert bucket([-8, -16, -32, -64, -127, -128, -5000], True) == [8, 10, 12, 14, 15, 15, 15]
    assert bucket([8, 16, 128, 5000], True) == [24, 26, 31, 31]
    # Decoder: 32 buckets for i - j >= 0, 16 exact; future keys (hidden anyway) in bucket 0.
    assert bucket([0, -15, -16, -32, -64, -128, -1000, 3], False) == [0, 15, 16, 21, 26, 31, 31, 0]


@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 20), (16, 64), (6, 7)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_buckets_match_the_per_offset_formula(num_buckets, max_distance, bidirectional):
    offsets = torch.arange(-600, 600)
    got = t5_bucket(
        offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    want = [
        paper_bucket(
            o, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
        )
        for o in offsets.tolist()
    ]
    assert got.tolist() == want


@pytest.mark.parametrize(
    "causal,padded", [(False, False), (False, True), (True, False), (True, True)]
)
@pytest.mark.parametrize("length", [5, 10])
def test_attention_matches_naive_loop_forward_and_backward(causal, padded, length):
    torch.manual_seed(4)
    attn = RelativeMultiheadAttention(8, 2, causal=causal)
    t5 = T5Bias(n_heads=2, num_buckets=8, max_distance=6, bidirectional=not causal).double()

    def bias(h, i, j):
        b = paper_bucket(j - i, bidirectional=not causal, num_buckets=8, max_distance=6)
        return t5.weight[b, h]

    def terms_of(n):
        return PositionTerms(bias=t5.bias(n, n, 0, CPU))

    check_against_naive(
        attn, terms_of, length=length, causal=causal, padded=padded, bias=bias,
        extra_params=(t5.weight,),
    )  # fmt: skip


def tiny_t5(**fields) -> torch.nn.Module:
    cfg = ModelConfig(
        d_model=8, n_heads=2, d_ff=16, n_encoder_layers=3, n_decoder_layers=2,
        max_relative_position=0, relative_positions="t5", t5_num_buckets=8, t5_max_distance=16,
        **fields,
    )  # fmt: skip
    return build_model(cfg, vocab_size=20, pad_id=0)


def test_one_table_per_stack_by_default_of_the_t5_group_or_one_per_layer():
    shared = tiny_t5(share_relative_across_layers=True)
    names = [n for n, _ in shared.named_parameters() if "relative_terms" in n]
    assert names == ["encoder.relative_terms.t5.0.weight", "decoder.relative_terms.t5.0.weight"]
    per_layer = tiny_t5(share_relative_across_layers=False)
    names = [n for n, _ in per_layer.named_parameters() if "relative_terms" in n]
    assert len(names) == 3 + 2
    # Each layer's gradient reaches its own table; a shared table gathers every layer's.
    src, tgt = torch.randint(1, 20, (2, 6)), torch.randint(1, 20, (2, 5))
    per_layer(src, tgt).logsumexp(-1).sum().backward()
    assert all(p.grad.abs().sum() > 0 for n, p in per_layer.named_parameters() if "t5" in n)
