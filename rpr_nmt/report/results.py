"""Results kept as data: a published sweep's small artefacts, committed under results/<sweep>/.

    rpr-nmt-report --collect runs/sweeps/ablate_k_multi30k_en_de    # -> results/ablate_k_.../
    rpr-nmt-report results/ablate_k_multi30k_en_de [--by-length]

For every finished run (train_summary.json written and its test split evaluated) the collection
copies into results/<sweep>/<run>/, <run> being the run folder's path inside the sweep:

    .hydra/config.yaml .hydra/overrides.yaml   the composed config (unresolved) and the overrides
    train_summary.json                         the trainer's summary (BLEU, chrF, steps, speed)
    eval_<split>.json hyp_<split>.txt          each evaluated split's scores and hypotheses
    src_lengths_<split>.txt                    each source's length in BPE tokens (EOS excluded),
                                               from the BPE model in checkpoints/last.pt

so that the reports (tables, statistics, significance, --by-length) need no checkpoint: only the
references, read from the corpus under the data root the config names ($RPR_NMT_DATA).
Checkpoints, corpora, BPE models and logs are never copied.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from rpr_nmt.report.runs import CorpusText, Run, bpe_lengths, find_runs, lengths_file

# Per-run files copied as they are (glob patterns relative to the run folder).
ARTEFACTS = (
    ".hydra/config.yaml",
    ".hydra/overrides.yaml",
    "train_summary.json",
    "eval_*.json",
    "hyp_*.txt",
)


def run_name(run: Run, source: Path) -> Path:
    """The run's folder relative to the collected sweep (its own name when `source` is the run)."""
    return Path(run.path.name) if run.path == source else run.path.relative_to(source)


def collect_run(run: Run, target: Path, text: CorpusText) -> list[str]:
    """Copy one finished run's artefacts into `target` and record its source lengths.

    Returns:
        Warnings (a split whose lengths could not be computed); empty when all went well.
    """
    # Source lengths first: they read the corpus, and a missing corpus should leave no half copy.
    lengths: dict[str, str] = {}  # split -> the lengths file's text
    warnings = []
    checkpoint = run.path / "checkpoints" / "last.pt"
    for hyp in sorted(run.path.glob("hyp_*.txt")):
        split = hyp.stem.removeprefix("hyp_")
        if lengths_file(run.path, split).is_file():  # collected before: keep its lengths
            lengths[split] = lengths_file(run.path, split).read_text()
        elif checkpoint.is_file():
            counts = bpe_lengths(text.parallel(run, split)[0], checkpoint)
            lengths[split] = "".join(f"{n}\n" for n in counts)
        else:
            warnings.append(f"{run.path}: no checkpoints/last.pt, so no source lengths for {split}")
    for pattern in ARTEFACTS:
        for path in sorted(run.path.glob(pattern)):
            destination = target / path.relative_to(run.path)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
    for split, counts_text in lengths.items():
        lengths_file(target, split).write_text(counts_text)
    return warnings


def collect_results(
    source: str | Path, into: str | Path, log: Callable[[str], None] = print
) -> list[Path]:
    """Copy every finished run under `source` (a sweep or a single run folder) into `into`.

    Args:
        source: a sweep folder (runs/sweeps/<name>) or one run folder.
        into: the results folder, e.g. results/<sweep name>; created when missing.
        log: receives one line per skipped run and per warning.

    Returns:
        The collected run folders under `into`.

    Raises:
        FileNotFoundError: `source` holds no finished run.
        rpr_nmt.data.DataError: a run's corpus is missing (needed for the source lengths).
    """
    source, into = Path(source).resolve(), Path(into)
    runs = find_runs(source)
    if not runs:
        raise FileNotFoundError(
            f"no finished runs under {source}: expected run folders with train_summary.json "
            "and .hydra/ (the output of `rpr-nmt-train`)"
        )
    text = CorpusText()
    collected = []
    for run in runs:
        if not (run.path / f"hyp_{run.test_split}.txt").is_file():
            log(f"skipped {run.path}: no hyp_{run.test_split}.txt (the run did not evaluate)")
            continue
        target = into / run_name(run, source)
        for warning in collect_run(run, target, text):
            log(f"warning: {warning}")
        collected.append(target)
    return collected
