"""Print a corpus' sentence lengths in BPE tokens and where clipping at k can make a difference.

A relative model with clipping distance k treats all distances beyond k alike (Shaw et al. 2018,
sec. 3.2), so on a corpus whose longest sentence has n tokens, every k >= n - 1 gives the same
function (only the random draws of the larger tables differ). Lengths count EOS, as the encoder
sees a source (the decoder sees BOS + the target, the same count).

Usage:
    python scripts/length_profile.py --bpe data/cache/bpe/multi30k_en_de-*.model \\
        ../shared/data/multi30k/train.en.gz ../shared/data/multi30k/train.de.gz [--k 4,16,64,256]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sentencepiece as spm

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rpr_nmt.data.errors import DataError  # noqa: E402
from rpr_nmt.data.textfile import read_lines  # noqa: E402


@dataclass(frozen=True)
class LengthProfile:
    """Length statistics of one file, in tokens per sentence (EOS included)."""

    sentences: int
    mean: float
    median: float
    p90: float
    p99: float
    longest: int
    clipped: dict[int, float]  # k -> share of sentences with some distance beyond k

    @property
    def largest_k_that_clips(self) -> int:
        """Every k from here on clips nothing: the longest distance is longest - 1."""
        return self.longest - 2


def length_profile(lengths: list[int] | np.ndarray, ks: list[int]) -> LengthProfile:
    """Statistics of `lengths`: n tokens have distances up to n - 1, so beyond k when n > k + 1."""
    n = np.asarray(lengths)
    if n.size == 0:
        raise ValueError("no sentences: the file is empty")
    p50, p90, p99 = np.percentile(n, [50, 90, 99])
    return LengthProfile(
        sentences=int(n.size),
        mean=float(n.mean()),
        median=float(p50),
        p90=float(p90),
        p99=float(p99),
        longest=int(n.max()),
        clipped={k: float((n > k + 1).mean()) for k in ks},
    )


def format_profiles(profiles: dict[str, LengthProfile], ks: list[int]) -> str:
    """A markdown table, one row per file."""
    head = ["file", "sentences", "mean", "median", "p90", "p99", "longest"]
    head += [f"beyond k={k}" for k in ks]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, p in profiles.items():
        cells = [name, str(p.sentences), f"{p.mean:.1f}", f"{p.median:g}", f"{p.p90:g}"]
        cells += [f"{p.p99:g}", str(p.longest)]
        cells += [f"{100 * p.clipped[k]:.2f}%" for k in ks]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "files", nargs="+", type=Path, help="text files, one sentence a line (.gz ok)"
    )
    parser.add_argument(
        "--bpe", type=Path, required=True, help="the sentencepiece model of the run"
    )
    parser.add_argument("--k", default="4,16,64,256", help="clipping distances to report")
    args = parser.parse_args(argv)
    try:
        ks = [int(k) for k in args.k.split(",")]
    except ValueError:
        parser.error(f"--k {args.k!r}: give comma-separated integers, e.g. 4,16,64")
    if any(k < 0 for k in ks):
        parser.error(f"--k {args.k!r}: clipping distances are >= 0, e.g. 4,16,64")
    if not args.bpe.is_file():
        parser.error(f"--bpe {args.bpe}: no such file (a run's BPE model is under data/cache/bpe/)")
    try:
        sp = spm.SentencePieceProcessor(model_file=str(args.bpe))
    except (RuntimeError, OSError):
        parser.error(f"--bpe {args.bpe}: not a sentencepiece model (data/cache/bpe/*.model)")
    names = [path.name for path in args.files]
    profiles = {}
    for path in args.files:
        try:
            lines = read_lines(path)
        except DataError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        try:
            name = path.name if names.count(path.name) == 1 else str(path)
            profiles[name] = length_profile([len(x) + 1 for x in sp.encode(lines)], ks)
        except ValueError as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            return 1
    print(format_profiles(profiles, ks))
    for name, p in profiles.items():
        print(f"{name}: every k >= {p.largest_k_that_clips + 1} clips nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
