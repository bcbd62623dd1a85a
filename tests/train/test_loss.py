"""Label-smoothed cross-entropy against a hand computation; padding positions contribute nothing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from rpr_nmt.train import label_smoothed_loss

PAD = 0


def test_matches_hand_computation():
    # One position, V = 3, reference 1, eps = 0.3: q = (0.1, 0.8, 0.1).
    logits = torch.tensor([[[1.0, 2.0, 0.5]]])
    z = math.log(math.exp(1.0) + math.exp(2.0) + math.exp(0.5))
    logp = [1.0 - z, 2.0 - z, 0.5 - z]
    expected = -(0.1 * logp[0] + 0.8 * logp[1] + 0.1 * logp[2])
    loss, nll = label_smoothed_loss(logits, torch.tensor([[1]]), epsilon=0.3, pad_id=PAD)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert nll.item() == pytest.approx(-logp[1], rel=1e-6)


def test_padding_is_ignored_and_sums_over_tokens():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 7)
    target = torch.tensor([[3, 5, 2, PAD], [4, PAD, PAD, PAD]])
    loss, nll = label_smoothed_loss(logits, target, epsilon=0.1, pad_id=PAD)
    # Changing the logits of padded positions changes nothing.
    noisy = logits.clone()
    noisy[target == PAD] = 1e4 * torch.randn_like(noisy[target == PAD])
    loss2, nll2 = label_smoothed_loss(noisy, target, epsilon=0.1, pad_id=PAD)
    assert torch.equal(loss, loss2) and torch.equal(nll, nll2)
    # The sum over the 4 real tokens, as torch's own label smoothing computes it.
    reference = F.cross_entropy(
        logits.reshape(-1, 7), target.reshape(-1), ignore_index=PAD, label_smoothing=0.1,
        reduction="sum",
    )  # fmt: skip
    assert loss.item() == pytest.approx(reference.item(), rel=1e-6)
    plain = F.cross_entropy(
        logits.reshape(-1, 7), target.reshape(-1), ignore_index=PAD, reduction="sum"
    )
    assert nll.item() == pytest.approx(plain.item(), rel=1e-6)


def test_gradient_flows_only_through_loss():
    logits = torch.randn(1, 3, 5, requires_grad=True)
    loss, nll = label_smoothed_loss(logits, torch.tensor([[1, 2, PAD]]), epsilon=0.1, pad_id=PAD)
    loss.backward()
    assert not nll.requires_grad
    assert torch.all(logits.grad[0, 2] == 0)  # the padded position gets no gradient
    assert logits.grad[0, :2].abs().sum() > 0


def plain_label_smoothed_loss(logits, target, epsilon):
    """The textbook form under autograd: log_softmax, gather, mean."""
    lprobs = torch.log_softmax(logits, dim=-1)
    keep = target != PAD
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -lprobs.mean(dim=-1)
    return (((1 - epsilon) * nll + epsilon * uniform) * keep).sum()


def test_fused_gradient_equals_autograd_of_the_plain_form():
    torch.manual_seed(1)
    logits = torch.randn(3, 5, 11, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 11, (3, 5))
    target[1, 3:] = PAD
    loss, _ = label_smoothed_loss(logits, target, epsilon=0.1, pad_id=PAD)
    (grad,) = torch.autograd.grad(3.0 * loss, logits)
    reference = plain_label_smoothed_loss(logits, target, 0.1)
    (expected,) = torch.autograd.grad(3.0 * reference, logits)
    torch.testing.assert_close(loss, reference)
    torch.testing.assert_close(grad, expected)
    assert torch.autograd.gradcheck(
        lambda x: label_smoothed_loss(x, target, epsilon=0.2, pad_id=PAD)[0], (logits,)
    )


def test_bf16_logits_get_bf16_gradients():
    logits = torch.randn(2, 3, 9).bfloat16().requires_grad_()
    target = torch.tensor([[1, 2, PAD], [4, 5, 6]])
    loss, _ = label_smoothed_loss(logits, target, epsilon=0.1, pad_id=PAD)
    loss.backward()
    assert loss.dtype == torch.float32 and logits.grad.dtype == torch.bfloat16
    expected = plain_label_smoothed_loss(logits.detach().float(), target, 0.1)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_epsilon_zero_is_plain_cross_entropy():
    logits = torch.randn(3, 2, 6)
    target = torch.tensor([[1, 2], [3, PAD], [5, 4]])
    loss, nll = label_smoothed_loss(logits, target, epsilon=0.0, pad_id=PAD)
    assert loss.item() == pytest.approx(nll.item())
