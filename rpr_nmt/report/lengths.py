"""BLEU by source length: does a model generalise to sentences longer than any it was trained on?

For each run of a sweep, the test hypotheses the trainer wrote (hyp_<test_split>.txt) are grouped by
the source sentence's length in BPE tokens (the run's own BPE model, EOS excluded: the unit of
data.max_train_source_tokens), and each group is scored with sacrebleu. write_length_report puts
the table and a plot beside the sweep's report.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rpr_nmt.report.sweep import Run, find_runs, group_runs

# Bucket lower bounds in BPE tokens; a bucket runs up to the next bound - 1, the last one open.
DEFAULT_BOUNDS = (1, 11, 16, 21, 26, 31)


@dataclass
class BucketScores:
    """BLEU of one run per source-length bucket."""

    labels: list[str]
    sentences: list[int]
    bleu: list[float | None]  # None where a bucket is empty


def bucket_labels(bounds: Sequence[int]) -> list[str]:
    """'1-10', '11-15', ..., '31+' for bounds (1, 11, 16, ..., 31)."""
    labels = [f"{lo}-{hi - 1}" for lo, hi in zip(bounds, bounds[1:])]
    return labels + [f"{bounds[-1]}+"]


def bucket_of(length: int, bounds: Sequence[int]) -> int:
    """Index of the bucket holding `length` (lengths under the first bound go to the first)."""
    index = 0
    for i, lower in enumerate(bounds):
        if length >= lower:
            index = i
    return index


def score_by_length(
    run: Run, bounds: Sequence[int] = DEFAULT_BOUNDS, splits: Sequence[str] | None = None
) -> BucketScores:
    """Score a finished run's hypotheses per source-length bucket.

    Args:
        run: a run that evaluated itself at the end (hyp_<split>.txt and checkpoints/last.pt).
        bounds: bucket lower bounds in BPE tokens.
        splits: the splits whose sentences are pooled; None = the run's test split alone.

    Raises:
        FileNotFoundError: the run has no hyp file or no checkpoint (train.evaluate_at_end off).
    """
    from rpr_nmt.checkpoint import load_checkpoint
    from rpr_nmt.config import DataConfig, section_from_dict
    from rpr_nmt.data import Tokenizer, read_parallel_text
    from rpr_nmt.evaluate import score_corpus

    where = f"{run.path}/.hydra/config.yaml: data"
    data_cfg = section_from_dict(DataConfig, run.config["data"], where)
    checkpoint = run.path / "checkpoints" / "last.pt"
    splits = list(splits or [data_cfg.test_split])
    hyp_paths = [run.path / f"hyp_{split}.txt" for split in splits]
    for needed in (*hyp_paths, checkpoint):
        if not needed.is_file():
            raise FileNotFoundError(f"{needed} is missing: the run must evaluate itself at the end")
    tokenizer = Tokenizer.from_proto(load_checkpoint(checkpoint).bpe_model)
    sources, refs, hyps = [], [], []
    for split, path in zip(splits, hyp_paths):
        split_sources, split_refs = read_parallel_text(data_cfg, split)
        sources += split_sources
        refs += split_refs
        hyps += path.read_text(encoding="utf-8").split("\n")[: len(split_refs)]
    groups: list[list[int]] = [[] for _ in bounds]
    for i, source in enumerate(sources):
        groups[bucket_of(len(tokenizer.encode(source)), bounds)].append(i)
    bleu: list[float | None] = []
    for members in groups:
        if not members:
            bleu.append(None)
            continue
        scores = score_corpus([hyps[i] for i in members], [refs[i] for i in members], "")
        bleu.append(scores.bleu)
    return BucketScores(bucket_labels(bounds), [len(g) for g in groups], bleu)


def length_table(
    sweep_dir: str | Path,
    bounds: Sequence[int] = DEFAULT_BOUNDS,
    splits: Sequence[str] | None = None,
) -> tuple[str, dict]:
    """Markdown table (one row per run setting, one column per bucket) and the scores behind it.

    Args: as score_by_length; sweep_dir holds the runs.
    """
    rows = group_runs(find_runs(sweep_dir))
    if not rows:
        raise FileNotFoundError(f"no finished runs under {sweep_dir}")
    results = {row.setting: score_by_length(row.runs[0], bounds, splits) for row in rows}
    first = next(iter(results.values()))
    head = ["setting"] + [f"{label} ({n})" for label, n in zip(first.labels, first.sentences)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for setting, scores in results.items():
        cells = ["-" if b is None else f"{b:.1f}" for b in scores.bleu]
        lines.append("| " + " | ".join([setting] + cells) + " |")
    what = " + ".join(splits) if splits else "test"
    caption = f"{what} BLEU by source length in BPE tokens (sentences per bucket in brackets)\n\n"
    return caption + "\n".join(lines) + "\n", results


def plot_by_length(results: dict[str, BucketScores], path: str | Path, cap: int | None) -> None:
    """One line per setting: BLEU against the source-length bucket, the training cap marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    for setting, scores in results.items():
        xs = [i for i, b in enumerate(scores.bleu) if b is not None]
        ax.plot(xs, [scores.bleu[i] for i in xs], marker="o", label=setting)
    labels = next(iter(results.values())).labels
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("source length (BPE tokens)")
    ax.set_ylabel("BLEU")
    if cap is not None:
        seen = [i for i, label in enumerate(labels) if int(label.split("-")[0].rstrip("+")) <= cap]
        ax.axvline(max(seen) + 0.5, color="grey", linestyle="--", label=f"training cap ({cap})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_length_report(
    sweep_dir: str | Path,
    bounds: Sequence[int] | None = None,
    splits: Sequence[str] | None = None,
) -> str:
    """Write length_report.md and bleu_by_length.png into `sweep_dir`; return the markdown.

    Args: as length_table; bounds None = DEFAULT_BOUNDS.
    """
    text, results = length_table(sweep_dir, bounds or DEFAULT_BOUNDS, splits)
    cap = find_runs(sweep_dir)[0].config["data"].get("max_train_source_tokens")
    plot_by_length(results, Path(sweep_dir) / "bleu_by_length.png", cap)
    text += "\n![test BLEU by source length](bleu_by_length.png)\n"
    (Path(sweep_dir) / "length_report.md").write_text(text)
    return text
