"""What the inference commands (rpr-nmt-evaluate, rpr-nmt-translate) share: their typed config,
the checkpoint setting, checked decode settings, and their one-line errors."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from rpr_nmt.checkpoint import CheckpointError, checkpoint_paths, step_checkpoints
from rpr_nmt.cli.config_store import to_job_config, unknown_settings
from rpr_nmt.cli.run_folder import folder_problem
from rpr_nmt.config import MISSING, DecodeConfig, ModelChoiceConfig
from rpr_nmt.data import DataError
from rpr_nmt.decode.constraints import PositionLimitError


class UsageError(Exception):
    """A setting on the command line that cannot work."""


class InterruptError(Exception):
    """Ctrl-C stopped the command; the message says what was kept."""


class RefuseUnwritableRunFolder(Callback):
    """on_run_start: exit with status 2 and one line naming hydra.run.dir when it cannot be
    written in (a file, or under one; a read-only file system), before Hydra creates it and opens
    its log there (configs/evaluate.yaml, configs/score.yaml)."""

    def __init__(self, prog: str) -> None:
        self.prog = prog

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        HydraConfig.instance().set_config(config)  # hydra.run.dir interpolates ${hydra:...}
        path = config.hydra.run.dir
        if problem := folder_problem(path):
            print(f"{self.prog}: error: hydra.run.dir={path}: {problem}: give a folder that can "
                  "be written in (hydra.run.dir=...)", file=sys.stderr)  # fmt: skip
            sys.exit(2)


def job_config(cfg: DictConfig) -> Any:
    """The composed config as its dataclass; a missing checkpoint= (without ensemble=) is a
    UsageError, not a trace, and so is giving both."""
    ensemble = bool(cfg.get("ensemble"))
    if ensemble and not OmegaConf.is_missing(cfg, "checkpoint"):
        raise UsageError(
            "checkpoint= and ensemble= exclude each other: give the models as ensemble=[a.pt,b.pt] "
            "or one (averaged) model as checkpoint="
        )
    if OmegaConf.is_missing(cfg, "checkpoint"):
        if not ensemble:
            checkpoints_of(None)
        cfg.checkpoint = None  # the ensemble's members are the models
    if problem := unknown_settings(cfg):  # keys added with +key=..., else silently ignored
        raise UsageError(problem)
    return to_job_config(cfg)


def checkpoints_of(value: Any) -> list[Path]:
    """The `checkpoint=` setting as checkpoint files: one path, a list to average, or a run
    directory (its kept step checkpoints, averaged)."""
    if value is None or value == MISSING:
        raise UsageError("no checkpoint given: add checkpoint=PATH (or 'checkpoint=[a.pt,b.pt]')")
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise UsageError("checkpoint=[] is empty: give at least one checkpoint path")
    for item in map(Path, items):
        folder = item / "checkpoints" if (item / "checkpoints").is_dir() else item
        last = folder / "last.pt"
        if item.is_dir() and not step_checkpoints(folder) and last.is_file():
            raise UsageError(
                f"{item} holds no step_*.pt checkpoints to average, only {last}: name that "
                "file instead"
            )
    return checkpoint_paths([str(item) for item in items])


def bracket_ensemble(argv: Sequence[str]) -> list[str]:
    """argv with `ensemble=PATH` written as the list `ensemble=[PATH]` that the setting is (Hydra
    would refuse a plain string); lists, null and multirun sweeps (-m) are left as they are."""
    if "-m" in argv or "--multirun" in argv:
        return list(argv)
    out = list(argv[:1])
    for arg in argv[1:]:
        key, sep, value = arg.partition("=")
        if sep and key == "ensemble" and value and not value.startswith("[") and value != "null":
            arg = f"ensemble=[{value}]"
        out.append(arg)
    return out


@dataclass
class LoadedModel:
    """What an inference command decodes with: one model, or an Ensemble of several."""

    model: Any  # rpr_nmt.model.Transformer or rpr_nmt.decode.ensemble.Ensemble
    tokenizer: Any  # rpr_nmt.data.Tokenizer, shared by every member
    config: Any  # the TrainJobConfig of the (first) model: its data and language pair
    checkpoint: list[str] | None  # checkpoint= as files (averaged), None for an ensemble
    ensemble: list[list[str]] | None  # per member its files (a run folder's are averaged)
    weights: list[str]  # per model (one, or each member) what it holds: "ema" or "raw"

    @property
    def weights_record(self) -> str | list[str]:
        """The weights loaded, as the eval/score JSON records them: "ema" or "raw" for
        checkpoint=, one of those per member for an ensemble."""
        return self.weights if self.ensemble is not None else self.weights[0]

    @property
    def description(self) -> str:
        """e.g. "2 checkpoint(s), ema weights" or "an ensemble of 3 models, raw weights"."""
        if self.ensemble is None:
            models = f"{len(self.checkpoint or [])} checkpoint(s)"
        else:
            models = f"an ensemble of {len(self.ensemble)} models"
        kinds = sorted(set(self.weights))
        weights = kinds[0] if len(kinds) == 1 else "/".join(self.weights)  # e.g. ema/raw/ema
        return f"{models}, {weights} weights"


def load_model(job: ModelChoiceConfig, device: Any) -> LoadedModel:
    """The model of `checkpoint=` (several files averaged), or the Ensemble of `ensemble=`
    (each member a file or a run folder, averaged as checkpoint= is), on `device`; with
    weights=ema, a checkpoint without a weight average gives its trained ("raw") weights."""
    from rpr_nmt.checkpoint.inference import load_ensemble_members, load_inference_model
    from rpr_nmt.decode.ensemble import Ensemble

    ema = use_ema(job.weights)
    if not job.ensemble:
        paths = [str(p) for p in checkpoints_of(job.checkpoint)]
        one = load_inference_model(paths, device, use_ema=ema)
        return LoadedModel(one.model, one.tokenizer, one.config, paths, None, [one.weights])
    members = [[str(p) for p in checkpoints_of(member)] for member in job.ensemble]
    loaded = load_ensemble_members(members, device, use_ema=ema)
    model = Ensemble([member.model for member in loaded])
    weights = [member.weights for member in loaded]
    return LoadedModel(model, loaded[0].tokenizer, loaded[0].config, None, members, weights)


def use_ema(weights: str) -> bool:
    """The `weights=` setting: "ema" (the checkpoint's weight average when it has one) or "raw"."""
    if weights not in ("ema", "raw"):
        raise UsageError(f"weights={weights!r}: use ema (the weight average, if any) or raw")
    return weights == "ema"


def checked_decode_config(cfg: DecodeConfig) -> DecodeConfig:
    """cfg once its values are known to work (UsageError names the one that does not), with
    decode.precision resolved for its device ("auto": bf16 where native, else fp32)."""
    from rpr_nmt.decode import check_decode_config, decoding_precision
    from rpr_nmt.model import resolve_device

    try:
        check_decode_config(cfg)
        device = resolve_device(cfg.device)
    except ValueError as e:
        raise UsageError(str(e)) from e
    return replace(cfg, precision=decoding_precision(cfg.precision, device))


def exit_on_error(prog: str, run: Callable[[], None]) -> None:
    """Run a command; a bad checkpoint, bad data, a bad setting or a sentence longer than a
    learned position table prints one line, exit status 2; Ctrl-C prints one line (no
    traceback), exit status 130 as for any command SIGINT stops."""
    try:
        run()
    except (CheckpointError, DataError, UsageError, PositionLimitError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except InterruptError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted (Ctrl-C)", file=sys.stderr)
        sys.exit(130)
