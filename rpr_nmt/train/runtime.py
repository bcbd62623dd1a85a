"""A run's time and tokens across its sessions: what train.max_time_minutes and the summary's
tokens/s count. A resumed run starts from the totals its checkpoint carries (Progress)."""

from __future__ import annotations

from rpr_nmt.checkpoint import Progress
from rpr_nmt.train.signals import Clock


class RunTime:
    """Wall time, training tokens and training seconds of this session and of the whole run.

    Args:
        clock: seconds, monotonic (time.perf_counter; tests pass their own).
        limit_minutes: train.max_time_minutes; None = no limit.
    """

    def __init__(self, clock: Clock, limit_minutes: float | None) -> None:
        self.clock, self.limit_minutes = clock, limit_minutes
        self.started = self.training_started = clock()
        self.earlier = Progress()  # the totals of the run's earlier sessions (from the checkpoint)
        self.session = Progress()  # this session's training tokens and seconds

    def add_update(self, tokens: int, seconds: float, *, applied: bool) -> None:
        """Count one update's source + target tokens, the seconds it took, and whether it was
        skipped (a non-finite loss or gradient)."""
        self.session.train_tokens += tokens
        self.session.train_seconds += seconds
        self.session.skipped_updates += int(not applied)

    def start_training(self) -> None:
        """Start this session's share of run_seconds: the data preparation before it is left out."""
        self.training_started = self.clock()

    def run_seconds(self) -> float:
        """Wall time of the whole run's training (from each session's start_training)."""
        return self.earlier.run_seconds + self.clock() - self.training_started

    def session_seconds(self) -> float:
        """Wall time of this session."""
        return self.clock() - self.started

    def minutes_left(self, run_seconds: float | None = None) -> float | None:
        """Minutes left under the limit (None = no limit); negative once over it. The limit counts
        the run's total time, so a rerun does not start afresh."""
        if self.limit_minutes is None:
            return None
        seconds = self.run_seconds() if run_seconds is None else run_seconds
        return self.limit_minutes - seconds / 60

    def skipped_updates(self) -> int:
        """Updates of the whole run skipped for a non-finite loss or gradient."""
        return self.earlier.skipped_updates + self.session.skipped_updates

    def session_tokens_per_sec(self) -> float:
        """This session's training speed (the progress bar's)."""
        return self.session.train_tokens / max(self.session.train_seconds, 1e-9)

    def totals(self, train_loss: float | None) -> Progress:
        """Whole-run totals, as a checkpoint stores them."""
        return Progress(
            train_loss=train_loss,
            run_seconds=self.run_seconds(),
            train_tokens=self.earlier.train_tokens + self.session.train_tokens,
            train_seconds=self.earlier.train_seconds + self.session.train_seconds,
            skipped_updates=self.skipped_updates(),
        )
