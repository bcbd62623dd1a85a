"""ALiBi against Press et al.'s slopes and bias, and the lone-query trap of a cached bias."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.model.multihead import RelativeMultiheadAttention
from rpr_nmt.model.positions import ALiBi, PositionTerms, alibi_slopes

from .reference import check_against_naive

CPU = torch.device("cpu")


def test_slopes_are_the_papers():
    # 8 heads: 1/2, 1/4, ..., 1/256 (sec. 3).
    assert alibi_slopes(8) == [2.0**-e for e in range(1, 9)]
    assert alibi_slopes(2) == [2.0**-4, 2.0**-8]
    assert alibi_slopes(1) == [2.0**-8]
    # Not a power of two: the 4-head slopes, then every other slope of the 8-head sequence.
    assert alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert alibi_slopes(3) == [2.0**-4, 2.0**-8, 2.0**-2]
    twelve = alibi_slopes(12)  # 8 heads, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5
    assert twelve[:8] == alibi_slopes(8)
    assert twelve[8:] == pytest.approx([2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5])


def test_bias_is_minus_slope_times_distance_from_absolute_positions():
    bias = ALiBi(2).bias(2, 5, q_offset=2, device=CPU)  # queries at 2, 3; keys at 0 .. 4
    distance = torch.tensor([[2, 1, 0, 1, 2], [3, 2, 1, 0, 1]], dtype=torch.float32)
    torch.testing.assert_close(bias, torch.stack([-distance / 16, -distance / 256]))


def test_a_lone_query_at_step_t_uses_its_own_row_not_row_zero():
    """OpenNMT-py's trap: a buffer built for a training-shaped call, sliced [:i, :j] for the one
    query of step t, gives row 0, whose slope runs the wrong way. Ours is built from q_offset."""
    alibi, T = ALiBi(4), 7
    full = alibi.bias(T, T, 0, CPU)  # (H, T, T)
    for t in range(T):
        step = alibi.bias(1, t + 1, q_offset=t, device=CPU)  # (H, 1, t + 1)
        torch.testing.assert_close(step, full[:, t : t + 1, : t + 1], rtol=0, atol=0)
        assert t == 0 or (step[:, 0, 0] < step[:, 0, t]).all()  # the oldest key is penalised most


@pytest.mark.parametrize("n_heads", [2, 3])
@pytest.mark.parametrize(
    "causal,padded", [(False, False), (False, True), (True, False), (True, True)]
)
@pytest.mark.parametrize("length", [5, 10])  # 10 > FEW_QUERIES: PyTorch's fused kernel
def test_attention_matches_naive_loop_forward_and_backward(n_heads, causal, padded, length):
    torch.manual_seed(2)
    attn = RelativeMultiheadAttention(4 * n_heads, n_heads, causal=causal)
    alibi = ALiBi(n_heads)
    slopes = alibi_slopes(n_heads)

    def bias(h, i, j):  # causal: -m (i - j) on the visible keys; encoder: -m |i - j| (OpenNMT-py)
        return torch.tensor(-slopes[h] * ((i - j) if causal else abs(i - j)), dtype=torch.float64)

    def terms_of(n):
        return PositionTerms(bias=alibi.bias(n, n, 0, CPU))

    check_against_naive(
        attn, terms_of, length=length, causal=causal, padded=padded, bias=bias, atol=1e-10
    )


def test_hidden_keys_keep_exactly_zero_weight_under_the_bias():
    """A padded key gets weight 0, not a tiny one: the output ignores whatever its value is."""
    torch.manual_seed(3)
    attn = RelativeMultiheadAttention(8, 2).eval()
    alibi = ALiBi(2)
    for length in (5, 10):
        x = torch.randn(1, length, 8)
        padding = torch.zeros(1, length, dtype=torch.bool)
        padding[0, -1] = True
        terms = PositionTerms(bias=alibi.bias(length, length, 0, CPU))
        out, _ = attn(x, key_padding_mask=padding, terms=terms)
        x2 = x.clone()
        x2[0, -1] = 1e4  # only the padded key's input changes
        out2, _ = attn(x2, key_padding_mask=padding, terms=terms)
        assert torch.equal(out[0, :-1], out2[0, :-1])
