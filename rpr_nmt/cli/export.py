"""rpr-nmt-export: write a checkpoint as a CTranslate2 model folder that translates on its own.

    rpr-nmt-export runs/train/big/checkpoints/last.pt --format ctranslate2 -o exported/big
    rpr-nmt-export avg20.pt --format ctranslate2 -o exported/big-int8 --quantization int8
    rpr-nmt-export runs/train/big -o exported/big     # a run folder: its checkpoints, averaged

The folder holds the CTranslate2 model, the checkpoint's BPE model as sentencepiece.model, and
rpr_nmt_export.json (checkpoint, step, weights, model and decode settings, the rows of learned
position tables). Every position method exports, in both stacks or in one (the sinusoid, a
learned table, Shaw's tables, RoPE, T5's bias, none), and ALiBi in the decoder only; models
CTranslate2 cannot represent exactly (ALiBi in the encoder; one relative table per head; T5
tables per layer; an absolute method together with a relative one) are refused with one line
naming the setting. Errors exit with status 2. See docs/deployment.md for translating with the
folder and the options that reproduce our decoding.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict

from rpr_nmt.checkpoint import CheckpointError
from rpr_nmt.checkpoint.inference import loaded_weights
from rpr_nmt.checkpoint.run_folder import load_checkpoint_or_run
from rpr_nmt.cli.run_folder import describe_os_error
from rpr_nmt.data import DataError, Tokenizer
from rpr_nmt.export import QUANTIZATIONS, ExportError, export_ctranslate2
from rpr_nmt.model import Transformer, build_model

PROG = "rpr-nmt-export"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments of rpr-nmt-export."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Export a checkpoint for fast inference (CTranslate2)."
    )
    parser.add_argument(
        "checkpoint",
        help="a checkpoint file (rpr-nmt-average makes averages), or a run folder: its kept step "
        "checkpoints, averaged (as rpr-nmt-evaluate checkpoint=RUN_DIR)",
    )
    parser.add_argument(
        "--format", choices=["ctranslate2"], default="ctranslate2", help="the inference engine"
    )
    parser.add_argument("-o", "--output", required=True, help="the model folder to create")
    parser.add_argument(
        "--quantization", choices=QUANTIZATIONS, default=None, help="weight type (default float32)"
    )
    parser.add_argument(
        "--weights",
        choices=["ema", "raw"],
        default="ema",
        help="ema: the checkpoint's weight average when it has one; raw: the trained weights",
    )
    parser.add_argument(
        "--max-positions",
        type=int,
        default=1024,
        help="sinusoid-only models: rows of the exported table (a learned table keeps its own)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a folder holding a previous export (no other folder)",
    )
    args = parser.parse_args(argv)
    if args.max_positions < 1:
        parser.error(f"--max-positions must be at least 1, got {args.max_positions}")
    return args


def load_model(path: str, weights: str) -> tuple[Transformer, Tokenizer, dict]:
    """The checkpoint's model in eval mode, its tokenizer, and the provenance to record (a run
    folder's kept checkpoints averaged)."""
    state = load_checkpoint_or_run(path)
    tokenizer = Tokenizer.from_proto(state.bpe_model)
    model = build_model(
        state.config.model, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id
    )
    try:
        model.load_state_dict(state.weights(use_ema=weights == "ema"))
    except RuntimeError as e:
        first_line = str(e).strip().splitlines()[0]
        raise ExportError(f"{path}: the weights do not fit its model config ({first_line})") from e
    info = {
        "checkpoint": str(path),
        "step": state.step,
        **({"averaged_from": state.averaged_from} if state.averaged_from else {}),
        "weights": loaded_weights(state, use_ema=weights == "ema"),
        "model": asdict(state.config.model),
        "decode": asdict(state.config.decode),
    }
    return model.eval(), tokenizer, info


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on a bad checkpoint or a model it cannot export)."""
    args = parse_args(argv)
    try:
        model, tokenizer, info = load_model(args.checkpoint, args.weights)
        out = export_ctranslate2(
            model,
            tokenizer,
            args.output,
            quantization=args.quantization,
            max_positions=args.max_positions,
            force=args.force,
            info=info,
        )
    except (CheckpointError, DataError, ExportError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # -o under a file, on a read-only file system, ...
        if e.filename is None:
            raise
        print(f"{PROG}: error: {describe_os_error(e, {'-o': args.output})}", file=sys.stderr)
        return 2
    print(
        f"exported {args.checkpoint} (step {info['step']}, {info['weights']} weights) to {out} "
        f"as CTranslate2 {args.quantization or 'float32'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
