"""The Trainer: set up data, model and optimizer (or resume them), then run the loop top to bottom.

    each update:  learning rate -> forward/backward over update_freq batches -> clip -> step -> log
                  -> every valid_every: validation loss, perplexity, greedy BLEU
                  -> every save_every (and at a new best): checkpoint, the last N kept
    at the end:   validation, checkpoint, averaging, evaluation (valid, test), train_summary.json

The trainer takes the composed job config as its dataclass (rpr_nmt.config.TrainJobConfig); it
never imports Hydra. What it saves is a rpr_nmt.checkpoint.TrainingState.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from copy import deepcopy
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from tqdm.contrib.logging import logging_redirect_tqdm

from rpr_nmt.checkpoint import (
    BestSoFar,
    CheckpointError,
    TrainingState,
    load_checkpoint,
    run_folder_lock,
    write_step_checkpoint,
)
from rpr_nmt.config import TrainConfig, TrainJobConfig
from rpr_nmt.data.cache import remove_stale_temporaries
from rpr_nmt.train import rng
from rpr_nmt.train.compiler import check_compiler
from rpr_nmt.train.distributed import DistributedContext, init_distributed
from rpr_nmt.train.ema import WeightAverage, evaluation_weights
from rpr_nmt.train.errors import DivergenceError, SettingsError
from rpr_nmt.train.monitor import Monitor, TrainWindow, peak_memory_mb, write_summary
from rpr_nmt.train.provenance import code_record, read_sessions, record_session
from rpr_nmt.train.runtime import RunTime
from rpr_nmt.train.schedule import Schedule, cooldown_factor
from rpr_nmt.train.setup import (
    build_optimizer,
    check_job_settings,
    check_resumed_arithmetic,
    decode_settings,
    load_training_data,
    resumed_precision,
    seed_everything,
    training_arithmetic,
    training_precision,
    wrap_model,
)
from rpr_nmt.train.signals import Clock, StopRequest, StopSignals
from rpr_nmt.train.step import NonFiniteGuard, autocast_factory, train_step
from rpr_nmt.train.validation import final_evaluation, validation_figures

log = logging.getLogger("rpr_nmt.train")


def train(
    config: TrainJobConfig, run_dir: str | Path, *, stop_file: Path | None = None
) -> dict[str, Any]:
    """Train (or resume) the run in `run_dir`; returns what train_summary.json holds.

    `stop_file`: a path whose appearance asks the run to stop as SIGTERM does (a sweep command's
    stop request, rpr_nmt.cli.sweep_stop); None = signals alone.

    Raises:
        DataError, CheckpointError: bad data or an incompatible checkpoint.
        DivergenceError: train.max_bad_steps non-finite updates in a row (a checkpoint is saved).
        SettingsError: an impossible setting, e.g. fp16 on CPU.
    """
    return Trainer(config, run_dir, stop_file=stop_file).run()


class Trainer:
    """One training run. See the module docstring for the loop.

    Args:
        config: the composed job config (data, model, train, decode).
        run_dir: the run directory; checkpoints/last.pt there is resumed from.
        clock: wall time in seconds, for train.max_time_minutes and speed (tests pass their own).
        stop: a stop request to obey instead of SIGINT / SIGTERM (tests pass their own).
        stop_file: with the signals, a file whose existence asks to stop (see train).
    """

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

    def run(self) -> dict[str, Any]:
        """Set up, train, finish; always release the process group, signal handlers and files."""
        self.time = RunTime(self.clock, self.cfg.max_time_minutes)
        self.ctx: DistributedContext = init_distributed(self.cfg.device)
        self.monitor: Monitor | None = None
        stop = self.stop_request
        stop = StopSignals(self.stop_file) if stop is None else contextlib.nullcontext(stop)
        lock = run_folder_lock(self.run_dir) if self.ctx.is_main else contextlib.nullcontext()
        try:
            with lock, stop as self.signals, logging_redirect_tqdm():
                self._setup()
                self._train()
                return self._finish()
        finally:
            if self.monitor is not None:
                self.monitor.close()
            self.ctx.close()

    # ------------------------------------------------------------------------------------ setup
    def _setup(self) -> None:
        from rpr_nmt.model import build_model

        cfg, ctx = self.cfg, self.ctx
        self._check_settings()
        seed_everything(cfg.seed)
        if ctx.is_main:  # what a killed earlier session left half-written
            for folder in (self.run_dir, self.checkpoint_dir):
                for path in remove_stale_temporaries(folder):
                    log.info("removed %s, left by an interrupted session", path)
        data = load_training_data(self.config, ctx, self.run_dir, log)
        self.tokenizer = tok = data.tokenizer
        self.train_iterator, self.valid_iterator = data.train_batches, data.valid_batches
        self.bleu_text = data.bleu_text
        self.model = build_model(self.config.model, vocab_size=tok.vocab_size, pad_id=tok.pad_id)
        self.model.to(ctx.device)
        self.n_parameters = sum(p.numel() for p in self.model.parameters())
        if ctx.rank > 0:  # the same initial weights on every rank, different dropout masks
            torch.manual_seed(cfg.seed + ctx.rank)
        self.optimizer = build_optimizer(self.model, cfg)
        self.schedule = Schedule(
            schedule=cfg.schedule, lr=cfg.lr, warmup_steps=cfg.warmup_steps,
            d_model=self.config.model.d_model,
        )  # fmt: skip
        self.ema = WeightAverage(self.model, cfg.ema_decay) if cfg.ema_decay > 0 else None
        self._resume()
        if ctx.is_main and self.step < cfg.max_steps:  # a session that trains
            record_session(self.run_dir, self.step, cfg.precision, cfg.arithmetic, ctx.device)
        self.forward_model = wrap_model(
            self.model, ctx, compile=cfg.compile, scope=cfg.compile_scope
        )
        self.batches = iter(self.train_iterator)
        self.guard = NonFiniteGuard(cfg.max_bad_steps)
        self.monitor = Monitor(
            self.run_dir, enabled=ctx.is_main, start_step=self.step, max_steps=cfg.max_steps,
            time_limit_minutes=cfg.max_time_minutes, run_seconds=self.time.earlier.run_seconds,
        )  # fmt: skip
        log.info(
            "model: %d parameters | device %s | %s | world size %d | starting at update %d",
            self.n_parameters, ctx.device, cfg.precision, ctx.world_size, self.step,
        )  # fmt: skip

    def _check_settings(self) -> None:
        """Refuse impossible settings before any data is read. A setting every rank refuses is
        reported by rank 0 alone (the others end with PeerError); one that only another rank
        refuses (its device) is reported by that rank."""
        cfg, ctx = self.cfg, self.ctx
        failure: SettingsError | None = None
        try:
            check_job_settings(self.config)
            check_compiler(cfg.compile, ctx.device)
            self.requested_precision = cfg.precision
            cfg.precision = training_precision(cfg.precision, ctx.device)  # checkpoints record it
            self.config.decode = decode_settings(self.config.decode, ctx.device)
        except SettingsError as error:
            failure = error
        ctx.share_main_outcome(None if failure is None else f"SettingsError: {failure}")
        if failure is not None:
            raise failure

    def _resume(self) -> None:
        """Continue from checkpoints/last.pt when the run directory has one."""
        path = self.checkpoint_dir / "last.pt"
        if not path.is_file():
            self._set_precision()
            return
        state = load_checkpoint(path)
        state.check_resumable(self.config, self.tokenizer.sha256, path)
        self.cfg.precision = resumed_precision(
            self.requested_precision, self.cfg.precision, state.config.train.precision,
            self.ctx.device, log,
        )  # fmt: skip
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
        """Autocast, fp16's grad scaler and the arithmetic (1 in fp32) this session trains in."""
        self.cfg.arithmetic = training_arithmetic(self.cfg.arithmetic, self.cfg.precision)
        self.autocast = autocast_factory(self.cfg.precision, self.ctx.device, self.cfg.arithmetic)
        self.scaler = torch.amp.GradScaler("cuda") if self.cfg.precision == "fp16" else None

    # ------------------------------------------------------------------------------------- loop
    def _train(self) -> None:
        cfg, ctx = self.cfg, self.ctx
        self.session_steps = 0
        window = TrainWindow()
        self.time.start_training()
        left = self.time.minutes_left(self.time.earlier.run_seconds)
        if left is not None and left < 0:
            # A resumed run whose earlier sessions used up the time limit trains no further.
            log.warning(
                "train.max_time_minutes=%g is spent (%.1f min over this run's sessions): nothing "
                "is trained; raise it, or set it to null, to continue",
                cfg.max_time_minutes, self.time.earlier.run_seconds / 60,
            )  # fmt: skip
            self.stopped_by = "time_limit"
            return
        if left is not None:
            log.info("train.max_time_minutes=%g: %.2f min left for training (the %.1f min of "
                     "set-up and data preparation do not count)", cfg.max_time_minutes, left,
                     self.time.session_seconds() / 60)  # fmt: skip
        if self.step > cfg.max_steps:
            log.warning("this run is at update %d, past train.max_steps=%d: nothing is trained",
                        self.step, cfg.max_steps)  # fmt: skip
        if self._stop_before_training():
            self.stopped_by = "signal"
            return
        while self.step < cfg.max_steps:
            left = self.time.minutes_left()
            timed_out = left is not None and left < 0
            batches = [next(self.batches) for _ in range(cfg.update_freq)]
            lr = self.schedule(self.step + 1) * cooldown_factor(self._progress(), cfg.cooldown)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            t0 = self.clock()
            result = train_step(
                self.forward_model, self.optimizer, batches, ctx=ctx, autocast=self.autocast,
                scaler=self.scaler, pad_id=self.tokenizer.pad_id,
                label_smoothing=cfg.label_smoothing, clip_norm=cfg.clip_norm,
                stop=self.signals.requested or timed_out,
            )  # fmt: skip
            seconds = self.clock() - t0
            if result.applied:
                self.step += 1
                self.last_train_loss = result.loss
                if self.ema is not None:
                    self.ema.update(self.model, self.step)
            self.session_steps += int(result.applied)
            tokens = result.n_src_tokens + result.n_tgt_tokens
            self.time.add_update(tokens, seconds, applied=result.applied)
            if not result.applied:
                self.monitor.skipped(self.step + 1, self.time.skipped_updates())
            window.add(result, lr, seconds)
            figures = {"loss": result.loss, "lr": lr}
            figures["tokens_per_sec"] = self.time.session_tokens_per_sec()
            run_seconds = self.time.run_seconds()
            left = self.time.minutes_left(run_seconds)
            if left is not None:  # under a time limit the bar counts the limit's seconds
                figures.update(minutes_left=left, run_seconds=run_seconds)
            self.monitor.step(self.step, figures)
            if result.applied and (self.step % cfg.log_every == 0 or self.step == cfg.max_steps):
                self.monitor.train(self.step, window.figures())
                window = TrainWindow()
            try:
                self.guard.check(result.applied, self.step + 1)
            except DivergenceError:
                self.stopped_by = "diverged"
                self._save()
                self._write_summary({})
                raise
            if result.stop or (not ctx.distributed and self.signals.requested):
                self.stopped_by = "signal" if self.signals.requested else "time_limit"
                if window.steps:  # the updates since the last log line
                    self.monitor.train(self.step, window.figures())
                break
            if result.applied and self.step % cfg.valid_every == 0:
                self._validate()
            # A new best is saved at once, so that best.pt holds the weights that scored best.
            if result.applied and (self.step % cfg.save_every == 0 or self.best_pending):
                self._save()

    def _stop_before_training(self) -> bool:
        """Whether any rank was asked to stop before the first update (e.g. Ctrl-C while the data
        was prepared): then no update runs. Every rank takes part, so all of them agree."""
        asked = torch.tensor([float(self.signals.requested)], dtype=torch.float64)
        return bool(self.ctx.all_reduce_sum(asked).item() > 0)

    def _progress(self) -> float:
        """The share of the budget spent once the coming update is done (updates of max_steps), or
        when it starts (minutes of the time limit, which it starts past when it is the last)."""
        progress = (self.step + 1) / self.cfg.max_steps
        if self.cfg.max_time_minutes is not None:
            progress = max(progress, self.time.run_seconds() / 60 / self.cfg.max_time_minutes)
        return progress

    # ------------------------------------------------------------------- validation, checkpoint
    def _validate(self) -> None:
        """Validation loss and perplexity (all ranks), greedy BLEU (rank 0); track the best.
        A validation that fails saves the trained weights first (outside the weight average)."""
        try:
            with evaluation_weights(self.ema, self.model):
                figures = validation_figures(
                    self.model, self.valid_iterator, self.bleu_text, tokenizer=self.tokenizer,
                    config=self.config, ctx=self.ctx, autocast=self.autocast,
                )  # fmt: skip
        except Exception:
            if self.saved_at != self.step:
                self._save()
            raise
        self.monitor.valid(self.step, figures)
        self.validated_at = self.step
        if self.best.update(figures, self.cfg.best_metric, self.step):
            self.best_pending = True

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

    # ----------------------------------------------------------------------------------- finish
    def _finish(self) -> dict[str, Any]:
        """Validate and save at the end, average, evaluate, write train_summary.json."""
        trained = self.session_steps > 0
        if trained and self.stopped_by != "signal" and self.validated_at != self.step:
            self._validate()
        # Saved again when the final validation found a new best at an update already saved.
        untrained_new_run = not (self.checkpoint_dir / "last.pt").exists()
        if (self.saved_at != self.step or self.best_pending) and (
            trained or (untrained_new_run and self.stopped_by != "signal")
        ):
            self._save()
        extra: dict[str, Any] = {}
        if self.stopped_by != "signal" and self.ctx.is_main:
            extra = self._average_and_evaluate()
        self.ctx.barrier()
        summary = self.run_dir / "train_summary.json"
        if not trained and extra.get("evaluated_before"):
            # A finished run rerun: its summary keeps the figures of the session that trained it.
            log.info("nothing to train or evaluate: %s kept as it was", summary)
            return json.loads(summary.read_text())
        return self._write_summary(extra)

    def _average_and_evaluate(self) -> dict[str, Any]:
        return final_evaluation(
            self.model, self.ema, self.tokenizer, self.config, self.run_dir,
            self.ctx.device, step=self.step, trained=self.session_steps > 0,
        )  # fmt: skip

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


__all__ = ["CheckpointError", "DivergenceError", "SettingsError", "StopRequest", "Trainer", "train"]
