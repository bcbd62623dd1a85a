"""A sweep's runs as a paper-shaped table, statistics over seeds, and tests against a baseline.

A sweep folder (or its copy under results/) holds one run folder per setting and seed. Runs that
differ only in `train.seed` are one setting, one row: report.md shows each metric's mean ± standard
deviation over seeds, then the test scores with a 95% t-interval over seeds (rpr_nmt.report.stats)
and sacrebleu's paired test of each setting against a baseline setting, seed by seed
(rpr_nmt.report.significance). The baseline is the paper's reference model when the sweep has it
(k = 16, a^K + a^V, no sinusoid), else the first row; each claim the sweep bears on is judged
against the baseline it names (rpr_nmt.report.claims). Rows are named as a reader names their
position methods (rpr_nmt.report.labels), not by their config keys.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from rpr_nmt.report import placement
from rpr_nmt.report.claims import FULL_TEST_CLAIMS, is_reference
from rpr_nmt.report.notes import TOKENIZED_NOTE, hosts_note, unfinished_note
from rpr_nmt.report.plots import plot_bleu_against_k, plot_settings
from rpr_nmt.report.rows import (
    LATER_METHODS,
    Row,
    group_runs,
    mixed_recipe_note,
    recipe_keys,
    row_order,
)
from rpr_nmt.report.runs import (
    SEED_KEY,
    CorpusText,
    Run,
    find_runs,
    read_hypotheses,
)
from rpr_nmt.report.significance import (
    ALPHA,
    DEFAULT_SAMPLES,
    METRICS,
    TESTS,
    Comparison,
    SeedOutput,
    compare_seedwise,
)
from rpr_nmt.report.speed import Speed, load_speed
from rpr_nmt.report.stats import STATS_LEGEND, format_stats
from rpr_nmt.report.verdicts import claims_section, comparisons_needed, judge_claims, save_verdicts

# Columns of the main table: (summary key, heading, decimals).
COLUMNS = (
    ("valid_bleu", "valid BLEU", 1),
    ("test_bleu", "test BLEU", 1),
    ("test_tokenized_bleu", "test BLEU tok.", 1),
    ("test_chrf", "test chrF", 1),
    ("train_tokens_per_sec", "tokens/s", 0),
    ("steps", "steps", 0),
)
SUMMARY_KEYS = {"BLEU": "test_bleu", "chrF": "test_chrf"}  # a tested metric's summary entry
REPORT_FILE = "report.md"  # the sweep's report
CLAIMS_FILE = "claims.json"  # report.md's verdicts as data, beside it
SETTINGS_PLOT_FILE = "test_bleu_by_setting.png"  # a dot per seed, mean ± sd, per setting


def reference_row(rows: Sequence[Row], setting: str | None = None) -> Row:
    """The baseline row: the one named `setting` (its label, as the tables name it, or its config
    keys), else k = 16 with a^K + a^V and no sinusoid (the paper's model), else the first row.

    Raises:
        ValueError: no row is named `setting` (the message lists the settings).
    """
    if setting is not None:
        for row in rows:
            if setting in (row.label, row.setting):
                return row
        names = ", ".join(repr(r.label) for r in rows)
        raise ValueError(f"baseline {setting!r} is not a setting of this sweep; settings: {names}")
    for row in rows:
        if is_reference(row.model):
            return row
    return rows[0]


def _cell(values: list[float], decimals: int) -> str:
    if not values:
        return "-"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{decimals}f}"
    spread = statistics.stdev(values)
    return f"{mean:.{decimals}f} ± {spread:.{decimals}f}"


def markdown_table(rows: Sequence[Row], speed: Speed | None = None) -> str:
    """A markdown table, one row per setting: its label, seeds, then each metric as mean ± std.

    With a benchmark sitting's figures (`speed`), its speed and memory columns replace the runs'
    own tokens/s (rpr_nmt.report.speed), and a note under the table names the sitting.
    """
    columns = [c for c in COLUMNS if speed is None or c[0] != "train_tokens_per_sec"]
    head = ["setting", "seeds"] + [h for _, h, _ in columns]
    head += speed.headings() if speed else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row.label, row.seeds()]
        cells += [_cell(row.values(key), decimals) for key, _, decimals in columns]
        cells += speed.cells(row.label) if speed else []
        lines.append("| " + " | ".join(cells) + " |")
    return (
        "\n".join(lines) + "\n\n" + (speed.note() if speed else hosts_note(rows)) + TOKENIZED_NOTE
    )


def compare_rows(
    rows: Sequence[Row],
    baseline: Row,
    *,
    test: str = "bs",
    n_samples: int = 0,
    text: CorpusText | None = None,
) -> dict[str, Comparison]:
    """sacrebleu's paired test of every other row against `baseline`, seed by seed, on the test
    hypotheses (hyp_<test split>.txt) and the references of the runs' corpus (read through
    `text` when given, so that a report's several comparisons read the corpus once).

    Only the runs with a test score in their summary are paired (Row.scored_runs): those the
    rows' means rest on. Theirs must be readable: a report whose tests and verdicts silently went
    missing would read as "cannot tell" where the data says "holds".

    Raises:
        rpr_nmt.data.DataError: a run's corpus is not found (the message says how to point at it).
        FileNotFoundError: a run has no test hypotheses (hyp_<test split>.txt).
    """
    if all(row is baseline for row in rows):
        return {}  # one setting: nothing to pair with, so no output to read
    text = text or CorpusText()
    base_outputs = [read_test_output(run, text) for run in baseline.scored_runs()]
    others = {
        row.setting: [read_test_output(run, text) for run in row.scored_runs()]
        for row in rows
        if row is not baseline
    }
    compared = compare_seedwise(base_outputs, others, test=test, n_samples=n_samples)
    for row in rows:
        if row.setting in compared and not compared[row.setting].seeds:
            if not row.scored_runs():
                compared[row.setting].note = "no run with a test score"
            elif not baseline.scored_runs():
                compared[row.setting].note = "no run of the baseline with a test score"
    return compared


def read_test_output(run: Run, text: CorpusText) -> SeedOutput:
    """The run's (seed, test hypotheses, references, target language), as the paired tests read
    them.

    Raises:
        rpr_nmt.data.DataError: the run's corpus is not found (the message says how to point at it).
        FileNotFoundError: the run has no test hypotheses (hyp_<test split>.txt).
    """
    refs = text.references(run, run.test_split)
    try:
        hyps = read_hypotheses(run, run.test_split, len(refs))
    except FileNotFoundError as e:
        if run.unfinished:  # stopped by a signal before its evaluation at the end
            budget = run.config.get("train", {}).get("max_steps")
            raise FileNotFoundError(
                f"{run.path} stopped at update {run.summary.get('steps', '?')} of {budget} (a "
                "signal) and has no test output yet: rerun its training command to resume it (it "
                "evaluates at the end), move it out of the sweep, or give --significance none"
            ) from e
        raise FileNotFoundError(
            f"{e}; the paired tests need every run's test output: evaluate the run, move it out "
            "of the sweep, or give --significance none"
        ) from e
    return run.seed, hyps, refs, str(run.config.get("data", {}).get("tgt_lang", ""))


def statistics_table(
    rows: Sequence[Row], baseline: Row, compared: dict[str, Comparison], test: str | None
) -> str:
    """Test BLEU and chrF per setting: mean ± sd [95% CI] over seeds, the mean difference to
    the baseline over seed pairs, and the paired test's p-values (median, max over pairs)."""
    head = ["setting", "seeds"]
    for metric in METRICS:
        head += [f"test {metric}", f"Δ {metric}", f"p ({metric})"] if test else [f"test {metric}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        is_base = row is baseline
        name = row.label + (" (baseline)" if is_base else "")
        cells = [name, row.seeds()]
        comparison = compared.get(row.setting, Comparison())
        for metric in METRICS:
            cells.append(format_stats(row.stats(SUMMARY_KEYS[metric])))
            if test:
                deltas = comparison.deltas.get(metric) or []
                delta = f"{statistics.fmean(deltas):+.1f}" if deltas else "-"
                cells += ["" if is_base else delta, "" if is_base else comparison.cell(metric)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _statistics_section(
    rows: Sequence[Row],
    baseline: Row,
    compared: dict[str, Comparison],
    test: str | None,
    n_samples: int,
    sweep_dir: Path,
) -> str:
    """The '## Test scores over seeds' section of report.md."""
    text = f"\n## Test scores over seeds\n\n{STATS_LEGEND}.\n"
    if test:
        samples = n_samples or DEFAULT_SAMPLES[test]
        text += (
            f"Baseline: {baseline.label}. Δ: setting minus baseline, mean over seed pairs. "
            f"p: sacrebleu's {TESTS[test]} ({samples} samples) of each seed against the "
            f"baseline's run with the same {SEED_KEY}, median (max) over the seed pairs; "
            f"* = every pair below {ALPHA}.\n"
        )
    text += "\n" + statistics_table(rows, baseline, compared, test)
    labels = {row.setting: row.label for row in rows}
    untested: dict[str, list[str]] = {}  # one line per reason, naming its settings
    for setting, comparison in compared.items():
        if comparison.note:
            untested.setdefault(comparison.note, []).append(labels.get(setting, setting))
    notes = [f"- no test for {'; '.join(names)}: {note}" for note, names in untested.items()]
    if test:
        notes += [f"- {line}" for line in _unscored_lines(rows, sweep_dir)]
    return text + ("\n" + "\n".join(notes) + "\n" if notes else "")


def _unscored_lines(rows: Sequence[Row], sweep_dir: Path) -> list[str]:
    """Per row with runs lacking a test score in their summary: those runs, named, left out of
    its mean, spread, Δ and paired tests alike (compare_rows)."""
    lines = []
    for row in rows:
        left = [str(r.path.relative_to(sweep_dir)) for r in row.unscored_runs()]
        if left:
            lines.append(
                f"{row.label}: {len(left)} run(s) without a test score in train_summary.json, "
                f"left out of its test figures and tests: {', '.join(left)}"
            )
    return lines


def write_report(
    sweep_dir: str | Path,
    *,
    baseline: str | None = None,
    significance: str | None = "bs",
    n_samples: int = 0,
    corpus: CorpusText | None = None,
) -> tuple[str, list[Path]]:
    """Write report.md, its plots and its verdicts (claims.json) into `sweep_dir`; return the
    markdown and every file written (a plot with nothing to draw is not, and an earlier one goes).

    Args:
        sweep_dir: a sweep folder or its collected copy under results/.
        baseline: the setting every row is tested against; None = reference_row's choice.
        significance: "bs" (paired bootstrap), "ar" (approximate randomization) or None (no test).
        n_samples: resamples or trials of the test; 0 = sacrebleu's default.
        corpus: the corpus text already read for this sweep (e.g. by its length report); None =
            read it here.

    Raises:
        FileNotFoundError: no finished run under `sweep_dir`, or (with a test) a run without its
            test hypotheses.
        rpr_nmt.data.DataError: (with a test) a run's corpus is not found.
        ValueError: `baseline` names no setting of the sweep.
    """
    sweep_dir = Path(sweep_dir)
    runs = find_runs(sweep_dir)
    if not runs:
        raise FileNotFoundError(
            f"no finished runs under {sweep_dir}: expected run folders with train_summary.json "
            "and .hydra/ (the output of `rpr-nmt-train experiment=...`)"
        )
    rows = group_runs(runs)
    base = reference_row(rows, baseline)
    if len(rows) == 1:
        significance = None  # one setting (a lone run, make demo's): nothing to test it against
    speed = load_speed(sweep_dir)
    # Everything is read and tested before anything is written: a failure leaves the folder as is.
    compared: dict[str, Comparison] = {}
    by_baseline: dict[str, dict[str, Comparison]] = {}
    verdicts = []
    mixed = recipe_keys(rows)  # claims and placements only under one recipe
    if significance:
        paired = dict(test=significance, n_samples=n_samples, text=corpus or CorpusText())
        compared = compare_rows(rows, base, **paired)
        by_baseline = {base.setting: compared}  # each claim is judged against its own baseline
    if significance and not mixed:
        needed = comparisons_needed(FULL_TEST_CLAIMS, rows)
        for setting, (both, *placed) in placement.comparisons_needed(rows).items():
            group = needed.setdefault(setting, [both])
            group += [row for row in placed if row not in group]
        for setting, (claim_base, *judged) in needed.items():
            if setting not in by_baseline:
                by_baseline[setting] = compare_rows(judged, claim_base, **paired)
        verdicts = judge_claims(FULL_TEST_CLAIMS, rows, by_baseline)
    text = f"# Sweep {sweep_dir.name}\n\n{len(runs)} runs, {len(rows)} settings.\n\n"
    text += unfinished_note(sweep_dir, runs)
    text += markdown_table(rows, speed)
    plot_path: Path | None = sweep_dir / "bleu_vs_k.png"
    if plot_bleu_against_k(rows, plot_path):
        text += f"\n![test BLEU against k]({plot_path.name})\n"
    else:
        plot_path.unlink(missing_ok=True)  # drawn by an earlier report of other runs
        plot_path = None
    text += _statistics_section(rows, base, compared, significance, n_samples, sweep_dir)
    if mixed:
        text += "\n## Claims\n\n" + mixed_recipe_note(mixed, "claims and no placement table")
    else:
        text += placement.placement_section(rows, by_baseline)
    if significance and not mixed:
        text += claims_section(verdicts, TESTS[significance])
    save_verdicts(sweep_dir / CLAIMS_FILE, verdicts)
    settings_plot: Path | None = sweep_dir / SETTINGS_PLOT_FILE
    if plot_settings(rows, settings_plot):
        text += f"\n![test BLEU per setting, one point per seed]({SETTINGS_PLOT_FILE})\n"
    else:
        settings_plot.unlink(missing_ok=True)  # drawn by an earlier report of other runs
        settings_plot = None
    (sweep_dir / REPORT_FILE).write_text(text)
    claims = sweep_dir / CLAIMS_FILE if verdicts else None  # none: an earlier one is removed
    written = [sweep_dir / REPORT_FILE, plot_path, claims, settings_plot]
    return text, [path for path in written if path is not None]


__all__ = [
    "LATER_METHODS",
    "Row",
    "Run",
    "compare_rows",
    "find_runs",
    "group_runs",
    "markdown_table",
    "plot_bleu_against_k",
    "reference_row",
    "row_order",
    "statistics_table",
    "write_report",
]
