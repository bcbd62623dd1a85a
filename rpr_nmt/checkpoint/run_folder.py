"""A run directory's checkpoints/ folder: step files, the last/best links, pruning, averaging.

checkpoints/step_0001000.pt  every train.save_every updates, at a new best and at the end;
                             the newest max(keep_last, average_last) stay
checkpoints/last.pt          the newest step checkpoint (a hard link, or a copy)
checkpoints/best.pt          the best one by train.best_metric
checkpoints/averaged.pt      the average of the last train.average_last step checkpoints
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path

import torch

from rpr_nmt.checkpoint.state import (
    CheckpointError,
    TrainingState,
    load_checkpoint,
    save_checkpoint,
)
from rpr_nmt.config import ModelConfig
from rpr_nmt.data.cache import owned_temporary

log = logging.getLogger("rpr_nmt.checkpoint")

STEP_PATTERN = re.compile(r"^step_(\d+)\.pt$")

# Model settings that act only while training: checkpoints that differ in them average as one model.
TRAINING_ONLY_MODEL_KEYS = frozenset({"dropout", "attention_dropout", "activation_dropout"})


def step_path(checkpoint_dir: Path, step: int) -> Path:
    """checkpoints/step_XXXXXXX.pt for an update number."""
    return checkpoint_dir / f"step_{step:07d}.pt"


def step_checkpoints(checkpoint_dir: Path) -> list[Path]:
    """The step checkpoints of a folder, oldest first."""
    if not checkpoint_dir.is_dir():
        return []
    found = [
        (int(m.group(1)), p) for p in checkpoint_dir.iterdir() if (m := STEP_PATTERN.match(p.name))
    ]
    return [p for _, p in sorted(found)]


def link_atomically(source: Path, target: Path) -> None:
    """Make `target` name the same file as `source` (hard link, else a copy), atomically."""
    fd, tmp = owned_temporary(target)
    os.close(fd)
    os.unlink(tmp)
    try:
        try:
            os.link(source, tmp)
        except OSError:  # file systems without hard links
            shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def prune_step_checkpoints(checkpoint_dir: Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` step checkpoints; returns the deleted paths.

    last.pt and best.pt are separate links: they survive the deletion of their step file.
    """
    old = step_checkpoints(checkpoint_dir)[: -max(keep_last, 1)]
    for path in old:
        path.unlink(missing_ok=True)
    return old


def write_step_checkpoint(
    state: TrainingState, checkpoint_dir: Path, *, keep_last: int, is_best: bool
) -> Path:
    """Save step_XXXXXXX.pt atomically, point last.pt (and best.pt) at it, prune old steps."""
    path = save_checkpoint(state, step_path(checkpoint_dir, state.step))
    link_atomically(path, checkpoint_dir / "last.pt")
    if is_best:
        link_atomically(path, checkpoint_dir / "best.pt")
    prune_step_checkpoints(checkpoint_dir, keep_last)
    return path


def checkpoint_paths(inputs: Sequence[str | Path], last: int | None = None) -> list[Path]:
    """Checkpoint files named directly, or found in run directories; the newest `last` of each
    run directory.

    A file is taken as it is; a run directory (or its checkpoints/ folder) contributes its step
    checkpoints, oldest first, and with `last` its newest `last` of them: `RUN_A RUN_B --last N`
    is N of each run, never the newest N of the list, which would drop RUN_A without a word.

    Raises:
        CheckpointError: no inputs, an input that is neither a file nor a folder of step
            checkpoints, a run directory with fewer checkpoints than `last`, `last` with no run
            directory to take them from, or one checkpoint file named twice (last.pt and best.pt
            are links to step files), which would weigh it double.
    """
    if not inputs:
        raise CheckpointError("no checkpoint given: name at least one .pt file or run directory")
    paths: list[Path] = []
    folders = 0
    for item in map(Path, inputs):
        if item.is_file():
            paths.append(item)
            continue
        folder = item / "checkpoints" if (item / "checkpoints").is_dir() else item
        found = step_checkpoints(folder)
        if not found:
            if not item.exists():
                raise CheckpointError(
                    f"checkpoint not found: {item} (a training run writes them to "
                    "RUN_DIR/checkpoints/*.pt)"
                )
            raise CheckpointError(
                f"{item} is neither a checkpoint file nor a run directory with "
                "checkpoints/step_*.pt"
            )
        if last is not None and len(found) < last:
            raise CheckpointError(
                f"the newest {last} checkpoints of {item} were asked for, but only {len(found)} "
                f"were found there: ask for --last {len(found)} or fewer"
            )
        folders += 1
        paths.extend(found[-last:] if last else found)
    if last is not None and not folders:
        raise CheckpointError(
            f"--last {last} takes the newest step checkpoints of each run directory, but only "
            "checkpoint files were named (they are averaged as they are): drop --last, or name "
            "the run directory"
        )
    _refuse_repeats(paths)
    return paths


def _refuse_repeats(paths: Sequence[Path]) -> None:
    """CheckpointError naming the first file that is another path's file too (the same name, or a
    hard link such as last.pt)."""
    seen: dict[object, Path] = {}
    for path in paths:
        first = seen.setdefault(file_identity(path), path)
        if first is not path:
            raise CheckpointError(
                f"{path} is the same checkpoint file as {first} (last.pt and best.pt are links "
                "to step files): name each checkpoint once"
            )


def file_identity(path: str | Path) -> object:
    """What every name of one file shares: (device, inode), so that a run's last.pt, best.pt and
    step_*.pt, hard links to one file, are one checkpoint; the resolved path for a file that
    cannot be read (its load names the problem)."""
    try:
        stat = os.stat(path)
    except OSError:
        return Path(path).resolve()
    return (stat.st_dev, stat.st_ino)


def average_checkpoints(
    paths: Sequence[str | Path], *, warn: Callable[[str], None] | None = None
) -> TrainingState:
    """Average model parameters over checkpoints, normally of one run (as the paper's big model
    did).

    Returns the newest checkpoint's state (by step) with the averaged weights (and averaged weight
    averages when every checkpoint has one), and without optimizer, scheduler and scaler state,
    since an averaged model has none that match.

    Two mixes are averaged but said, in one line each through `warn` (default: the log's
    warning): checkpoints of different training runs (run folders or train.seed differ), which
    can be intended (a "model soup"), and checkpoints of which only some hold a weight average,
    whose averages are then left out.

    Raises:
        CheckpointError: a checkpoint holds another model (parameter names or shapes, or model
            settings apart from dropout) or another BPE model than the first; the message names
            both files (and the settings).
    """
    if not paths:
        raise CheckpointError("no checkpoints given to average")
    states = [load_checkpoint(p) for p in paths]
    reference = states[0].model
    for p, s in zip(paths[1:], states[1:]):
        # The configs first: they name the setting, also for parameter-free ones (RoPE, ALiBi).
        differ = model_differences(states[0].config.model, s.config.model)
        if differ:
            raise CheckpointError(
                f"{p} holds another model than {paths[0]} ({'; '.join(differ)}): cannot "
                "average; average checkpoints of one run (an ensemble combines different models)"
            )
        if apart := parameter_difference(reference, s.model):
            raise CheckpointError(
                f"{p} holds another model than {paths[0]} ({apart}): cannot average"
            )
        if s.bpe_model != states[0].bpe_model:  # the same shapes, but token i is another piece
            raise CheckpointError(
                f"{p} and {paths[0]} have different BPE models, so the same row of their "
                "embeddings stands for different pieces: average checkpoints of one run"
            )
    notes = (other_run(paths, states), partial_ema(paths, states), counted_twice(paths, states))
    for note in filter(None, notes):
        (warn or log.warning)(note)
    averaged = {}
    for name, tensor in reference.items():
        if tensor.is_floating_point():
            total = torch.stack([s.model[name].double() for s in states]).mean(dim=0)
            averaged[name] = total.to(tensor.dtype)
        else:
            averaged[name] = tensor.clone()
    ema = None  # the weight averages are averaged too, when every checkpoint has one
    if all(s.ema is not None for s in states):
        ema = {n: torch.stack([s.ema[n] for s in states]).mean(dim=0) for n in states[0].ema}
    newest = max(states, key=lambda s: s.step)
    return replace(
        newest, model=averaged, optimizer=None, scheduler=None, scaler=None, ema=ema,
        averaged_from=[str(p) for p in paths],
    )  # fmt: skip


def run_folder_of(path: str | Path) -> Path | None:
    """The run folder a checkpoint was written in (RUN_DIR of RUN_DIR/checkpoints/*.pt), None for
    a file elsewhere (an average, a copy), whose run only its config can tell."""
    folder = Path(path).resolve().parent
    return folder.parent if folder.name == "checkpoints" else None


def other_run(paths: Sequence[str | Path], states: Sequence[TrainingState]) -> str | None:
    """One line when a checkpoint comes from another training run than the first: another run
    folder, or (outside the first's run folder) another train.seed; None when all look like one
    run. Separately trained models rarely average into a working one, but a soup of runs that
    started from one model can be intended, so this warns and does not refuse."""
    folder, seed = run_folder_of(paths[0]), states[0].config.train.seed
    for path, state in zip(paths[1:], states[1:]):
        other_folder, other_seed = run_folder_of(path), state.config.train.seed
        same = folder is not None and folder == other_folder
        apart = []
        if None not in (folder, other_folder) and not same:
            apart.append(f"run folders {folder} vs {other_folder}")
        if other_seed != seed and not same:
            apart.append(f"train.seed {seed} vs {other_seed}")
        if apart:
            return (
                f"{path} and {paths[0]} come from different training runs ({'; '.join(apart)}): "
                "averaging them anyway, but models trained apart average into a working model only "
                "when they started from one (a model soup); for the paper's averaging name the "
                "checkpoints of one run"
            )
    return None


def partial_ema(paths: Sequence[str | Path], states: Sequence[TrainingState]) -> str | None:
    """One line when some checkpoints hold a weight average (train.ema_decay > 0) and others do
    not: the average then has none, and translates with the trained weights of all (where each
    file alone would translate with its weight average); None otherwise."""
    without = [str(p) for p, s in zip(paths, states) if s.ema is None]
    if not without or len(without) == len(paths):
        return None
    who = (
        f"{without[0]} and {len(without) - 1} more hold"
        if len(without) > 1
        else f"{without[0]} holds"
    )
    return (
        f"{who} no weight average (train.ema_decay) while the other {len(paths) - len(without)} "
        f"of the {len(paths)} checkpoints do: their weight averages are left out, and the result "
        "is the average of the trained weights alone"
    )


def counted_twice(paths: Sequence[str | Path], states: Sequence[TrainingState]) -> str | None:
    """One line when an average is given beside a checkpoint it is already the mean of: that
    checkpoint then weighs more than the others; None otherwise."""
    given = {Path(p).resolve(): str(p) for p in paths}
    for path, state in zip(paths, states):
        resolved = (Path(q).resolve() for q in state.averaged_from or [])
        inside = [given[q] for q in resolved if q in given]
        if inside:
            return (
                f"{path} is already the mean of {len(state.averaged_from)} checkpoints, "
                f"{', '.join(inside)} among them, which are also given: they count twice; name "
                "either the average or its checkpoints"
            )
    return None


def parameter_difference(first: dict[str, torch.Tensor], other: dict[str, torch.Tensor]) -> str:
    """The first parameter name or shape on which two state dicts differ, "" when none does."""
    if missing := sorted(first.keys() ^ other.keys()):
        return f"parameter {missing[0]} is in one only"
    for name, tensor in first.items():
        if other[name].shape != tensor.shape:
            return f"{name}: shape {list(tensor.shape)} vs {list(other[name].shape)}"
    return ""


def model_differences(first: ModelConfig, other: ModelConfig) -> list[str]:
    """'model.<key>: <first> vs <other>' for each model setting on which two checkpoints' configs
    differ, TRAINING_ONLY_MODEL_KEYS left out."""
    a, b = asdict(first), asdict(other)
    return [
        f"model.{key}: {a.get(key)} vs {b.get(key)}"
        for key in sorted(a.keys() | b.keys())
        if key not in TRAINING_ONLY_MODEL_KEYS and a.get(key) != b.get(key)
    ]


def load_checkpoint_or_run(item: str | Path) -> TrainingState:
    """What a command's checkpoint argument names, read as the inference commands read
    `checkpoint=`: a checkpoint file as it is, or a run directory (or its checkpoints/ folder)
    whose kept step checkpoints are averaged.

    Raises:
        CheckpointError: as checkpoint_paths, load_checkpoint and average_checkpoints do.
    """
    paths = checkpoint_paths([item])
    return load_checkpoint(paths[0]) if len(paths) == 1 else average_checkpoints(paths)


def average_last(checkpoint_dir: Path, n: int, *, why_fewer: str) -> tuple[Path, TrainingState]:
    """Average the newest `n` step checkpoints into checkpoints/averaged.pt; when there are fewer,
    those, with a warning that gives `why_fewer` as the cause.

    Returns:
        (path of averaged.pt, the averaged state).
    """
    paths = step_checkpoints(checkpoint_dir)[-n:]
    if len(paths) < n:
        log.warning(
            "train.average_last=%d but this run has only %d step checkpoints, so those are "
            "averaged: %s", n, len(paths), why_fewer,
        )  # fmt: skip
    averaged = average_checkpoints(paths)
    out = save_checkpoint(averaged, checkpoint_dir / "averaged.pt")
    log.info("averaged %d checkpoints into %s", len(paths), out)
    return out, averaged
