"""rpr-nmt-report SWEEP_DIR: a sweep's runs as a paper-shaped table and a BLEU-vs-k plot."""

from __future__ import annotations

import argparse
import sys

from rpr_nmt.data.errors import DataError
from rpr_nmt.report import write_length_report, write_report


def _int_list(text: str) -> list[int]:
    """'1,11,16' -> [1, 11, 16], increasing and positive, else an argparse error."""
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,11,16, got {text!r}") from None
    if not values or values[0] < 1 or any(b <= a for a, b in zip(values, values[1:])):
        raise argparse.ArgumentTypeError(f"bounds must be increasing and >= 1, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rpr-nmt-report",
        description="Collect a sweep's runs (rpr-nmt-train experiment=...) into report.md and "
        "bleu_vs_k.png inside the sweep folder, and print the table.",
    )
    parser.add_argument(
        "sweep_dirs", nargs="+", help="sweep folders, e.g. runs/sweeps/ablate_k_multi30k_en_de"
    )
    parser.add_argument(
        "--by-length",
        action="store_true",
        help="also score each run's test output by source length (length_report.md, "
        "bleu_by_length.png), for experiment=length_generalisation",
    )
    parser.add_argument(
        "--bounds",
        type=_int_list,
        default=None,
        help="with --by-length: bucket lower bounds in BPE tokens, e.g. 1,11,16,21,26 "
        "(default 1,11,16,21,26,31)",
    )
    parser.add_argument(
        "--splits",
        type=lambda text: [s for s in text.split(",") if s],
        default=None,
        help="with --by-length: splits whose sentences are pooled, e.g. val,test_2016_flickr "
        "(each run wrote hyp_<split>.txt; default: the test split)",
    )
    args = parser.parse_args(argv)
    for sweep_dir in args.sweep_dirs:
        try:
            text, plot = write_report(sweep_dir)
            if args.by_length:
                text += "\n" + write_length_report(sweep_dir, args.bounds, args.splits)
        except (FileNotFoundError, DataError) as e:  # a run without its files or corpus
            print(f"rpr-nmt-report: {e}", file=sys.stderr)
            return 2
        print(text)
        print(f"written: {sweep_dir}/report.md" + (f", {plot}" if plot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
