"""rpr-nmt-average: average the parameters of the last N checkpoints of a run into a new checkpoint.

    rpr-nmt-average runs/train/default --last 20 -o runs/train/default/checkpoints/avg20.pt
    rpr-nmt-average a.pt b.pt c.pt -o averaged.pt

A run directory (or its checkpoints/ folder) contributes its step_XXXXXXX.pt files (with --last N,
its newest N: N of each run directory named); files given directly are averaged as they are; all
must translate one language pair. Checkpoints of different training runs, and a mix of checkpoints
with and without a weight average, are averaged with a one-line warning on stderr. The result keeps
the newest checkpoint's config and BPE model, so that rpr-nmt-evaluate and rpr-nmt-translate
load it like any other checkpoint. An existing -o file (a run's own last.pt, say) is replaced
only with --force; an -o under a file or on a read-only file system is one line, exit status 2,
as is an -o named step_*.pt in a checkpoints/ folder, or in one of a run that is training.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rpr_nmt.checkpoint import (
    CheckpointError,
    average_checkpoints,
    checkpoint_paths,
    save_checkpoint,
)
from rpr_nmt.checkpoint.inference import check_one_direction
from rpr_nmt.checkpoint.run_folder import STEP_PATTERN
from rpr_nmt.checkpoint.run_lock import LOCK_FILE, run_folder_in_use
from rpr_nmt.cli.run_folder import describe_os_error, folder_problem


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments of rpr-nmt-average."""
    parser = argparse.ArgumentParser(
        prog="rpr-nmt-average",
        description="Average the parameters of checkpoints (the paper averaged the last 20).",
    )
    parser.add_argument(
        "inputs", nargs="+", help="run directories, checkpoints/ folders or .pt files"
    )
    parser.add_argument(
        "--last",
        type=int,
        default=None,
        help="average the newest N step checkpoints of each run directory",
    )
    parser.add_argument(
        "-o", "--output", required=True, help="where to write the averaged checkpoint"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace an existing -o file (never a folder)"
    )
    args = parser.parse_args(argv)
    if args.last is not None and args.last < 1:
        parser.error(f"--last must be at least 1, got {args.last}")
    return args


def check_output(path: Path, *, force: bool) -> None:
    """Refuse an -o that exists, unless it is a file and `force`, and one whose folder cannot be
    written in (under a file, read-only): CheckpointError, one line, before any averaging."""
    if path.is_dir():
        raise CheckpointError(f"-o {path} is a folder: name the checkpoint file to write")
    if problem := folder_problem(path.parent):
        raise CheckpointError(f"-o {path}: {problem}: give another -o")
    if path.exists() and not force:
        raise CheckpointError(
            f"-o {path} exists: choose another file, or pass --force to replace it"
        )
    if path.parent.name != "checkpoints":
        return
    if STEP_PATTERN.match(path.name):
        raise CheckpointError(
            f"-o {path} is named as a step checkpoint, which the run's pruning and "
            "train.average_last would take for one of its own: name it otherwise (avg.pt, say)"
        )
    if run_folder_in_use(path.parent.parent):
        raise CheckpointError(
            f"-o {path} is in the checkpoints/ folder of a run that is training (its "
            f"{LOCK_FILE} is held), where the trainer replaces and prunes files: write the "
            "average elsewhere, or once the run has ended"
        )


def warn(message: str) -> None:
    """A one-line warning on stderr: the average is written, but the user should know."""
    print(f"rpr-nmt-average: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on a missing or incompatible checkpoint)."""
    args = parse_args(argv)
    try:
        check_output(Path(args.output), force=args.force)
        paths = checkpoint_paths(args.inputs, args.last)
        check_one_direction(paths, "average")
        averaged = average_checkpoints(paths, warn=warn)
        out = save_checkpoint(averaged, args.output)
    except CheckpointError as e:
        print(f"rpr-nmt-average: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # what check_output could not foresee, e.g. a folder made read-only since
        if e.filename is None:
            raise
        print(f"rpr-nmt-average: error: {describe_os_error(e, {'-o': args.output})}",
              file=sys.stderr)  # fmt: skip
        return 2
    print(f"averaged {len(paths)} checkpoints (steps up to {averaged.step}) into {out}")
    for path in paths:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
