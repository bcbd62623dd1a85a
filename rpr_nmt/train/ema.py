"""An exponential moving average of the weights (Marian's exponential smoothing, OpenNMT-py's
average_decay), kept in float32 beside the model.

After every applied update t (1, 2, ...):

    ema <- d_t * ema + (1 - d_t) * weights,     d_t = min(decay, (1 + t) / (10 + t))

The warm-up of d_t (as in TensorFlow's ExponentialMovingAverage with num_updates) keeps the
first updates from being dominated by the random initialisation. Validation, the final evaluation
and rpr-nmt-evaluate use the average when a run keeps one (checkpoints store it as `ema`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from rpr_nmt.checkpoint.state import with_average


def ema_decay_at(decay: float, step: int) -> float:
    """d_t: the weight of the old average at update `step` (1-based)."""
    return min(decay, (1 + step) / (10 + step))


class WeightAverage:
    """The float32 moving average of a model's floating-point parameters and buffers.

    Args:
        model: the model whose weights are averaged (its current weights start the average).
        decay: the weight of the old average once warmed up, e.g. 0.999; in (0, 1).
    """

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"train.ema_decay must be in (0, 1) or 0 for off, got {decay}")
        self.decay = decay
        self.average: dict[str, Tensor] = {
            name: value.detach().float().clone()
            for name, value in model.state_dict().items()
            if value.is_floating_point()
        }

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        """Fold the weights after update `step` into the average."""
        d = ema_decay_at(self.decay, step)
        current = model.state_dict()
        for name, average in self.average.items():
            average.mul_(d).add_(current[name].detach().float(), alpha=1.0 - d)

    def state_dict(self) -> dict[str, Tensor]:
        """The averaged tensors by state-dict name (what a checkpoint's `ema` holds)."""
        return self.average

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Continue from a checkpoint's `ema` (same names and shapes as this model's)."""
        missing = sorted(set(self.average) - set(state))
        if missing:
            raise ValueError(f"the checkpoint's weight average lacks {missing[:3]}")
        for name, average in self.average.items():
            average.copy_(state[name])

    def weights_for(self, model: nn.Module) -> dict[str, Tensor]:
        """A full state dict for `model` with the averaged tensors in the model's dtypes."""
        return with_average(model.state_dict(), self.average)

    @contextlib.contextmanager
    def swapped_into(self, model: nn.Module) -> Iterator[nn.Module]:
        """The model with the averaged weights inside the block, its own weights afterwards."""
        own = {name: value.detach().clone() for name, value in model.state_dict().items()}
        model.load_state_dict(self.weights_for(model))
        try:
            yield model
        finally:
            model.load_state_dict(own)


def evaluation_weights(
    ema: WeightAverage | None, model: torch.nn.Module
) -> contextlib.AbstractContextManager:
    """`model` with the weight average inside the block when the run keeps one (`ema`)."""
    return contextlib.nullcontext(model) if ema is None else ema.swapped_into(model)
