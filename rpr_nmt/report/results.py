"""Results kept as data: a published sweep's small artefacts, committed under results/<sweep>/.

    rpr-nmt-report --collect runs/sweeps/ablate_k_multi30k_en_de    # -> results/ablate_k_.../
    rpr-nmt-report results/ablate_k_multi30k_en_de [--by-length]

For every finished run (train_summary.json written and its test split evaluated, or its
validation split for a tuning run, train.evaluate_test=false) the collection copies into
results/<sweep>/<run>/, <run> being the run folder's path inside the sweep:

    .hydra/config.yaml .hydra/overrides.yaml   the composed config (unresolved) and the overrides
    train_summary.json                         the trainer's summary (BLEU, chrF, steps, speed)
    eval_<split>.json hyp_<split>.txt          each evaluated split's scores and hypotheses
    src_lengths_<split>.txt                    each source's length in BPE tokens (EOS excluded),
                                               from the BPE model in checkpoints/last.pt

so that the reports (tables, statistics, significance, --by-length) need no checkpoint: only the
references, read from the corpus under the data root the config names ($RPR_NMT_DATA).
Checkpoints, corpora, BPE models and logs are never copied.

A folder under results/ holds one run: collecting the same run again (after it trained further)
replaces its files, and a run that trained something else under the same name (two sweeps whose
experiments differ in a key the folder name leaves out, such as where_positions and
where_positions_lengths) is refused before anything is copied, as are runs of another arithmetic
than those already there (rpr_nmt.report.runs.check_same_arithmetic).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from rpr_nmt.config import placement_keys
from rpr_nmt.report.runs import (
    CorpusText,
    Run,
    bpe_lengths,
    check_same_arithmetic,
    differing_keys,
    find_runs,
    lengths_file,
)

# Per-run files copied as they are (glob patterns relative to the run folder).
ARTEFACTS = (
    ".hydra/config.yaml",
    ".hydra/overrides.yaml",
    "train_summary.json",
    "eval_*.json",
    "hyp_*.txt",
)
# What a run folder writes besides ARTEFACTS: a collected copy's lengths (run_dir/LENGTHS).
LENGTHS = "src_lengths_*.txt"
# Keys that extend or place a run rather than change what it trains (configs/hydra/train.yaml's
# exclude_keys): a run collected again after more updates, or after scoring its test split, is
# the same run.
BUDGET_KEYS = placement_keys()


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
    for pattern in (*ARTEFACTS, LENGTHS):  # an earlier copy's files: none may outlive it
        for path in target.glob(pattern):
            path.unlink()
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
    planned: dict[Path, Run] = {}  # target folder -> the run copied there
    for run in runs:
        if not (run.path / f"hyp_{run.scored_split}.txt").is_file():
            log(f"skipped {run.path}: no hyp_{run.scored_split}.txt (the run did not evaluate)")
            continue
        if run.unfinished:  # its hyp files, if any, are of an earlier session
            log(
                f"skipped {run.path}: stopped before its budget (a signal); rerun its training "
                "command to finish it, then collect it"
            )
            continue
        planned[into / run_name(run, source)] = run
    check_targets(planned, into)
    text = CorpusText()
    for target, run in planned.items():
        for warning in collect_run(run, target, text):
            log(f"warning: {warning}")
    return list(planned)


def check_targets(planned: dict[Path, Run], into: Path) -> None:
    """Refuse, before anything is copied, a collection that would overwrite another run or mix
    arithmetics in `into`.

    Args:
        planned: target folder under `into` -> the run to copy there.
        into: the results folder (it may hold runs collected before).

    Raises:
        ValueError: a target holds a run that trained something else (the keys that differ are
            named), or the runs `into` would hold were trained in different arithmetics.
    """
    kept = {run.path.resolve(): run for run in find_runs(into)} if into.is_dir() else {}
    for target, run in planned.items():
        there = [r for path, r in kept.items() if path.is_relative_to(target.resolve())]
        for other in there:
            same_place = other.path.resolve() == target.resolve()
            differ = differing_keys(other, run, BUDGET_KEYS) if same_place else []
            if not same_place or differ:
                what = f"differs in {', '.join(differ)}" if differ else "is another run"
                raise ValueError(
                    f"{other.path} holds a run collected before that {what} from {run.path}: "
                    "collecting would overwrite it; collect into another folder (--into DIR)"
                )
            del kept[other.path.resolve()]
    try:
        check_same_arithmetic([*kept.values(), *planned.values()])
    except ValueError as e:
        raise ValueError(f"collecting into {into} would mix arithmetics: {e}") from None
