"""The trainer's own exceptions (bad data and checkpoints raise DataError and CheckpointError)."""

from __future__ import annotations


class SettingsError(ValueError):
    """Settings that compose but cannot work, e.g. fp16 on CPU; the message says what to change."""


class DivergenceError(RuntimeError):
    """The loss was NaN or infinite for train.max_bad_steps updates in a row."""


class PeerError(RuntimeError):
    """Rank 0 failed in a step the other ranks waited for, and reported it itself."""
