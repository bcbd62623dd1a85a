"""rpr-nmt-inspect: what a checkpoint learned about positions, as figures and numbers.

    rpr-nmt-inspect runs/train/big/checkpoints/last.pt -o inspect/big
    rpr-nmt-inspect last.pt -o inspect/base --split test --sentences 500 --max-distance 32
    rpr-nmt-inspect runs/train/big -o inspect/big    # a run folder: its kept checkpoints, averaged

Writes, per stack, what the position method learned: Shaw's w^K and w^V (row norms against the
distance -k..k, cosine similarity between rows, per layer and per head for per-head tables), T5's
bias per head and bucket and by distance, the learned table's similarity of position vectors,
and ALiBi's fixed slopes for reference (RoPE and the sinusoid learn nothing); and, for every
method, the self-attention mass by relative distance averaged over the first N sentences of a dev
split (how far each layer actually looks), and how well a linear probe reads each token's absolute
position from each layer's states on them (fitted on the even sentences, scored on the odd).
inspect.json holds the numbers, index.md lists the files with summary tables.
The split is read with the checkpoint's data settings (--data-root overrides a local corpus'
folder). An -o folder that holds anything is refused; --force replaces a previous inspection
there (its files alone). Errors print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from rpr_nmt.checkpoint import CheckpointError
from rpr_nmt.checkpoint.inference import loaded_weights
from rpr_nmt.checkpoint.run_folder import load_checkpoint_or_run
from rpr_nmt.cli.run_folder import describe_os_error
from rpr_nmt.data import DataError, Tokenizer, read_parallel_text
from rpr_nmt.inspection.figures import write_inspection
from rpr_nmt.inspection.probe import position_probe
from rpr_nmt.inspection.statistics import (
    InspectError,
    attention_mass,
    position_statistics,
    table_statistics,
)
from rpr_nmt.model import build_model

PROG = "rpr-nmt-inspect"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments of rpr-nmt-inspect."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Plot what a checkpoint's positions learned, attention by distance."
    )
    parser.add_argument(
        "checkpoint",
        help="a checkpoint file, or a run folder: its kept step checkpoints, averaged (as "
        "rpr-nmt-evaluate checkpoint=RUN_DIR)",
    )
    parser.add_argument("-o", "--output", required=True, help="folder for the PNGs and index.md")
    parser.add_argument(
        "--split", default=None, help="dev split to run (default: the run's data.valid_split)"
    )
    parser.add_argument("--sentences", type=int, default=200, help="first N sentences of it")
    parser.add_argument(
        "--max-distance",
        type=int,
        default=None,
        help="W: distances beyond ±W are counted at ±W (default: max(k + 1, 16))",
    )
    parser.add_argument("--data-root", default=None, help="override data.root (local corpora)")
    parser.add_argument(
        "--weights", choices=["ema", "raw"], default="ema", help="ema: the weight average, if any"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a previous inspection in -o (its figures and numbers; no other folder)",
    )
    args = parser.parse_args(argv)
    if args.sentences < 1:
        parser.error(f"--sentences must be at least 1, got {args.sentences}")
    if args.max_distance is not None and args.max_distance < 1:
        parser.error(f"--max-distance must be at least 1, got {args.max_distance}")
    return args


# What an inspection writes (rpr_nmt/inspection/figures.py): its figures, the learned tables'
# similarities, the numbers, the index. --force removes these from -o, nothing else.
INSPECTION_FILES = ("*.png", "*_learned_cosine.npy", "inspect.json", "index.md")


def check_output_dir(path: Path, *, force: bool) -> None:
    """Refuse an -o folder that holds anything, unless `force` and it holds a previous
    inspection (index.md and inspect.json): the figures of another model would stay beside the
    new ones (InspectError, one line)."""
    if not path.is_dir() or not any(path.iterdir()):
        return
    if not force:
        raise InspectError(
            f"-o {path} is not empty: choose another folder, or pass --force to replace the "
            "inspection in it"
        )
    if not ((path / "index.md").is_file() and (path / "inspect.json").is_file()):
        raise InspectError(
            f"-o {path} holds no previous inspection (index.md, inspect.json): --force replaces "
            "only one; choose another folder"
        )


def clear_inspection(path: Path) -> None:
    """Remove the files a previous inspection wrote into `path` (INSPECTION_FILES)."""
    for pattern in INSPECTION_FILES:
        for file in path.glob(pattern):
            if file.is_file():
                file.unlink()


def run(args: argparse.Namespace) -> str:
    """Inspect the checkpoint; returns the path of index.md."""
    check_output_dir(Path(args.output), force=args.force)
    state = load_checkpoint_or_run(args.checkpoint)
    tokenizer = Tokenizer.from_proto(state.bpe_model)
    cfg = state.config.model
    model = build_model(cfg, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id)
    use_ema = args.weights == "ema"
    model.load_state_dict(state.weights(use_ema=use_ema))
    data_cfg = state.config.data
    if args.data_root is not None:
        data_cfg = replace(data_cfg, root=args.data_root)
    split = args.split or data_cfg.valid_split
    sources, targets = read_parallel_text(data_cfg, split)
    sources, targets = sources[: args.sentences], targets[: args.sentences]
    if not sources:
        raise DataError(f"split {split!r} is empty: choose another with --split")
    # Past k: the bins at ±W hold every distance beyond, so ±k must lie inside them.
    max_distance = args.max_distance or max(cfg.max_relative_position + 1, 16)
    mass = attention_mass(model, tokenizer, sources, targets, max_distance=max_distance)
    about = {
        "checkpoint": str(args.checkpoint),
        "step": state.step,
        "weights": loaded_weights(state, use_ema),  # "raw" for --weights ema without an average
        "split": split,
        "sentences": len(sources),
        **asdict(cfg),
    }
    stats, positions = table_statistics(model), position_statistics(model)
    # The probe holds out half the sentences: from 2 on (one sentence still gives the rest).
    probe = position_probe(model, tokenizer, sources, targets) if len(sources) > 1 else None
    clear_inspection(Path(args.output))  # only now: a failure above keeps the previous one
    files = write_inspection(args.output, stats, mass, about, positions, probe)
    return str(files[-1])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on a bad checkpoint or missing data)."""
    args = parse_args(argv)
    try:
        index = run(args)
    except (CheckpointError, DataError, InspectError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # -o under a file, on a read-only file system, ...
        if e.filename is None:
            raise
        print(f"{PROG}: error: {describe_os_error(e, {'-o': args.output})}", file=sys.stderr)
        return 2
    print(f"wrote {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
