"""The CPU dropout with packed 16-bit masks: rate, scaling, gradient, seeding."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.model.dropout import Dropout, dropout, dropout_mask


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_each_lane_drops_at_rate_p(p):
    torch.manual_seed(0)
    keep = dropout_mask((1000, 1000), p, torch.device("cpu"))
    assert keep.dtype == torch.bool and keep.shape == (1000, 1000)
    lanes = keep.flatten().view(-1, 4).float()  # column c = lane c of every 64-bit word
    dropped = 1.0 - lanes.mean(dim=0)
    # 250k samples per lane: 5 standard deviations are under 0.005.
    assert torch.allclose(dropped, torch.full((4,), p), atol=0.005)


def test_masks_of_odd_sizes_and_their_positions_are_independent():
    torch.manual_seed(1)
    keep = dropout_mask((3, 7, 5), 0.5, torch.device("cpu"))
    assert keep.shape == (3, 7, 5)
    torch.manual_seed(1)
    big = dropout_mask((200_000,), 0.5, torch.device("cpu")).float()
    # Neighbouring elements (same word or the next) must not be correlated.
    centred = big - big.mean()
    correlation = (centred[:-1] * centred[1:]).mean() / centred.var()
    assert abs(float(correlation)) < 0.02


def test_kept_elements_are_scaled_and_dropped_ones_are_zero():
    torch.manual_seed(2)
    x = torch.rand(64, 33) + 0.5  # no zeros of its own
    y = dropout(x, 0.25)
    kept = y != 0
    assert 0 < int(kept.sum()) < x.numel()
    torch.testing.assert_close(y[kept], x[kept] / 0.75)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradient_uses_the_forward_mask(dtype):
    torch.manual_seed(3)
    x = (torch.rand(17, 9) + 0.5).to(dtype).requires_grad_()
    y = dropout(x, 0.2)
    upstream = torch.randn_like(y)
    y.backward(upstream)
    expected = torch.where(y.detach() != 0, upstream / 0.8, 0.0)
    assert x.grad.dtype == dtype
    torch.testing.assert_close(x.grad, expected.to(dtype))


def test_expected_value_is_kept():
    torch.manual_seed(4)
    assert float(dropout(torch.ones(400_000), 0.1).mean()) == pytest.approx(1.0, abs=0.005)


def test_same_seed_same_mask_and_eval_is_identity():
    x = torch.rand(10, 10) + 0.5
    torch.manual_seed(5)
    a = dropout(x, 0.5)
    torch.manual_seed(5)
    b = dropout(x, 0.5)
    assert torch.equal(a, b)
    module = Dropout(0.5).eval()
    assert module(x) is x
    assert dropout(x, 0.0) is x


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_impossible_rates_are_refused(p):
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(p)
    with pytest.raises(ValueError, match="dropout probability"):
        dropout(torch.ones(3), p)
