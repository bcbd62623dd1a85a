"""rpr-nmt-report SWEEP_DIR: a sweep's runs as a paper-shaped table and a BLEU-vs-k plot."""

from __future__ import annotations

import argparse
import sys

from rpr_nmt.report import write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="rpr-nmt-report",
        description="Collect a sweep's runs (rpr-nmt-train experiment=...) into report.md and "
        "bleu_vs_k.png inside the sweep folder, and print the table.",
    )
    parser.add_argument(
        "sweep_dirs", nargs="+", help="sweep folders, e.g. runs/sweeps/ablate_k_multi30k_en_de"
    )
    args = parser.parse_args(argv)
    for sweep_dir in args.sweep_dirs:
        try:
            text, plot = write_report(sweep_dir)
        except FileNotFoundError as e:
            print(f"rpr-nmt-report: {e}", file=sys.stderr)
            return 2
        print(text)
        print(f"written: {sweep_dir}/report.md" + (f", {plot}" if plot else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
