"""Training: the Trainer loop, learning-rate schedule, loss, checkpoints and distributed setup."""

from rpr_nmt.train.errors import DivergenceError, SettingsError
from rpr_nmt.train.loss import label_smoothed_loss
from rpr_nmt.train.schedule import Schedule, learning_rate
from rpr_nmt.train.step import NonFiniteGuard, StepResult, train_step
from rpr_nmt.train.trainer import Trainer, train

__all__ = [
    "NonFiniteGuard",
    "Schedule",
    "SettingsError",
    "StepResult",
    "Trainer",
    "DivergenceError",
    "label_smoothed_loss",
    "learning_rate",
    "train",
    "train_step",
]
