"""The Trainer: set up data, model and optimizer (or resume them), then run the loop top to bottom.

    each update:  learning rate -> forward/backward over update_freq batches -> clip -> step -> log
                  -> every valid_every: validation loss, perplexity, greedy BLEU
                  -> every save_every (and at a new best): checkpoint, the last N kept
    at the end:   validation, checkpoint, averaging, evaluation (valid, test), train_summary.json

The trainer takes the composed job config as its dataclass (rpr_nmt.config.TrainJobConfig); it
never imports Hydra. Its bookkeeping (state, resume, checkpoints, train_summary.json) is its base
class's, rpr_nmt.train.session.TrainingSession; what it saves is a rpr_nmt.checkpoint.TrainingState.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path
from typing import Any

import torch
from tqdm.contrib.logging import logging_redirect_tqdm

from rpr_nmt.checkpoint import CheckpointError, run_folder_lock
from rpr_nmt.config import TrainJobConfig
from rpr_nmt.data.cache import remove_stale_temporaries
from rpr_nmt.train.compiler import check_compiler
from rpr_nmt.train.distributed import DistributedContext, init_distributed
from rpr_nmt.train.ema import WeightAverage, evaluation_weights
from rpr_nmt.train.errors import DivergenceError, SettingsError
from rpr_nmt.train.monitor import Monitor, TrainWindow
from rpr_nmt.train.provenance import record_session
from rpr_nmt.train.runtime import RunTime
from rpr_nmt.train.schedule import Schedule, cooldown_factor
from rpr_nmt.train.session import TrainingSession
from rpr_nmt.train.setup import (
    build_optimizer,
    check_job_settings,
    decode_settings,
    seed_everything,
    training_precision,
    wrap_model,
)
from rpr_nmt.train.signals import StopRequest, StopSignals
from rpr_nmt.train.step import NonFiniteGuard, train_step
from rpr_nmt.train.training_data import load_training_data
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


class Trainer(TrainingSession):
    """One training run. See the module docstring for the loop; the session's state, resume,
    checkpoints and summary are TrainingSession's (rpr_nmt.train.session), and so are its
    arguments.
    """

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


__all__ = ["CheckpointError", "DivergenceError", "SettingsError", "StopRequest", "Trainer", "train"]
