"""The Trainer: set up data, model and optimizer (or resume them), then run the loop top to bottom.

    each update:  learning rate -> forward/backward over update_freq batches -> clip -> step -> log
                  -> every valid_every: validation loss, perplexity, greedy BLEU
                  -> every save_every (and at a new best): checkpoint, the last N kept
    at the end:   validation, checkpoint, averaging, evaluation (valid, test), train_summary.json

The trainer takes the composed job config as a plain dict (data, model, train, decode); it never
imports Hydra.
"""

from __future__ import annotations

import copy
import logging
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from tqdm.contrib.logging import logging_redirect_tqdm

from rpr_nmt.checkpoint import CheckpointError, load_checkpoint
from rpr_nmt.train import runstate
from rpr_nmt.train.distributed import DistributedContext, init_distributed
from rpr_nmt.train.errors import DivergenceError, SettingsError
from rpr_nmt.train.monitor import Monitor, TrainWindow, peak_memory_mb, write_summary
from rpr_nmt.train.schedule import Schedule
from rpr_nmt.train.signals import StopSignals
from rpr_nmt.train.step import NonFiniteGuard, autocast_factory, train_step
from rpr_nmt.train.validation import evaluate_at_end, validation_bleu, validation_loss

log = logging.getLogger("rpr_nmt.train")


def train(config: Mapping[str, Any], run_dir: str | Path) -> dict[str, Any]:
    """Train (or resume) the run in `run_dir`; returns what train_summary.json holds.

    Args:
        config: plain dict with the data, model, train and decode sections (rpr_nmt.config fields).
        run_dir: the run directory; checkpoints/last.pt there is resumed from.

    Raises:
        DataError, CheckpointError: bad data or an incompatible checkpoint.
        DivergenceError: train.max_bad_steps non-finite updates in a row (a checkpoint is saved).
        SettingsError: an impossible setting, e.g. fp16 on CPU.
    """
    return Trainer(config, run_dir).run()


class Trainer:
    """One training run. See the module docstring for the loop.

    Args:
        config: the composed job config as a plain dict (data, model, train, decode).
        run_dir: the run directory.
    """

    def __init__(self, config: Mapping[str, Any], run_dir: str | Path) -> None:
        self.config = copy.deepcopy(dict(config))
        self.cfg = self.config["train"]
        self.run_dir = Path(run_dir)
        self.checkpoint_dir = self.run_dir / "checkpoints"
        self.step = 0
        # metric_value: the best train.best_metric figure so far, reached at update `step`.
        self.best: dict[str, Any] = {
            "valid_loss": None, "valid_bleu": None, "metric_value": None, "step": None
        }  # fmt: skip
        self.best_pending = False  # a new best awaits the next checkpoint
        self.last_train_loss: float | None = None
        # Totals of the earlier sessions of this run (from the checkpoint): wall seconds, and the
        # training tokens and seconds behind the run's tokens/s.
        self.earlier = {"run_seconds": 0.0, "train_tokens": 0, "train_seconds": 0.0}
        self.stopped_by = "max_steps"
        self.validated_at: int | None = None
        self.saved_at: int | None = None

    def run(self) -> dict[str, Any]:
        """Set up, train, finish; always release the process group, signal handlers and files."""
        self.started = time.perf_counter()
        self.ctx: DistributedContext = init_distributed(self.cfg["device"])
        self.monitor: Monitor | None = None
        try:
            with StopSignals() as self.signals, logging_redirect_tqdm():
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
        _check_settings(cfg)
        self.autocast = autocast_factory(cfg["precision"], ctx.device)
        _seed_everything(cfg["seed"])
        self._load_data()
        tok = self.tokenizer
        self.model = build_model(self.config["model"], vocab_size=tok.vocab_size, pad_id=tok.pad_id)
        self.model.to(ctx.device)
        self.n_parameters = sum(p.numel() for p in self.model.parameters())
        if ctx.rank > 0:  # the same initial weights on every rank, different dropout masks
            torch.manual_seed(cfg["seed"] + ctx.rank)
        self.optimizer = _build_optimizer(self.model, cfg)
        self.schedule = Schedule(
            schedule=cfg["schedule"], lr=cfg["lr"], warmup_steps=cfg["warmup_steps"],
            d_model=self.config["model"]["d_model"],
        )  # fmt: skip
        self.scaler = torch.amp.GradScaler("cuda") if cfg["precision"] == "fp16" else None
        self._resume()
        self.forward_model = self._wrap(self.model)
        self.batches = iter(self.train_iterator)
        self.guard = NonFiniteGuard(cfg["max_bad_steps"])
        self.monitor = Monitor(
            self.run_dir, enabled=ctx.is_main, start_step=self.step, max_steps=cfg["max_steps"]
        )
        log.info(
            "model: %d parameters | device %s | %s | world size %d | starting at update %d",
            self.n_parameters, ctx.device, cfg["precision"], ctx.world_size, self.step,
        )  # fmt: skip

    def _load_data(self) -> None:
        """Tokenizer, train and valid batch iterators (sharded by rank), text for valid BLEU."""
        from rpr_nmt.data import BatchIterator, prepare_data, read_parallel_text

        cfg, ctx, data_cfg = self.cfg, self.ctx, self.config["data"]
        if ctx.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        splits = ["train", data_cfg["valid_split"]]
        if not ctx.is_main:  # rank 0 trains or caches the BPE model and the encoded splits first
            ctx.barrier()
        data = prepare_data(data_cfg, splits=splits, log=log.info if ctx.is_main else _quiet)
        if ctx.is_main:
            ctx.barrier()
        self.tokenizer = tok = data.tokenizer
        batching = dict(pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id, seed=cfg["seed"])
        self.train_iterator = BatchIterator(
            data.splits["train"], max_tokens=cfg["max_tokens"], shuffle=True, rank=ctx.rank,
            world_size=ctx.world_size, **batching,
        )  # fmt: skip
        self.valid_iterator = BatchIterator(
            data.splits[data_cfg["valid_split"]], max_tokens=cfg["max_tokens"], shuffle=False,
            rank=ctx.rank, world_size=ctx.world_size, **batching,
        )  # fmt: skip
        self.bleu_text = None
        if cfg["valid_bleu"] and ctx.is_main:  # rank 0 alone decodes
            sources, references = read_parallel_text(data_cfg, data_cfg["valid_split"])
            n = cfg["valid_bleu_sentences"]
            self.bleu_text = (sources[:n], references[:n])

    def _wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """DistributedDataParallel across ranks, then torch.compile when asked."""
        if self.ctx.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.ctx.device.index] if self.ctx.device.type == "cuda" else None
            model = DistributedDataParallel(model, device_ids=ids)
        if self.cfg["compile"]:
            # Static shapes: with dynamic shapes, inductor fails on the relative-position index
            # arithmetic (torch 2.13); each new batch shape compiles anew, up to dynamo's limit.
            model = torch.compile(model, dynamic=False)
        return model

    def _resume(self) -> None:
        """Continue from checkpoints/last.pt when the run directory has one."""
        path = self.checkpoint_dir / "last.pt"
        if not path.is_file():
            return
        state = load_checkpoint(path)
        runstate.check_compatible(state, self.config, self.tokenizer.sha256, path)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.train_iterator.load_state_dict(state["data_state"])
        runstate.restore_rng(state, self.ctx)
        self.step = self.saved_at = int(state["step"])
        self.best.update(state.get("best") or {})
        progress = state.get("progress") or {}
        self.last_train_loss = progress.get("train_loss")
        self.earlier.update({key: progress[key] for key in self.earlier if key in progress})
        log.info(
            "resumed from %s at update %d (%.1f min of earlier sessions)",
            path, self.step, self.earlier["run_seconds"] / 60,
        )  # fmt: skip

    # ------------------------------------------------------------------------------------- loop
    def _train(self) -> None:
        cfg, ctx = self.cfg, self.ctx
        max_steps, update_freq = cfg["max_steps"], cfg["update_freq"]
        self.session = {"steps": 0, "tokens": 0, "seconds": 0.0}
        window = TrainWindow()
        left = self._minutes_left(self.earlier["run_seconds"])
        if left is not None and left < 0:
            # A resumed run whose earlier sessions used up the time limit trains no further.
            self.stopped_by = "time_limit"
            return
        while self.step < max_steps:
            left = self._minutes_left(self._run_seconds())
            timed_out = left is not None and left < 0
            batches = [next(self.batches) for _ in range(update_freq)]
            lr = self.schedule(self.step + 1)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            t0 = time.perf_counter()
            result = train_step(
                self.forward_model, self.optimizer, batches, ctx=ctx, autocast=self.autocast,
                scaler=self.scaler, pad_id=self.tokenizer.pad_id,
                label_smoothing=cfg["label_smoothing"], clip_norm=cfg["clip_norm"],
                stop=self.signals.requested or timed_out,
            )  # fmt: skip
            seconds = time.perf_counter() - t0
            if result.applied:
                self.step += 1
                self.last_train_loss = result.loss
            else:
                self.monitor.warn(f"non-finite loss or gradient at update {self.step + 1}: skipped")
            self.session["steps"] += int(result.applied)
            self.session["tokens"] += result.n_src_tokens + result.n_tgt_tokens
            self.session["seconds"] += seconds
            window.add(result, lr, seconds)
            figures = {"loss": result.loss, "lr": lr, **self._speed()}
            left = self._minutes_left(self._run_seconds())
            if left is not None:  # the bar's ETA counts steps; show the time limit too
                figures["minutes_left"] = left
            self.monitor.step(self.step, figures)
            if result.applied and (self.step % cfg["log_every"] == 0 or self.step == max_steps):
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
                break
            if result.applied and self.step % cfg["valid_every"] == 0:
                self._validate()
            # A new best is saved at once, so that best.pt holds the weights that scored best.
            if result.applied and (self.step % cfg["save_every"] == 0 or self.best_pending):
                self._save()

    def _run_seconds(self) -> float:
        """Wall time of the whole run: earlier sessions (resumed from) plus this one."""
        return self.earlier["run_seconds"] + time.perf_counter() - self.started

    def _minutes_left(self, run_seconds: float) -> float | None:
        """Minutes left under train.max_time_minutes (None = no limit); negative once over it.
        The limit counts the run's total time, so a rerun does not start afresh."""
        limit = self.cfg["max_time_minutes"]
        return None if limit is None else limit - run_seconds / 60

    def _run_totals(self) -> tuple[int, float]:
        """Training tokens and training seconds of the whole run: earlier sessions plus this one."""
        return (
            self.earlier["train_tokens"] + self.session["tokens"],
            self.earlier["train_seconds"] + self.session["seconds"],
        )

    def _speed(self) -> dict[str, float]:
        seconds = max(self.session["seconds"], 1e-9)
        return {"tokens_per_sec": self.session["tokens"] / seconds}

    # ------------------------------------------------------------------- validation, checkpoint
    def _validate(self) -> None:
        """Validation loss and perplexity (all ranks), greedy BLEU (rank 0); track the best."""
        figures = validation_loss(
            self.model, self.valid_iterator, ctx=self.ctx, autocast=self.autocast,
            pad_id=self.tokenizer.pad_id, label_smoothing=self.cfg["label_smoothing"],
        )  # fmt: skip
        if self.cfg["valid_bleu"]:
            bleu = 0.0
            if self.bleu_text is not None:
                bleu = validation_bleu(
                    self.model, self.tokenizer, *self.bleu_text, decode_cfg=self.config["decode"],
                    tgt_lang=self.config["data"]["tgt_lang"], device=self.ctx.device,
                )  # fmt: skip
            # Rank 0's score reaches every rank, so that all agree on a new best (and on saving).
            figures["bleu"] = self.ctx.all_reduce_sum(
                torch.tensor([bleu], dtype=torch.float64)
            ).item()
        self.monitor.valid(self.step, figures)
        self.validated_at = self.step
        best = self.best
        metric = self.cfg["best_metric"]
        value = figures["loss"] if metric == "loss" else figures.get("bleu", float("nan"))
        if runstate.is_better(metric, value, best["metric_value"]):
            best["metric_value"], best["step"] = value, self.step
            self.best_pending = True
        if best["valid_loss"] is None or figures["loss"] < best["valid_loss"]:
            best["valid_loss"] = figures["loss"]
        if "bleu" in figures and (
            best["valid_bleu"] is None or figures["bleu"] > best["valid_bleu"]
        ):
            best["valid_bleu"] = figures["bleu"]

    def _save(self) -> None:
        """Write step_XXXXXXX.pt (rank 0), point last.pt (and best.pt) at it, prune old ones."""
        rng = runstate.gather_rng(self.ctx)
        if self.ctx.is_main:
            tokens, seconds = self._run_totals()
            state = {
                "model": self.model.state_dict(),
                "config": self.config,
                "bpe_model": self.tokenizer.proto,
                "bpe_sha256": self.tokenizer.sha256,
                "step": self.step,
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.schedule.state_dict(),
                "scaler": self.scaler.state_dict() if self.scaler is not None else None,
                "data_state": self.train_iterator.state_dict(),
                "rng": rng[0],
                "rng_per_rank": rng,
                "best": dict(self.best),
                "progress": {
                    "train_loss": self.last_train_loss,
                    "run_seconds": self._run_seconds(),
                    "train_tokens": tokens,
                    "train_seconds": seconds,
                },
            }
            keep = max(self.cfg["keep_last"], self.cfg["average_last"])
            runstate.write_checkpoint(
                state, self.checkpoint_dir, keep_last=keep, is_best=self.best_pending
            )
        self.best_pending = False
        self.saved_at = self.step
        self.ctx.barrier()

    # ----------------------------------------------------------------------------------- finish
    def _finish(self) -> dict[str, Any]:
        """Validate and save at the end, average, evaluate, write train_summary.json."""
        trained = self.session["steps"] > 0
        if trained and self.stopped_by != "signal" and self.validated_at != self.step:
            self._validate()
        if self.saved_at != self.step and (
            trained or not (self.checkpoint_dir / "last.pt").exists()
        ):
            self._save()
        extra: dict[str, Any] = {}
        if self.stopped_by != "signal" and self.ctx.is_main:
            extra = self._average_and_evaluate()
        self.ctx.barrier()
        return self._write_summary(extra)

    def _average_and_evaluate(self) -> dict[str, Any]:
        """Average the last checkpoints when asked, then decode valid and test with cfg.decode."""
        extra: dict[str, Any] = {}
        model, checkpoint = self.model, self.checkpoint_dir / "last.pt"
        if self.cfg["average_last"] > 0:
            checkpoint, model = runstate.average_last(
                self.checkpoint_dir, self.cfg["average_last"], self.model
            )
            extra["averaged_checkpoint"] = str(checkpoint)
        if self.cfg["evaluate_at_end"]:
            extra["evaluated_checkpoint"] = str(checkpoint)
            extra.update(
                evaluate_at_end(
                    model, self.tokenizer, self.config, self.run_dir, self.ctx.device,
                    str(checkpoint),
                )
            )  # fmt: skip
        return extra

    def _write_summary(self, extra: dict[str, Any]) -> dict[str, Any]:
        best_path = self.checkpoint_dir / "best.pt"
        tokens, seconds = self._run_totals()  # a resumed run counts its earlier sessions too
        summary = {
            "steps": self.step,
            "final_train_loss": self.last_train_loss,
            "best_valid_loss": self.best["valid_loss"],
            "best_valid_bleu": self.best["valid_bleu"],
            "best_step": self.best["step"],
            "train_tokens_per_sec": tokens / max(seconds, 1e-9),
            "train_tokens": tokens,
            "train_seconds": seconds,
            "wall_seconds": self._run_seconds(),
            "session_wall_seconds": time.perf_counter() - self.started,
            "peak_memory_mb": peak_memory_mb(self.ctx.device),
            "last_checkpoint": str(self.checkpoint_dir / "last.pt"),
            "best_checkpoint": str(best_path) if best_path.exists() else None,
            "stopped_by": self.stopped_by,
            "session_steps": self.session["steps"],
            "n_parameters": self.n_parameters,
            "device": str(self.ctx.device),
            "world_size": self.ctx.world_size,
            "precision": self.cfg["precision"],
            **extra,
        }
        if self.ctx.is_main:
            write_summary(self.run_dir / "train_summary.json", summary)
            log.info("summary: %s", {k: summary[k] for k in list(summary)[:8]})
        return summary


def _build_optimizer(model: torch.nn.Module, cfg: Mapping[str, Any]) -> torch.optim.Optimizer:
    """Adam with the paper's betas and epsilon; AdamW (decoupled decay) when weight_decay > 0."""
    kwargs = dict(lr=0.0, betas=(cfg["adam_beta1"], cfg["adam_beta2"]), eps=cfg["adam_eps"])
    if cfg["weight_decay"] > 0:
        return torch.optim.AdamW(model.parameters(), weight_decay=cfg["weight_decay"], **kwargs)
    return torch.optim.Adam(model.parameters(), **kwargs)


def _check_settings(cfg: Mapping[str, Any]) -> None:
    """Settings that compose but cannot work together."""
    if cfg["best_metric"] not in ("loss", "bleu"):
        raise SettingsError(f"train.best_metric={cfg['best_metric']!r}: use loss or bleu")
    if cfg["best_metric"] == "bleu" and not cfg["valid_bleu"]:
        raise SettingsError("train.best_metric=bleu needs train.valid_bleu=true")
    for key in ("max_steps", "max_tokens", "update_freq", "log_every", "valid_every", "save_every"):
        if cfg[key] < 1:
            raise SettingsError(f"train.{key}={cfg[key]} must be at least 1")


def _seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass


def _quiet(_: str) -> None:
    pass


__all__ = ["CheckpointError", "SettingsError", "Trainer", "DivergenceError", "train"]
