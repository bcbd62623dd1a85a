"""BLEU by source length: does a model generalise to sentences longer than any it was trained on?

For each run of a sweep, the test hypotheses the trainer wrote (hyp_<test_split>.txt) are grouped by
the source sentence's length in BPE tokens (the run's own BPE model, EOS excluded: the unit of
data.max_train_source_tokens; src_lengths_<split>.txt in a collected run), and each group is scored
with sacrebleu. A setting's cell is the mean over its seeds, with the standard deviation and a 95%
t-interval when it has several (rpr_nmt.report.stats). write_length_report puts the table and a
plot beside the sweep's report.md; when the runs trained on capped sources, it adds every setting's
BLEU on the test sentences past the cap, tested pair by pair against the sinusoid
(rpr_nmt.report.unseen_lengths), and judges the claims on unseen lengths, each against the
baseline it names (rpr_nmt.report.claims); when they did not, the same on the sentences of the
last bucket (the long sentences of a news test set) and the claims on long sentences.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rpr_nmt.buckets import DEFAULT_BOUNDS, bucket_labels, bucket_of
from rpr_nmt.report import placement
from rpr_nmt.report.claims import PAST_CAP_CLAIMS, is_sinusoid
from rpr_nmt.report.plots import pyplot, spread_points
from rpr_nmt.report.rows import mixed_recipe_note, recipe_keys
from rpr_nmt.report.runs import CorpusText, Run, find_runs, read_hypotheses, source_lengths
from rpr_nmt.report.significance import TESTS, report_bleu
from rpr_nmt.report.stats import STATS_LEGEND, format_stats, seed_stats
from rpr_nmt.report.sweep import Row, group_runs, reference_row
from rpr_nmt.report.unseen_lengths import (
    compare_by_baseline,
    compare_unseen_lengths,
    long_sentences,
    seed_bleu,
    unseen_length_section,
    unseen_outputs,
)
from rpr_nmt.report.verdicts import claims_section, comparisons_needed, judge_claims, save_verdicts

# Bucket lower bounds in BPE tokens; a bucket runs up to the next bound - 1, the last one open.
LENGTH_REPORT_FILE = "length_report.md"  # the report by source length, beside report.md
LENGTH_PLOT_FILE = "bleu_by_length.png"  # its plot
LENGTH_CLAIMS_FILE = "length_claims.json"  # length_report.md's verdict as data, beside it
LENGTH_OPTIONS_FILE = "length_options.json"  # its buckets and splits, reused when not given


@dataclass
class BucketScores:
    """BLEU of one run per source-length bucket."""

    labels: list[str]
    sentences: list[int]
    bleu: list[float | None]  # None where a bucket is empty
    longest: int = 0  # the longest source in BPE tokens


def score_by_length(
    run: Run,
    bounds: Sequence[int] = DEFAULT_BOUNDS,
    splits: Sequence[str] | None = None,
    text: CorpusText | None = None,
) -> BucketScores:
    """Score a finished run's hypotheses per source-length bucket.

    Args:
        run: a run that evaluated itself at the end (hyp_<split>.txt), with its checkpoint or
            collected (src_lengths_<split>.txt).
        bounds: bucket lower bounds in BPE tokens.
        splits: the splits whose sentences are pooled; None = the run's test split alone.
        text: the corpus reader shared by the runs of a report; None = a new one.

    Raises:
        FileNotFoundError: the run has no hyp file, or neither lengths nor a checkpoint.
    """
    text = text or CorpusText()
    lengths, refs, hyps = [], [], []
    for split in splits or [run.test_split]:
        split_refs = text.references(run, split)
        hyps += read_hypotheses(run, split, len(split_refs))
        refs += split_refs
        lengths += source_lengths(run, split, text)
    if len(lengths) != len(refs):
        raise FileNotFoundError(f"{run.path}: {len(lengths)} source lengths for {len(refs)} refs")
    groups: list[list[int]] = [[] for _ in bounds]
    for i, length in enumerate(lengths):
        groups[bucket_of(length, bounds)].append(i)
    bleu: list[float | None] = []
    for members in groups:
        if not members:
            bleu.append(None)
            continue
        bleu.append(report_bleu([hyps[i] for i in members], [refs[i] for i in members], ""))
    return BucketScores(
        bucket_labels(bounds), [len(g) for g in groups], bleu, max(lengths, default=0)
    )


def bucket_values(runs_scores: Sequence[BucketScores]) -> list[list[float]]:
    """Per bucket, the BLEU of each seed that has sentences in it."""
    n = len(runs_scores[0].bleu)
    return [[s.bleu[i] for s in runs_scores if s.bleu[i] is not None] for i in range(n)]


def length_table(
    rows: Sequence[Row],
    bounds: Sequence[int] = DEFAULT_BOUNDS,
    splits: Sequence[str] | None = None,
    text: CorpusText | None = None,
) -> tuple[str, dict[str, list[BucketScores]]]:
    """Markdown table (one row per setting, one column per bucket) and the scores behind it:
    each setting's BucketScores, one per seed, by its label (rpr_nmt.report.labels).

    Args: as score_by_length; rows are the sweep's settings (group_runs), at least one.
    """
    text = text or CorpusText()
    results = {
        row.label: [score_by_length(run, bounds, splits, text) for run in row.runs] for row in rows
    }
    first = next(iter(results.values()))[0]
    what = " + ".join(splits) if splits else "test"
    head = ["setting", "seeds"]
    head += [f"{label} ({n})" for label, n in zip(first.labels, first.sentences)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, scores in results.items():
        cells = [format_stats(seed_stats(values)) for values in bucket_values(scores)]
        lines.append("| " + " | ".join([label, str(len(scores))] + cells) + " |")
    caption = (
        f"{what} BLEU by source length in BPE tokens (sentences per bucket in brackets); "
        f"{STATS_LEGEND}\n\n"
    )
    return caption + "\n".join(lines) + "\n", results


def mean_differences(
    results: dict[str, list[BucketScores]], baseline: str
) -> dict[str, list[float | None]]:
    """Per setting other than `baseline`, per bucket: its mean BLEU over seeds minus the
    baseline's; None where either has no sentence in the bucket."""

    def means(scores: list[BucketScores]) -> list[float | None]:
        return [statistics.fmean(v) if v else None for v in bucket_values(scores)]

    base = means(results[baseline])
    return {
        label: [None if m is None or b is None else m - b for m, b in zip(means(scores), base)]
        for label, scores in results.items()
        if label != baseline
    }


MARKERS = "osv^DPX*hp"  # one per setting, so that lines of the same colour family stay apart


def plot_by_length(
    results: dict[str, list[BucketScores]],
    path: str | Path,
    cap: int | None,
    baseline: str | None = None,
) -> None:
    """One line per setting: BLEU against the source-length bucket (mean ± sd over seeds, a dot
    per seed), the training cap marked. With a `baseline` (a setting's label) and another
    setting, a second panel gives each setting's mean BLEU minus the baseline's, bucket by
    bucket: differences of a point are lost on the first panel's scale of 10 to 50 BLEU."""
    plt = pyplot()
    labels = next(iter(results.values()))[0].labels
    paired = baseline in results and len(results) > 1

    def style(i: int) -> dict[str, str]:  # setting i's marker and colour, alike in both panels
        return {"marker": MARKERS[i % len(MARKERS)], "color": f"C{i % 10}"}

    fig, axes = plt.subplots(1, 2 if paired else 1, figsize=(12, 4.2) if paired else (7, 3.8))
    ax = axes[0] if paired else axes
    for i, (label, scores) in enumerate(results.items()):
        values = bucket_values(scores)
        xs = [j for j, v in enumerate(values) if v]
        shift = (i - (len(results) - 1) / 2) * 0.04  # settings side by side, not on top
        spread_points(ax, [x + shift for x in xs], [values[x] for x in xs], label=label, **style(i))
    ax.set_ylabel("BLEU (dots: seeds; bars: ± sd)")
    panels = [ax]
    if paired:
        delta_ax = axes[1]
        delta_ax.axhline(0.0, color="grey", linewidth=1, label=f"{baseline} (baseline)")
        differences = mean_differences(results, baseline)
        for i, label in enumerate(results):
            if label == baseline:
                continue
            xs = [j for j, d in enumerate(differences[label]) if d is not None]
            delta_ax.plot(xs, [differences[label][j] for j in xs], label=label, **style(i))
        delta_ax.set_ylabel(f"BLEU minus {baseline}'s (means over seeds)")
        panels.append(delta_ax)
    for panel in panels:
        panel.set_xticks(range(len(labels)), labels)
        panel.set_xlabel("source length (BPE tokens)")
        if cap is not None:
            seen = [
                i for i, label in enumerate(labels) if int(label.split("-")[0].rstrip("+")) <= cap
            ]
            panel.axvline(
                max(seen) + 0.5, color="grey", linestyle="--", label=f"training cap ({cap})"
            )
        panel.grid(True, alpha=0.3)
        panel.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def check_bounds(bounds: Sequence[int]) -> list[int]:
    """Bucket lower bounds, increasing integers from 1: the first bucket also holds every
    shorter sentence (bucket_of), so a first bound above 1 would mislabel it.

    Raises:
        ValueError: names the bounds and what to give.
    """
    values = list(bounds)
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    if not values or not ints or values[0] != 1 or any(b <= a for a, b in zip(values, values[1:])):
        raise ValueError(
            f"bounds must be increasing and start at 1 (the first bucket holds the shortest "
            f"sentences), e.g. 1,11,16; got {','.join(map(str, values)) or 'none'}"
        )
    return values


def check_last_bucket(
    bounds: Sequence[int], splits: Sequence[str] | None, scores: BucketScores
) -> None:
    """Refuse bounds whose last bucket starts past the longest sentence (an empty column).

    Raises:
        ValueError: names the bound and the longest sentence's length.
    """
    if not scores.sentences[-1]:
        what = " + ".join(splits) if splits else "test"
        raise ValueError(
            f"bounds {','.join(map(str, bounds))}: no {what} sentence has {bounds[-1]} BPE tokens "
            f"or more (the longest has {scores.longest}): give a last bound of at most "
            f"{scores.longest}"
        )


def check_splits(splits: Any) -> list[str]:
    """Split names, each once: a split given twice would count its sentences twice.

    Raises:
        ValueError: names the splits.
    """
    if (
        not isinstance(splits, list)
        or not splits
        or not all(isinstance(x, str) for x in splits)
        or len(set(splits)) < len(splits)
    ):
        raise ValueError(f"splits {splits!r} are not a list of distinct split names")
    return splits


def length_options(
    sweep_dir: str | Path, bounds: Sequence[int] | None, splits: Sequence[str] | None
) -> tuple[list[int], list[str] | None]:
    """The buckets and splits of a length report: those given, else those the sweep's last
    length report used (LENGTH_OPTIONS_FILE, so `make results` rebuilds it as it was written),
    else DEFAULT_BOUNDS and the test split alone."""
    path = Path(sweep_dir) / LENGTH_OPTIONS_FILE
    saved = {}
    if path.exists():
        try:
            saved = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not JSON ({e}); delete it and give --bounds/--splits") from e
        if not isinstance(saved, dict):
            raise ValueError(
                f"{path}: not an object of bounds and splits; delete it and give --bounds/--splits"
            )
    if bounds:
        chosen_bounds = check_bounds(bounds)
    else:
        try:
            chosen_bounds = check_bounds(saved.get("bounds") or DEFAULT_BOUNDS)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}; delete it and give --bounds/--splits") from None
    chosen_splits = list(splits) if splits else saved.get("splits")
    if chosen_splits is not None:
        try:
            check_splits(chosen_splits)
        except ValueError as e:
            raise ValueError(f"{path}: {e}; delete it and give --bounds/--splits") from None
    return chosen_bounds, chosen_splits


def write_length_report(
    sweep_dir: str | Path,
    bounds: Sequence[int] | None = None,
    splits: Sequence[str] | None = None,
    *,
    test: str | None = "bs",
    n_samples: int = 0,
    corpus: CorpusText | None = None,
) -> str:
    """Write length_report.md, bleu_by_length.png, its options (length_options.json) and its
    verdicts (length_claims.json, only where claims are judged) into `sweep_dir`; return the
    markdown.

    With a training cap on source length (data.max_train_source_tokens) and a significance
    `test`, the report also scores every setting past the cap against the sinusoid (or, without
    one, the reference) and judges the claims on unseen lengths, each against the baseline it
    names (rpr_nmt.report.claims.PAST_CAP_CLAIMS); without a cap, on the last bucket's long
    sentences, and judges the claims on long sentences (long_sentences).

    Args: sweep_dir holds the runs; bounds and splits as score_by_length, None = as
        length_options; test, n_samples and corpus as write_report.
    """
    given = bool(bounds)
    bounds, splits = length_options(sweep_dir, bounds, splits)
    runs = find_runs(sweep_dir)
    rows, corpus = group_runs(runs), corpus or CorpusText()  # one read of each run and corpus
    if not rows:
        raise FileNotFoundError(f"no finished runs under {sweep_dir}")
    text, results = length_table(rows, bounds, splits, corpus)
    if given:
        check_last_bucket(bounds, splits, next(iter(results.values()))[0])
    caps = {run.config["data"].get("max_train_source_tokens") for run in runs}
    mixed = recipe_keys(rows) or (["data.max_train_source_tokens"] if len(caps) > 1 else [])
    cap = None if mixed else caps.pop()  # what is past the cap needs one cap and one recipe
    reference = reference_row(rows)
    sinusoid = [row for row in rows if is_sinusoid(row.model)]
    baseline = sinusoid[0] if sinusoid else reference
    plot_by_length(results, Path(sweep_dir) / LENGTH_PLOT_FILE, cap, baseline.label)
    text += f"\n![test BLEU by source length]({LENGTH_PLOT_FILE})\n"
    verdicts = []
    if cap is not None and test:
        outputs = {row.setting: unseen_outputs(row, cap, corpus) for row in rows}
        paired = dict(test=test, n_samples=n_samples)  # the significance test's settings
        past_cap = seed_bleu(outputs)  # each setting's BLEU past the cap, one per seed
        against_baseline = compare_unseen_lengths(outputs, baseline.setting, **paired)
        text += unseen_length_section(rows, past_cap, baseline, against_baseline, cap, **paired)
        compared, n = against_baseline
        needed = comparisons_needed(PAST_CAP_CLAIMS, rows)  # each claim against its own baseline
        for setting, (both, *placed) in placement.comparisons_needed(rows).items():
            group = needed.setdefault(setting, [both])  # and each placement against "both"
            group += [row for row in placed if row not in group]
        by_baseline = compare_by_baseline(outputs, needed, {baseline.setting: compared}, **paired)
        scope = f"on the {n} test sentences longer than {cap} BPE tokens"
        text += placement.placement_section(
            rows, by_baseline, values=lambda row: past_cap[row.setting], scope=scope
        )
        verdicts = judge_claims(PAST_CAP_CLAIMS, rows, by_baseline, f"BLEU {scope}")
        text += claims_section(verdicts, TESTS[test])
    elif cap is None and not mixed and test:
        long_text, verdicts = long_sentences(rows, baseline, bounds[-1], corpus, test, n_samples)
        text += long_text
    elif mixed and test and caps != {None}:
        what = "tests past the training cap, placement table or claims on unseen lengths"
        text += "\n## Past the training lengths\n\n" + mixed_recipe_note(mixed, what)
    (Path(sweep_dir) / LENGTH_REPORT_FILE).write_text(text)
    options = {"bounds": bounds, "splits": splits}
    (Path(sweep_dir) / LENGTH_OPTIONS_FILE).write_text(json.dumps(options, indent=1) + "\n")
    save_verdicts(Path(sweep_dir) / LENGTH_CLAIMS_FILE, verdicts)
    return text
