"""The update step: token-normalised accumulation, NaN skipping, precision settings."""

from __future__ import annotations

import contextlib

import pytest
import torch

from rpr_nmt.train import DivergenceError, NonFiniteGuard, SettingsError, train_step
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.loss import label_smoothed_loss
from rpr_nmt.train.step import autocast_factory

from .helpers import PAD, random_batch, tiny_model


def _step(model, optimizer, batches, **kwargs):
    settings = dict(
        ctx=DistributedContext(), autocast=contextlib.nullcontext, scaler=None, pad_id=PAD,
        label_smoothing=0.1, clip_norm=0.0,
    )  # fmt: skip
    return train_step(model, optimizer, batches, **{**settings, **kwargs})


def test_accumulated_gradient_is_the_mean_over_all_target_tokens():
    batches = [random_batch(1), random_batch(2, n=5)]
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    reference = tiny_model()
    total = sum(b.n_tgt_tokens for b in batches)
    loss = sum(
        label_smoothed_loss(reference(b.src, b.tgt_in), b.tgt_out, epsilon=0.1, pad_id=PAD)[0]
        for b in batches
    )
    (loss / total).backward()
    result = _step(model, optimizer, batches)
    assert result.applied and result.n_tgt_tokens == total
    assert result.loss == pytest.approx(loss.item() / total, rel=1e-6)
    with torch.no_grad():
        for p, r in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p, r - r.grad, rtol=1e-5, atol=1e-6)  # SGD with lr 1


class _NaNAfterwards(torch.nn.Module):
    """A model whose logits become NaN while `poisoned` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = tiny_model()
        self.poisoned = False

    def forward(self, src, tgt_in):
        logits = self.inner(src, tgt_in)
        return logits * float("nan") if self.poisoned else logits


def test_non_finite_loss_skips_the_update_and_the_guard_stops():
    model = _NaNAfterwards()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    assert _step(model, optimizer, [random_batch(0)]).applied
    before = {k: v.clone() for k, v in model.state_dict().items()}
    adam_steps = optimizer.state[next(model.parameters())]["step"].clone()
    guard = NonFiniteGuard(max_bad_steps=3)
    model.poisoned = True
    for i in range(2):
        result = _step(model, optimizer, [random_batch(i)])
        assert not result.applied
        guard.check(result.applied, step=2)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k  # weights untouched
    assert torch.equal(optimizer.state[next(model.parameters())]["step"], adam_steps)
    assert all(p.grad is None for p in model.parameters())  # nothing leaks into the next update
    guard.check(True, step=2)  # a good update resets the count
    assert guard.in_a_row == 0
    with pytest.raises(DivergenceError, match="3 updates in a row"):
        for _ in range(3):
            guard.check(False, step=3)


def test_a_step_the_gradient_scaler_skips_is_reported_as_skipped():
    # A finite loss with an infinite gradient (as fp16 overflow gives): the scaler must skip the
    # optimizer step and halve its scale, and train_step must say the update was not applied.
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    hook = next(model.parameters()).register_hook(lambda grad: grad + float("inf"))
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    result = _step(model, optimizer, [random_batch(0)], scaler=scaler)
    assert not result.applied and scaler.get_scale() == 512.0
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    hook.remove()
    result = _step(model, optimizer, [random_batch(0)], scaler=scaler)
    assert result.applied and scaler.get_scale() == 512.0


def test_clipping_limits_the_norm():
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    result = _step(model, optimizer, [random_batch(3)], clip_norm=1e-3)
    assert result.grad_norm > 1e-3  # reported before clipping


def test_precision_settings():
    assert autocast_factory("fp32", torch.device("cpu"))() is not None
    with autocast_factory("bf16", torch.device("cpu"))():
        out = torch.nn.functional.linear(torch.randn(2, 4), torch.randn(3, 4))
    assert out.dtype == torch.bfloat16
    with pytest.raises(SettingsError, match="fp16 needs a CUDA device"):
        autocast_factory("fp16", torch.device("cpu"))
    with pytest.raises(SettingsError, match="fp8"):
        autocast_factory("fp8", torch.device("cpu"))
