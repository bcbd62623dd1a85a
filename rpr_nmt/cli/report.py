"""rpr-nmt-report: a sweep's runs as tables with statistics over seeds, tests and plots.

    rpr-nmt-report runs/sweeps/ablate_k_multi30k_en_de            # report.md, plots
    rpr-nmt-report results/ablate_k_multi30k_en_de --by-length    # from committed results
    rpr-nmt-report SWEEP --baseline 'Shaw k = 4' --significance ar
    rpr-nmt-report --collect runs/sweeps/ablate_k_multi30k_en_de  # -> results/ablate_k_.../
    rpr-nmt-report --claims results   # every sweep's verdicts, claim by claim: results/claims.md
    rpr-nmt-report --retrained runs/sweeps/NEW --against results/compare_positions_multi30k_en_de

Missing run files or corpora print one line on stderr, write nothing and exit with status 2:
a report never stands in "-" for a test it could not make. --retrained exits with status 1 when
some retrained setting moved beyond rounding (rpr_nmt.report.retrained).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rpr_nmt.checkpoint import CheckpointError
from rpr_nmt.cli.run_folder import folder_problem
from rpr_nmt.data.errors import DataError
from rpr_nmt.report import (
    collect_results,
    write_claims_page,
    write_length_report,
    write_report,
)
from rpr_nmt.report.lengths import (
    LENGTH_CLAIMS_FILE,
    LENGTH_OPTIONS_FILE,
    LENGTH_PLOT_FILE,
    LENGTH_REPORT_FILE,
    check_bounds,
    check_splits,
)
from rpr_nmt.report.retrained import write_retraining_report
from rpr_nmt.report.runs import CorpusText, check_not_tuning
from rpr_nmt.report.sweep import find_runs, group_runs, read_test_output, reference_row


def _count(text: str) -> int:
    """A number of samples: 0 or more."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"{value} is negative: give 0 (sacrebleu's default) or more"
        )
    return value


def _int_list(text: str) -> list[int]:
    """'1,11,16' -> [1, 11, 16], increasing from 1 (check_bounds), else an argparse error."""
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,11,16, got {text!r}") from None
    try:
        return check_bounds(values)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _split_list(text: str) -> list[str]:
    """'val,test_2016_flickr' -> ['val', 'test_2016_flickr'], each once, else an argparse error."""
    try:
        return check_splits([s for s in text.split(",") if s])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected distinct splits like val,test_2016_flickr, got {text!r} (a split given "
            "twice would count its sentences twice)"
        ) from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rpr-nmt-report",
        description="Collect a sweep's runs (rpr-nmt-train experiment=...) into report.md and "
        "plots inside the sweep folder, and print the tables; or, with --collect, copy a "
        "sweep's small artefacts into results/<sweep> to commit.",
    )
    parser.add_argument(
        "sweep_dirs",
        nargs="*",
        help="sweep folders, e.g. runs/sweeps/ablate_k_multi30k_en_de or results/ablate_k_...",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="SETTING",
        help="the setting every row is tested against: a row's name in the table ('sinusoid', "
        "'Shaw k = 4') or its config keys; default: Shaw k = 16 (a^K + a^V, no sinusoid) when "
        "the sweep has it, else the first row. Each claim is judged against its own baseline",
    )
    parser.add_argument(
        "--significance",
        choices=("bs", "ar", "none"),
        default="bs",
        help="sacrebleu's paired test of each row against the baseline, seed by seed: "
        "bs = paired bootstrap resampling (default), ar = approximate randomization",
    )
    parser.add_argument(
        "--samples",
        type=_count,
        default=0,
        help="bootstrap resamples or randomization trials; 0 = sacrebleu's default (1000 / 10000)",
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
        "(default: those of the sweep's last length report, else 1,11,16,21,26,31)",
    )
    parser.add_argument(
        "--splits",
        type=_split_list,
        default=None,
        help="with --by-length: splits whose sentences are pooled, e.g. val,test_2016_flickr "
        "(each run wrote hyp_<split>.txt; default: those of the sweep's last length report, "
        "else the test split)",
    )
    parser.add_argument(
        "--collect",
        metavar="RUN_OR_SWEEP_DIR",
        default=None,
        help="copy every finished run's config, summary, scores, hypotheses and source lengths "
        "(no checkpoints) into --into",
    )
    parser.add_argument(
        "--into",
        default=None,
        help="with --collect: the results folder; default results/<name of RUN_OR_SWEEP_DIR>",
    )
    parser.add_argument(
        "--claims",
        metavar="RESULTS_DIR",
        default=None,
        help="after any reports: gather the verdicts every sweep's report wrote under "
        "RESULTS_DIR/*/ into RESULTS_DIR/claims.md, claim by claim",
    )
    parser.add_argument(
        "--retrained",
        metavar="NEW_DIR",
        default=None,
        help="runs of published settings retrained by changed code: judge each setting against "
        "its published runs (--against), seed for seed, and write NEW_DIR/retrained.md; exit 1 "
        "when one moved beyond rounding",
    )
    parser.add_argument(
        "--against",
        metavar="PUBLISHED_DIR",
        default=None,
        help="with --retrained: the folder of the published runs, e.g. "
        "results/compare_positions_multi30k_en_de",
    )
    return parser


def _retrained(new: str, against: str | None, test: str | None, n_samples: int) -> int:
    if not against:
        raise ValueError("--retrained needs --against PUBLISHED_DIR, the published runs' folder")
    if test is None:
        raise ValueError("--retrained rests on the paired tests: give --significance bs or ar")
    new_dir, published = Path(new).resolve(), Path(against).resolve()
    if new_dir.is_relative_to(published) or published.is_relative_to(new_dir):
        raise ValueError(
            f"--retrained {new} and --against {against} hold the same runs: the published runs "
            "would be judged against themselves (and retrained.md written among them); give the "
            "folder the changed code trained into, e.g. runs/sweeps/retrain_published_<data>"
        )
    path, text, passed = write_retraining_report(new, against, test=test, n_samples=n_samples)
    print(text)
    print(f"written: {path}")
    return 0 if passed else 1


def _collect_target(source: str, into: str | None) -> Path:
    """The folder --collect copies into (--into, else results/<name of source>), once it is
    known to be a folder apart from the collected runs (ValueError: one line saying why not)."""
    target = Path(into) if into else Path("results") / Path(source).resolve().name
    given = f"--into {target}" if into else f"the default --into, {target},"
    problem = folder_problem(target)
    if problem:
        raise ValueError(f"{given}: {problem}: collect into a folder (--into DIR)")
    src, dst = Path(source).resolve(), target.resolve()
    a_run = (src / "train_summary.json").is_file()
    if dst == src or dst.is_relative_to(src) or (a_run and dst == src.parent):
        raise ValueError(
            f"{given} is (or holds) the collected folder {source}: the copies would land on "
            f"the runs they copy; collect into another folder, e.g. --into results/{src.name}"
        )
    return target


def _collect(source: str, into: str | None) -> int:
    target = _collect_target(source, into)
    collected = collect_results(source, target, log=lambda line: print(line, file=sys.stderr))
    print(f"collected {len(collected)} runs into {target}:")
    for run in collected:
        print(f"  {run}")
    if any(run.tuning for run in find_runs(target)):
        print(f"table: python scripts/tuning_table.py {target}")
    else:
        print(f"report: rpr-nmt-report {target}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (2: missing files, corpus or setting)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not (args.collect or args.sweep_dirs or args.claims or args.retrained):
        parser.error(
            "give sweep folders to report on, --collect RUN_OR_SWEEP_DIR, --claims RESULTS_DIR "
            "or --retrained NEW_DIR --against PUBLISHED_DIR"
        )
    if args.against and not args.retrained:
        parser.error("--against goes with --retrained NEW_DIR")
    for given, name, needs in (
        (args.bounds, "--bounds", args.by_length),
        (args.splits, "--splits", args.by_length),
    ):
        if given is not None and not needs:
            parser.error(f"{name} goes with --by-length: add --by-length, or leave {name} out")
    if args.into and not args.collect:
        parser.error("--into goes with --collect RUN_OR_SWEEP_DIR")
    if args.samples and args.significance == "none":
        parser.error("--samples goes with a test: give --significance bs or ar, or leave it out")
    status = 0
    test = None if args.significance == "none" else args.significance
    try:
        if args.collect:
            _collect(args.collect, args.into)
        for sweep_dir in args.sweep_dirs:
            lengths, corpus = "", CorpusText()  # the sweep's corpus, read once for both reports
            runs = find_runs(sweep_dir)
            check_not_tuning(runs, sweep_dir)  # before anything is written
            if args.by_length:  # first, so that a missing file leaves the folder as it was
                if args.baseline:  # a setting of the sweep? (ValueError naming them if not)
                    reference_row(group_runs(runs), args.baseline)
                if test:  # what the main report's tests read, before the length report is written
                    for run in runs:
                        read_test_output(run, corpus)
                lengths = "\n" + write_length_report(
                    sweep_dir, args.bounds, args.splits, test=test, n_samples=args.samples,
                    corpus=corpus,
                )  # fmt: skip
            text, written = write_report(
                sweep_dir, baseline=args.baseline, significance=test, n_samples=args.samples,
                corpus=corpus,
            )  # fmt: skip
            print(text + lengths)
            if args.by_length:
                names = (
                    LENGTH_REPORT_FILE,
                    LENGTH_PLOT_FILE,
                    LENGTH_CLAIMS_FILE,
                    LENGTH_OPTIONS_FILE,
                )
                # The claims file only with verdicts (an earlier one is removed without them).
                written += [Path(sweep_dir) / n for n in names if (Path(sweep_dir) / n).exists()]
            print("written: " + ", ".join(map(str, written)))
        if args.claims:
            path, text = write_claims_page(args.claims)
            print(text)
            print(f"written: {path}")
        if args.retrained:
            status = _retrained(args.retrained, args.against, test, args.samples)
    except (FileNotFoundError, DataError, CheckpointError, ValueError) as e:
        print(f"rpr-nmt-report: {e}", file=sys.stderr)
        return 2
    return status


if __name__ == "__main__":
    sys.exit(main())
