"""A training session's bookkeeping: what one session of a run keeps and leaves behind.

    state:    the update it is at, the best validation so far (and whether best.pt awaits it),
              the last training loss, why it stopped, where it last validated and saved
    resume:   checkpoints/last.pt read back (weights, optimizer, scaler, data position, random
              states, weight average, time), with a warning per setting the session changes
    save:     step_XXXXXXX.pt with last.pt (and best.pt) pointed at it
    summary:  train_summary.json, over the run's sessions

The Trainer (rpr_nmt.train.trainer) is a TrainingSession that sets up the model, data and
optimizer and runs the loop; what it saves is a rpr_nmt.checkpoint.TrainingState.
"""

from __future__ import annotations

import logging
import time
from copy import deepcopy
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from rpr_nmt.checkpoint import BestSoFar, TrainingState, load_checkpoint, write_step_checkpoint
from rpr_nmt.config import TrainConfig, TrainJobConfig
from rpr_nmt.data import BatchIterator, Tokenizer
from rpr_nmt.model.arithmetic import NEWEST
from rpr_nmt.train import rng
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.ema import WeightAverage
from rpr_nmt.train.monitor import peak_memory_mb, write_summary
from rpr_nmt.train.provenance import code_record, read_sessions
from rpr_nmt.train.runtime import RunTime
from rpr_nmt.train.schedule import Schedule, cooldown_factor
from rpr_nmt.train.setup import (
    check_resumed_arithmetic,
    resumed_precision,
    trained_arithmetic,
    training_arithmetic,
)
from rpr_nmt.train.signals import Clock, StopRequest
from rpr_nmt.train.step import autocast_factory

log = logging.getLogger("rpr_nmt.train")


class TrainingSession:
    """The bookkeeping of one session of a run: its state, resume, checkpoint and summary.

    Args:
        config: the composed job config (data, model, train, decode).
        run_dir: the run directory; checkpoints/last.pt there is resumed from.
        clock: wall time in seconds, for train.max_time_minutes and speed (tests pass their own).
        stop: a stop request to obey instead of SIGINT / SIGTERM (tests pass their own).
        stop_file: with the signals, a file whose existence asks to stop (see train).
    """

    # Set by the Trainer before it resumes (run and _setup).
    ctx: DistributedContext
    time: RunTime
    tokenizer: Tokenizer
    train_iterator: BatchIterator
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: Schedule
    ema: WeightAverage | None
    n_parameters: int
    requested_precision: str  # train.precision as given, before "auto" is resolved
    session_steps: int

    def __init__(
        self,
        config: TrainJobConfig,
        run_dir: str | Path,
        *,
        clock: Clock = time.perf_counter,
        stop: StopRequest | None = None,
        stop_file: Path | None = None,
    ) -> None:
        self.config = deepcopy(config)
        self.cfg = self.config.train
        self.run_dir = Path(run_dir)
        self.checkpoint_dir = self.run_dir / "checkpoints"
        self.clock, self.stop_request, self.stop_file = clock, stop, stop_file
        self.step = 0
        self.best = BestSoFar()
        self.best_pending = False  # a new best awaits the next checkpoint
        self.last_train_loss: float | None = None
        self.stopped_by = "max_steps"
        self.validated_at: int | None = None
        self.saved_at: int | None = None

    def _resume(self) -> None:
        """Continue from checkpoints/last.pt when the run directory has one."""
        path = self.checkpoint_dir / "last.pt"
        if not path.is_file():
            self._set_precision()
            return
        state = load_checkpoint(path)
        state.check_resumable(self.config, self.tokenizer.sha256, path)
        trained_in = trained_arithmetic(state.config.train)
        self.cfg.precision = resumed_precision(
            self.requested_precision, self.cfg.precision, state.config.train.precision,
            self.ctx.device, log, trained_in,
        )  # fmt: skip
        if self.cfg.arithmetic is None:  # train.arithmetic=null: the one the run trained in
            self.cfg.arithmetic = trained_in
        check_resumed_arithmetic(state.config.train, self.cfg.precision, self.cfg.arithmetic, path)
        if (before := state.config.train.precision) != self.cfg.precision:  # sessions.jsonl too
            log.warning("this run trained in %s and continues in %s from update %d", before,
                        self.cfg.precision, state.step)  # fmt: skip
        self._set_precision()
        self.model.load_state_dict(state.model)
        self.optimizer.load_state_dict(state.optimizer)
        if self.scaler is not None and state.scaler:
            self.scaler.load_state_dict(state.scaler)
        self.train_iterator.load_state_dict(_data_state(state.data_state, state.rng_per_rank))
        rng.restore_rng(state.rng_per_rank, self.ctx)
        if self.ema is not None and state.ema is not None:
            self.ema.load_state_dict(state.ema)
        _warn_resumed_schedule(state.config.train, self.cfg, self.schedule, state.step)
        _warn_resumed_average(state.config.train.ema_decay, self.cfg.ema_decay, state.ema)
        self.step = self.saved_at = state.step
        self.best = _resumed_best(state.best, state.config.train, self.cfg)
        self.last_train_loss = state.progress.train_loss
        self.time.earlier = state.progress
        log.info(
            "resumed from %s at update %d (%.1f min of earlier sessions)",
            path, self.step, self.time.earlier.run_seconds / 60,
        )  # fmt: skip

    def _set_precision(self) -> None:
        """Autocast, fp16's grad scaler and the arithmetic (1 in fp32) this session trains in; a
        new run's train.arithmetic=null is the newest."""
        if self.cfg.arithmetic is None:
            self.cfg.arithmetic = NEWEST
        self.cfg.arithmetic = training_arithmetic(self.cfg.arithmetic, self.cfg.precision)
        self.autocast = autocast_factory(self.cfg.precision, self.ctx.device, self.cfg.arithmetic)
        self.scaler = torch.amp.GradScaler("cuda") if self.cfg.precision == "fp16" else None

    def _save(self) -> None:
        """Write step_XXXXXXX.pt (rank 0), point last.pt (and best.pt) at it, prune old ones."""
        rng_per_rank = rng.gather_rng(self.ctx)
        if self.ctx.is_main:
            state = TrainingState(
                config=self.config,
                model=self.model.state_dict(),
                bpe_model=self.tokenizer.proto,
                bpe_sha256=self.tokenizer.sha256,
                step=self.step,
                optimizer=self.optimizer.state_dict(),
                scheduler=self.schedule.state_dict(),
                scaler=self.scaler.state_dict() if self.scaler is not None else None,
                data_state=self.train_iterator.state_dict(),
                rng_per_rank=rng_per_rank,
                best=replace(self.best),
                progress=self.time.totals(self.last_train_loss),
                ema=self.ema.state_dict() if self.ema is not None else None,
            )
            keep = max(self.cfg.keep_last, self.cfg.average_last)
            write_step_checkpoint(
                state, self.checkpoint_dir, keep_last=keep, is_best=self.best_pending
            )
        self.best_pending = False
        self.saved_at = self.step
        self.ctx.barrier()

    def _write_summary(self, extra: dict[str, Any]) -> dict[str, Any]:
        best_path = self.checkpoint_dir / "best.pt"
        totals = self.time.totals(self.last_train_loss)  # earlier sessions count too
        summary = {
            "steps": self.step,
            "final_train_loss": self.last_train_loss,
            "best_valid_loss": self.best.valid_loss,
            "best_valid_bleu": self.best.valid_bleu,
            "best_step": self.best.step,
            "train_tokens_per_sec": totals.train_tokens / max(totals.train_seconds, 1e-9),
            "train_tokens": totals.train_tokens,
            "train_seconds": totals.train_seconds,
            "wall_seconds": totals.run_seconds,
            "session_wall_seconds": self.time.session_seconds(),
            "peak_memory_mb": peak_memory_mb(self.ctx.device),
            "last_checkpoint": str(self.checkpoint_dir / "last.pt"),
            "best_checkpoint": str(best_path) if best_path.exists() else None,
            "stopped_by": self.stopped_by,
            "skipped_updates": totals.skipped_updates,
            "session_steps": self.session_steps,
            "n_parameters": self.n_parameters,
            "device": str(self.ctx.device),
            "world_size": self.ctx.world_size,
            "process_group": self.ctx.backend,
            "precision": self.cfg.precision,
            "code": code_record(self.cfg.arithmetic),
            "sessions": read_sessions(self.run_dir),
            **extra,
        }
        if self.ctx.is_main:
            write_summary(self.run_dir / "train_summary.json", summary)
            log.info("summary: %s", {k: summary[k] for k in list(summary)[:8]})
        return summary


def _resumed_best(best: BestSoFar, before: TrainConfig, now: TrainConfig) -> BestSoFar:
    """The best figures a resumed run compares its validations with: none measured otherwise (by
    another train.best_metric, or validation losses under another train.label_smoothing)."""
    for key in ("best_metric", "label_smoothing"):
        was, is_now = getattr(before, key), getattr(now, key)
        if was == is_now:
            continue
        log.warning("train.%s was %s and is now %s: best.pt is chosen afresh from the next "
                    "validation", key, was, is_now)  # fmt: skip
        if key == "label_smoothing":
            best = replace(best, valid_loss=None)
        if key == "best_metric" or now.best_metric == "loss":
            best = replace(best, metric_value=None, step=None)
    return best


def _warn_resumed_schedule(
    before: TrainConfig, now: TrainConfig, schedule: Schedule, step: int
) -> None:
    """One warning per learning-rate setting a resumed run changes, with the rate of its next
    update before and now (a raised max_steps counts only under a cool-down, which it moves)."""
    keys = ["schedule", "lr", "warmup_steps", "cooldown"]
    if max(before.cooldown, now.cooldown) > 0:
        keys.append("max_steps")
    changed = [k for k in keys if getattr(before, k) != getattr(now, k)]
    if not changed or step >= now.max_steps:  # nothing to train
        return
    d_model = schedule.settings["d_model"]
    old = Schedule(schedule=before.schedule, lr=before.lr, warmup_steps=before.warmup_steps,
                   d_model=d_model)  # fmt: skip
    was = old(step + 1) * cooldown_factor((step + 1) / before.max_steps, before.cooldown)
    is_now = schedule(step + 1) * cooldown_factor((step + 1) / now.max_steps, now.cooldown)
    for key in changed:
        log.warning("train.%s was %s and is now %s: the learning rate of update %d is %.3g "
                    "(%.3g before)", key, getattr(before, key), getattr(now, key), step + 1,
                    is_now, was)  # fmt: skip


def _warn_resumed_average(before: float, now: float, saved: dict[str, Any] | None) -> None:
    """A warning when a resumed run changes train.ema_decay: the weight average starts, goes on
    with the new decay, or is dropped."""
    if before == now and (now == 0 or saved is not None):
        return
    if now == 0:
        what = "the weight average is dropped: validation and evaluation use the trained weights"
    elif saved is None:
        what = "the weight average starts now, from these weights"
    else:
        what = "the weight average goes on with the new decay"
    log.warning("train.ema_decay was %s and is now %s: %s", before, now, what)


def _data_state(data_state: dict[str, Any], rng_per_rank: list[Any]) -> dict[str, Any]:
    """The iterator state with its world size: checkpoints from before the iterator recorded it
    still hold one random state per rank, which says how many processes counted its position."""
    if "world_size" in data_state or not rng_per_rank:
        return data_state
    return {**data_state, "world_size": len(rng_per_rank)}
