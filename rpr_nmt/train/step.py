"""One optimizer update: forward/backward over the accumulated batches, clip, step.

Gradient normalisation. Each batch's loss is a sum over its non-padding target tokens. Before the
backward passes, the update's target tokens are counted on every rank and summed (N: all accumulated
batches on all ranks), and each batch's summed loss is multiplied by world_size / N.
DistributedDataParallel averages gradients over ranks (divides by world_size), so the optimizer sees
d(sum of all token losses) / N: every target token weighs the same, and 2 processes with
update_freq 1 compute the same update as 1 process with update_freq 2 on the same batches.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from rpr_nmt.model.arithmetic import ARITHMETICS, use_arithmetic
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.errors import DivergenceError, SettingsError
from rpr_nmt.train.loss import label_smoothed_loss

PRECISIONS = ("fp32", "bf16", "fp16")


@dataclass
class StepResult:
    """What one update did.

    Attributes:
        loss: label-smoothed loss per non-padding target token, over all batches and ranks.
        nll: cross-entropy per target token (log of the perplexity).
        n_src_tokens: non-padding source tokens of the update (all ranks).
        n_tgt_tokens: non-padding target tokens of the update (all ranks).
        grad_norm: global gradient norm before clipping (nan when the update was skipped early).
        applied: False when a non-finite loss or gradient made the update be skipped.
        stop: some rank asked to stop (signal or time limit) before this update.
    """

    loss: float
    nll: float
    n_src_tokens: int
    n_tgt_tokens: int
    grad_norm: float
    applied: bool
    stop: bool


def check_arithmetic(arithmetic: int | None, *, unresolved: bool = False) -> None:
    """Refuse a train.arithmetic that is none (SettingsError naming the values there are); with
    `unresolved`, also null (the setting before a run resolves it: new or resumed)."""
    if arithmetic not in ARITHMETICS and not (unresolved and arithmetic is None):
        raise SettingsError(
            f"train.arithmetic={arithmetic!r} is not an arithmetic; use 1 (the published bf16 "
            "runs'), 2 (shared inputs cast once, NumPy's dropout masks) or null (2 for a new "
            "run, a resumed run's own)"
        )


def autocast_factory(
    precision: str, device: torch.device, arithmetic: int = 1
) -> Callable[[], Any]:
    """A function returning the autocast context of train.precision on `device`, computing with
    train.arithmetic (rpr_nmt/model/arithmetic.py) inside it.

    bf16 autocast works on CPU and CUDA; fp16 needs a gradient scaler and is CUDA-only.
    """
    check_arithmetic(arithmetic)
    if precision not in PRECISIONS:
        raise SettingsError(
            f"train.precision={precision!r} is not a precision; use one of {PRECISIONS}"
        )
    if precision == "fp16" and device.type != "cuda":
        raise SettingsError(
            "train.precision=fp16 needs a CUDA device (fp16 with a grad scaler); "
            "on CPU use train.precision=bf16 or fp32"
        )
    if precision == "fp32":
        return contextlib.nullcontext
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return lambda: _reduced(device.type, dtype, arithmetic)


@contextlib.contextmanager
def _reduced(device_type: str, dtype: torch.dtype, arithmetic: int) -> Iterator[None]:
    """Autocast to `dtype`, computing with `arithmetic`."""
    with torch.autocast(device_type=device_type, dtype=dtype), use_arithmetic(arithmetic):
        yield


class NonFiniteGuard:
    """Counts skipped updates in a row and gives up after `max_bad_steps` of them."""

    def __init__(self, max_bad_steps: int) -> None:
        self.max_bad_steps = max_bad_steps
        self.in_a_row = 0

    def check(self, applied: bool, step: int) -> None:
        """Record whether the update at `step` was applied; raise DivergenceError at the limit."""
        self.in_a_row = 0 if applied else self.in_a_row + 1
        if self.in_a_row >= max(self.max_bad_steps, 1):
            raise DivergenceError(
                f"the loss or the gradients were NaN/inf in {self.in_a_row} updates in a row "
                f"(at update {step}); lower train.lr, raise train.warmup_steps or set "
                "train.clip_norm"
            )


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[Any],
    *,
    ctx: DistributedContext,
    autocast: Callable[[], Any],
    scaler: torch.amp.GradScaler | None,
    pad_id: int,
    label_smoothing: float,
    clip_norm: float,
    stop: bool = False,
) -> StepResult:
    """Forward/backward over `batches` (accumulated), clip, step; skip it on a non-finite loss.

    Args:
        model: the module to call: the Transformer, or its DDP / torch.compile wrapper.
        optimizer: the optimizer, learning rate already set.
        batches: this rank's batches of the update (train.update_freq of them).
        ctx: the distributed context.
        autocast: returns the precision context (autocast_factory).
        scaler: the fp16 gradient scaler, or None.
        pad_id: padding id of the targets.
        label_smoothing: epsilon.
        clip_norm: clip the global gradient norm to this; 0 = no clipping.
        stop: this rank wants to stop after this update (shared with the other ranks).

    Returns:
        The update's figures, identical on every rank.
    """
    counts = torch.tensor(
        [sum(b.n_src_tokens for b in batches), sum(b.n_tgt_tokens for b in batches), float(stop)],
        dtype=torch.float64,
    )
    n_src, n_tgt, stops = ctx.all_reduce_sum(counts).tolist()
    scale = ctx.world_size / max(n_tgt, 1.0)
    loss_sum = torch.zeros((), dtype=torch.float64, device=ctx.device)
    nll_sum = torch.zeros((), dtype=torch.float64, device=ctx.device)
    for i, batch in enumerate(batches):
        batch = batch.to(ctx.device)
        last = i == len(batches) - 1
        # Synchronise gradients across ranks only on the last backward of the update.
        sync = contextlib.nullcontext() if last or not ctx.distributed else _no_sync(model)
        with sync:
            with autocast():
                logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            loss, nll = label_smoothed_loss(
                logits, batch.tgt_out, epsilon=label_smoothing, pad_id=pad_id
            )
            scaled = loss * scale
            (scaler.scale(scaled) if scaler is not None else scaled).backward()
        loss_sum += loss.detach()
        nll_sum += nll
    totals = ctx.all_reduce_sum(torch.stack([loss_sum, nll_sum]).cpu())
    loss_value, nll_value = (totals / max(n_tgt, 1.0)).tolist()
    applied, grad_norm = _clip_and_step(model, optimizer, scaler, clip_norm, loss_value)
    optimizer.zero_grad(set_to_none=True)
    return StepResult(
        loss=loss_value, nll=nll_value, n_src_tokens=int(n_src), n_tgt_tokens=int(n_tgt),
        grad_norm=grad_norm, applied=applied, stop=stops > 0,
    )  # fmt: skip


def _clip_and_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    clip_norm: float,
    loss: float,
) -> tuple[bool, float]:
    """Unscale, measure and clip the gradients; step unless the loss or gradients are not finite."""
    if not math.isfinite(loss):
        return False, math.nan
    if scaler is not None:
        scaler.unscale_(optimizer)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads, norm_type=2.0)
    if clip_norm > 0:
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), clip_norm, norm)
    grad_norm = float(norm)
    if scaler is not None:
        # The scaler skips a step whose gradients hold inf/nan itself, and lowers its scale
        # exactly then: a lower scale afterwards means this update was not applied.
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        return scaler.get_scale() >= scale, grad_norm
    if not math.isfinite(grad_norm):
        return False, grad_norm
    optimizer.step()
    return True, grad_norm


def _no_sync(model: nn.Module) -> contextlib.AbstractContextManager:
    """DistributedDataParallel.no_sync of the model, looking through a torch.compile wrapper."""
    inner = getattr(model, "_orig_mod", model)
    return inner.no_sync()
