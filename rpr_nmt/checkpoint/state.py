"""The training state a checkpoint holds, and how it is written and read.

A checkpoint file is TrainingState.to_dict() saved with torch.save: tensors and plain Python values
only (the config as dataclasses.asdict), so that torch.load(weights_only=True) reads it and loading
a file never executes code. Writes are atomic. Files written before this module existed have the
same keys and load as they are; an inference-only file (model, config, bpe_model) loads too, with
the training-only parts empty.
"""

from __future__ import annotations

import os
import pickle
import shutil
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from rpr_nmt.config import TrainJobConfig, job_config_from_dict
from rpr_nmt.data.cache import owned_temporary


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable or foreign; the message says which and what to do."""


@dataclass
class BestSoFar:
    """The best validation figures of a run so far."""

    valid_loss: float | None = None  # lowest validation loss
    valid_bleu: float | None = None  # highest validation BLEU
    metric_value: float | None = None  # best value of train.best_metric ...
    step: int | None = None  # ... reached at this update (best.pt)

    def update(self, figures: dict[str, float], metric: str, step: int) -> bool:
        """Take a validation's figures ("loss", and "bleu" when decoded) at update `step`; return
        whether train.best_metric (`metric`: "loss" or "bleu") found a new best (a NaN never
        wins)."""
        value = figures["loss"] if metric == "loss" else figures.get("bleu", float("nan"))
        best = self.metric_value
        new_best = value == value and (
            best is None or (value < best if metric == "loss" else value > best)
        )
        if new_best:
            self.metric_value, self.step = value, step
        if self.valid_loss is None or figures["loss"] < self.valid_loss:
            self.valid_loss = figures["loss"]
        if "bleu" in figures and (self.valid_bleu is None or figures["bleu"] > self.valid_bleu):
            self.valid_bleu = figures["bleu"]
        return new_best


@dataclass
class Progress:
    """Whole-run totals carried across resumed sessions."""

    train_loss: float | None = None  # loss of the last applied update
    run_seconds: float = 0.0  # wall time from each session's first update (the time limit's)
    train_tokens: int = 0  # source + target tokens trained on
    train_seconds: float = 0.0  # seconds spent in update steps (tokens/s = tokens / seconds)
    skipped_updates: int = 0  # updates skipped for a non-finite loss or gradient


@dataclass
class TrainingState:
    """Everything a run needs to continue exactly, or a model needs to translate.

    Attributes:
        config: the job config the run was trained with.
        model: the model's state dict.
        bpe_model: the serialized sentencepiece model (so a checkpoint translates on its own).
        bpe_sha256: its hash; resuming with another BPE model is refused.
        step: optimizer updates done.
        optimizer, scheduler, scaler: their state dicts (None in inference-only files).
        data_state: the training batch iterator's position (epoch, position).
        rng_per_rank: each rank's random states (rpr_nmt.train.rng).
        best, progress: see BestSoFar and Progress.
        ema: the moving average of the weights (train.ema_decay > 0), float32, by state-dict name.
        averaged_from: the checkpoints whose mean the model is, when it is one.
    """

    config: TrainJobConfig
    model: dict[str, torch.Tensor]
    bpe_model: bytes
    bpe_sha256: str | None = None
    step: int = 0
    optimizer: dict[str, Any] | None = None
    scheduler: dict[str, Any] | None = None
    scaler: dict[str, Any] | None = None
    data_state: dict[str, Any] | None = None
    rng_per_rank: list[dict[str, Any]] = field(default_factory=list)
    best: BestSoFar = field(default_factory=BestSoFar)
    progress: Progress = field(default_factory=Progress)
    ema: dict[str, torch.Tensor] | None = None
    averaged_from: list[str] | None = None

    def weights(self, use_ema: bool = True) -> dict[str, torch.Tensor]:
        """The model state dict to translate with: the weight average when there is one and
        `use_ema`, cast to the trained tensors' dtypes; else the trained weights."""
        if not use_ema or self.ema is None:
            return self.model
        return with_average(self.model, self.ema)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for torch.save (the config and the figures as dicts)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(config=asdict(self.config), best=asdict(self.best))
        out["progress"] = asdict(self.progress)
        out["rng"] = self.rng_per_rank[0] if self.rng_per_rank else None  # rank 0's, as before
        return out

    @classmethod
    def from_dict(cls, state: dict[str, Any], path: str | Path) -> TrainingState:
        """Read what to_dict wrote (or an older file with the same keys); `path` names errors."""
        if not isinstance(state, dict) or "model" not in state:
            raise CheckpointError(f"{path} is not an rpr-nmt checkpoint (no 'model' entry)")
        try:
            config = job_config_from_dict(state.get("config") or {}, "config")
            best = BestSoFar(**(state.get("best") or {}))
            progress = Progress(**(state.get("progress") or {}))
        except (TypeError, ValueError) as e:
            raise CheckpointError(
                f"{path} was written by another version of rpr-nmt ({e}); evaluate it with that "
                "version, or retrain"
            ) from e
        per_rank = state.get("rng_per_rank") or ([state["rng"]] if state.get("rng") else [])
        known = {f.name for f in fields(cls)} - {"config", "best", "progress", "rng_per_rank"}
        rest = {k: v for k, v in state.items() if k in known}
        return cls(config=config, best=best, progress=progress, rng_per_rank=per_rank, **rest)

    def check_resumable(self, config: TrainJobConfig, bpe_sha256: str, path: Path) -> None:
        """Refuse to resume from another model or BPE model, or from a file of weights alone
        (CheckpointError says how)."""
        if self.optimizer is None:
            raise CheckpointError(
                f"{path} holds weights alone (an averaged or inference checkpoint, no optimizer "
                "state): a run cannot resume from it; copy the newest step_*.pt beside it over "
                "it to resume, or keep averaged files outside checkpoints/"
            )
        if self.config.model != config.model:
            saved, now = asdict(self.config.model), asdict(config.model)
            changed = sorted(k for k in now if saved.get(k) != now[k])
            raise CheckpointError(
                f"{path} was trained with another model config (differs in {changed}); "
                "use a new run directory (hydra.run.dir=...) or the original model settings"
            )
        if self.bpe_sha256 != bpe_sha256:
            raise CheckpointError(
                f"{path} was trained with another BPE model (sha256 {self.bpe_sha256}, now "
                f"{bpe_sha256}): the training text or a BPE setting (data.vocab_size, "
                "data.bpe_sample_sentences, data.bpe_character_coverage, data.deduplicate) "
                "changed since the run started; restore the original files and settings to "
                "resume, or train into a new run folder (hydra.run.dir=...)"
            )


def with_average(
    weights: dict[str, torch.Tensor], average: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """`weights` (a state dict) with each averaged tensor put in, in the weight's own dtype."""
    return {
        name: average[name].to(value.dtype) if name in average else value
        for name, value in weights.items()
    }


def save_checkpoint(state: TrainingState, path: str | Path) -> Path:
    """Write `state` to `path` atomically: a temporary file in the same folder, fsync, then rename.

    A crash at any moment leaves either the previous file or the new one, never a truncated one.
    A write error (a full disk) leaves the previous file too, and raises CheckpointError with the
    path and the free space.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = owned_temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state.to_dict(), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        free = shutil.disk_usage(path.parent).free / 2**20
        raise CheckpointError(
            f"cannot write checkpoint {path}: {e.strerror or e} ({free:,.0f} MiB free in "
            f"{path.parent}); the earlier checkpoints are intact: free some space (or keep fewer: "
            "train.keep_last) and rerun the same command to resume"
        ) from e
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> TrainingState:
    """Read a checkpoint with weights_only=True; CheckpointError names the file on any problem."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(
            f"checkpoint not found: {path} (a training run writes them to RUN_DIR/checkpoints/*.pt)"
        )
    if path.stat().st_size == 0:
        raise CheckpointError(
            f"cannot read checkpoint {path}: the file is empty (0 bytes), as a copy, download or "
            "save that never wrote leaves it; copy it again, or use another checkpoint"
        )
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:  # not torch.save's format, or objects beyond plain data
        raise CheckpointError(
            f"cannot read checkpoint {path}: not a checkpoint rpr-nmt wrote, or a damaged one "
            f"(loading only plain data and tensors: {_unpickler_reason(e)})"
        ) from e
    except Exception as e:  # torch raises several types for truncated or foreign files
        # Some carry no message, or a bare one ("101", "list index out of range"): say what the
        # file is first, torch's words after.
        reason = " ".join(str(e).split()) or type(e).__name__
        raise CheckpointError(
            f"cannot read checkpoint {path}: not a checkpoint rpr-nmt wrote, or a damaged or "
            f"truncated one (torch.load: {reason}); copy it again, or use another checkpoint"
        ) from e
    return TrainingState.from_dict(state, path)


def _unpickler_reason(error: pickle.UnpicklingError) -> str:
    """The cause in torch's weights-only refusal, without its advice to load unsafely."""
    text = str(error)
    marker = "WeightsUnpickler error:"
    if marker in text:
        text = text.split(marker, 1)[1]
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return first.split(". ")[0].rstrip(".")
