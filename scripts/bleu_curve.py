"""The validation BLEU curve of one run: every kept step checkpoint decoded and scored.

    .venv/bin/python scripts/bleu_curve.py runs/curve/k16                 # val, beam 4, alpha 0.6
    .venv/bin/python scripts/bleu_curve.py RUN --split test_2016_flickr --beam 1 --weights raw

Train the run with checkpoints at the updates the curve should show and enough of them kept, e.g.
`train.save_every=300 train.keep_last=6` for 300 ... 1800. Each checkpoint is decoded like
`rpr-nmt-evaluate checkpoint=STEP.pt split=SPLIT decode.beam_size=B decode.length_penalty=A`;
hypotheses and eval files go to RUN/curve_<split>/step_XXXXXXX/. Prints one Markdown table and
writes RUN/curve_<split>.json ({"split", "beam", "alpha", "weights", "points": [{"step", "bleu",
"chrf"}, ...]}). The update count where BLEU stops rising tells where a fixed budget sits.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rpr_nmt.checkpoint import CheckpointError, step_checkpoints
from rpr_nmt.checkpoint.inference import load_inference_model
from rpr_nmt.checkpoint.run_folder import STEP_PATTERN
from rpr_nmt.config import DecodeConfig
from rpr_nmt.data import read_parallel_text
from rpr_nmt.data.errors import DataError
from rpr_nmt.decode import check_decode_config
from rpr_nmt.evaluate import evaluate_split


@dataclass(frozen=True)
class Point:
    step: int
    bleu: float
    chrf: float


def step_of(path: Path) -> int:
    """checkpoints/step_0000300.pt -> 300."""
    match = STEP_PATTERN.match(path.name)
    if match is None:
        raise ValueError(f"{path} is not a step checkpoint (step_XXXXXXX.pt)")
    return int(match.group(1))


def curve(
    run_dir: Path, split: str | None, decode: DecodeConfig, use_ema: bool
) -> tuple[str, list[Point], str]:
    """Decode `split` (default: the run's validation split) with every kept step checkpoint;
    returns the split, the points and the weights loaded ("raw" where a run kept no average)."""
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder")
    paths = step_checkpoints(run_dir / "checkpoints")
    if not paths:
        raise FileNotFoundError(
            f"{run_dir}/checkpoints has no step_XXXXXXX.pt: train with train.save_every=N and "
            "train.keep_last large enough to keep the points of the curve"
        )
    points, weights = [], set()
    for path in paths:
        loaded = load_inference_model(path, "cpu", use_ema=use_ema)
        model, tokenizer, config = loaded.model, loaded.tokenizer, loaded.config
        weights.add(loaded.weights)
        split = split or config.data.valid_split
        sources, refs = read_parallel_text(config.data, split)
        out_dir = run_dir / f"curve_{split}" / path.stem
        scores = evaluate_split(
            model, tokenizer, sources, refs, decode, config.data.tgt_lang, out_dir, split,
            checkpoint=path,
        )  # fmt: skip
        points.append(Point(step_of(path), scores.bleu, scores.chrf))
        print(
            f"update {points[-1].step}: BLEU {scores.bleu:.2f}, chrF {scores.chrf:.2f}", flush=True
        )
    return split, points, ",".join(sorted(weights))


def format_table(points: list[Point]) -> str:
    """| updates | BLEU | chrF | gain over the previous point |"""
    lines = ["| updates | BLEU | chrF | BLEU gain over the previous point |", "|---|---|---|---|"]
    for before, point in zip([None, *points], points):
        gain = "" if before is None else f"{point.bleu - before.bleu:+.2f}"
        lines.append(f"| {point.step} | {point.bleu:.2f} | {point.chrf:.2f} | {gain} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path, help="a run folder with checkpoints/step_*.pt")
    parser.add_argument("--split", default=None, help="default: the run's validation split")
    parser.add_argument("--beam", type=int, default=4, help="beam size, e.g. 4; 1 = greedy")
    parser.add_argument("--alpha", type=float, default=0.6, help="length penalty, e.g. 0.6")
    parser.add_argument("--weights", choices=("ema", "raw"), default="ema")
    args = parser.parse_args(argv)
    decode = DecodeConfig(beam_size=args.beam, length_penalty=args.alpha, device="cpu")
    try:
        check_decode_config(decode)
    except ValueError as e:
        parser.error(f"--beam {args.beam} --alpha {args.alpha}: {e}")
    try:
        split, points, weights = curve(args.run_dir, args.split, decode, args.weights == "ema")
    except (FileNotFoundError, CheckpointError, DataError) as e:
        print(f"bleu_curve: {e}", file=sys.stderr)
        return 2
    record = {
        "run": str(args.run_dir), "split": split, "beam": args.beam, "alpha": args.alpha,
        "weights": weights, "points": [vars(p) for p in points],
    }  # fmt: skip
    out = args.run_dir / f"curve_{split}.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(format_table(points))
    print(f"written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
