"""rpr-nmt-score: the model's log-probability of given references (forced decoding).

    rpr-nmt-score checkpoint=runs/train/default/checkpoints/last.pt        # the data's test split
    rpr-nmt-score checkpoint=runs/train/default split=val by_length=true   # + tables by length
    rpr-nmt-score checkpoint=model.pt source=news.en reference=news.de     # a local file pair
    echo "A man rides. ||| Ein Mann fährt." | rpr-nmt-score checkpoint=model.pt pairs=-
    rpr-nmt-score 'ensemble=[seed1/last.pt,seed2/last.pt]' by_length=true   # an ensemble's

Prints `perplexity = X` (per reference token, EOS included); writes score_<name>.txt (one line
per sentence: its total log-probability ||| each token's, EOS last) and score_<name>.json (the
corpus figures, the weights used, "ema" or "raw", and with by_length=true the perplexity by
source-length bucket and by target position, also printed as tables) into Hydra's run
directory. <name> is the split, or "pairs"
for source=/reference= and pairs=. Bad input (a missing file, files of different line counts, an
empty reference or source line, a pairs line without " ||| " or with more than one, a sentence
longer than a learned position table) prints one line on stderr, exit status 2.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import asdict

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rpr_nmt.buckets import bucket_labels
from rpr_nmt.cli.common import (
    UsageError,
    bracket_ensemble,
    checked_decode_config,
    exit_on_error,
    job_config,
    load_model,
)
from rpr_nmt.cli.config_store import CONFIG_DIR
from rpr_nmt.cli.evaluate import data_config
from rpr_nmt.cli.override_errors import refuse_bad_overrides
from rpr_nmt.cli.path_overrides import quote_path_overrides
from rpr_nmt.config import ScoreJobConfig, TrainJobConfig
from rpr_nmt.data import DataError

PROG = "rpr-nmt-score"
# The settings that take paths to read, and those that take a path to write (which need not
# exist yet), quoted for Hydra where it would misread them (path_overrides.py).
PATH_KEYS = ("checkpoint", "ensemble", "data_root", "source", "reference", "pairs")
OUTPUT_KEYS = ("hydra.run.dir",)
SEPARATOR = " ||| "


def read_pairs_file(path: str) -> tuple[list[str], list[str]]:
    """`source ||| reference` lines from a file, or stdin for "-" (DataError names a bad line)."""
    from rpr_nmt.data.textfile import read_lines

    if path == "-":
        try:
            lines = sys.stdin.buffer.read().decode("utf-8").split("\n")
        except UnicodeDecodeError as e:
            raise DataError(f"stdin is not UTF-8 text ({e.reason} at byte {e.start})") from e
        lines = [line.removesuffix("\r") for line in lines]
        lines = lines[:-1] if lines and lines[-1] == "" else lines
    else:
        lines = read_lines(path)
    where = "stdin" if path == "-" else path
    sources, refs = [], []
    for number, line in enumerate(lines, start=1):
        if SEPARATOR not in line:
            raise DataError(
                f"{where} line {number}: no ' ||| ' between source and reference in {line[:60]!r}; "
                "write each pair as `source ||| reference`"
            )
        if line.count(SEPARATOR) > 1:  # which ' ||| ' divides the pair cannot be known
            raise DataError(
                f"{where} line {number}: more than one ' ||| ' in {line[:60]!r}; write each pair "
                "as `source ||| reference`, one ' ||| ' a line (or use source= and reference=)"
            )
        source, ref = line.split(SEPARATOR, 1)
        sources.append(source.strip())
        refs.append(ref.strip())
    return sources, refs


def read_file_pair(source: str, reference: str) -> tuple[list[str], list[str]]:
    """The lines of source= and reference= (DataError if their line counts differ)."""
    from rpr_nmt.data.textfile import read_lines

    sources, refs = read_lines(source), read_lines(reference)
    if len(sources) != len(refs):
        raise DataError(
            f"source={source} has {len(sources)} lines but reference={reference} has {len(refs)}: "
            "line i of the reference must translate line i of the source"
        )
    return sources, refs


def read_input(
    job: ScoreJobConfig, trained: TrainJobConfig
) -> tuple[str, list[str], list[str], dict[str, str]]:
    """(name for the output files, sources, references, where each side was read: for a message
    naming a line) from pairs=, source=/reference= or a split of the data, whichever the command
    line gives (UsageError when they are mixed)."""
    from rpr_nmt.data import read_parallel_text

    files = job.source is not None or job.reference is not None
    if files and (job.source is None or job.reference is None):
        raise UsageError("source= and reference= go together: give both files, or neither")
    if sum([files, job.pairs is not None, job.split is not None]) > 1:
        raise UsageError("give one input: split=NAME, source=FILE reference=FILE, or pairs=FILE")
    if job.pairs is not None:
        sources, refs = read_pairs_file(job.pairs)
        where = "stdin" if job.pairs == "-" else job.pairs
        return "pairs", sources, refs, {"source": where, "reference": where}
    if files:
        sources, refs = read_file_pair(job.source, job.reference)
        return "pairs", sources, refs, {"source": job.source, "reference": job.reference}
    data_cfg = data_config(job, trained.data)
    split = job.split or data_cfg.test_split
    sources, refs = read_parallel_text(data_cfg, split)
    where = f"{data_cfg.name} split '{split}'"
    return split, sources, refs, {"source": where, "reference": where}


def where_read(job: ScoreJobConfig, name: str, side: str) -> str:
    """Where the `side` ("source" or "reference") of the pairs was read, to name in a message."""
    if job.pairs is not None:
        return "stdin" if job.pairs == "-" else f"pairs={job.pairs}"
    if job.source is not None:
        return f"source={job.source}" if side == "source" else f"reference={job.reference}"
    return f"split '{name}'"


def checked_bounds(bounds: Sequence[int]) -> list[int]:
    """bounds= when they rise strictly from at least 1 (UsageError otherwise)."""
    bounds = list(bounds)
    if not bounds or bounds[0] < 1 or any(b <= a for a, b in zip(bounds, bounds[1:])):
        raise UsageError(f"bounds={bounds}: give rising bucket starts from 1, e.g. [1,11,16,21]")
    return bounds


def run(job: ScoreJobConfig, out_dir: str) -> None:
    """Load, read the pairs, score, print and write the files."""
    from rpr_nmt.decode.constraints import PositionLimitError
    from rpr_nmt.decode.forced import EmptyLineError, score_references
    from rpr_nmt.evaluate import likelihood
    from rpr_nmt.model import resolve_device

    decode = checked_decode_config(job.decode)
    bounds = checked_bounds(job.bounds)
    device = resolve_device(decode.device)
    loaded = load_model(job, device)
    name, sources, refs, wheres = read_input(job, loaded.config)
    if not sources:  # a perplexity of nothing is NaN, not a measure
        raise DataError(f"{where_read(job, name, 'source')}: no pairs to score; give at least "
                        "one `source ||| reference` pair")  # fmt: skip
    print(f"{PROG}: {loaded.description}; {name}, {len(sources)} pairs; "
          f"{decode.precision} on {device}", flush=True)  # fmt: skip
    start = time.perf_counter()
    try:
        scores = score_references(loaded.model, loaded.tokenizer, sources, refs, decode)
    except EmptyLineError as e:  # blank or of no BPE token, before any pair is scored
        raise DataError(f"{wheres[e.side]}: {e}") from e
    except PositionLimitError as e:  # before any pair is scored; names the line and the file
        raise DataError(f"{where_read(job, name, e.side)} {e}") from e
    seconds = time.perf_counter() - start
    corpus = likelihood.corpus_perplexity(scores)
    record = {
        **asdict(corpus), "input": name, "checkpoint": loaded.checkpoint,
        "ensemble": loaded.ensemble, "weights": loaded.weights_record,
        "weights_asked": job.weights, "precision": decode.precision, "score_seconds": seconds,
        "sentences_per_sec": len(scores) / seconds if seconds > 0 else 0.0,
    }  # fmt: skip
    print(f"perplexity = {corpus.perplexity:.4f}  ({corpus.tokens} reference tokens, EOS "
          f"included; nll {corpus.nll_per_token:.4f} nats/token; {len(scores)} pairs in "
          f"{seconds:.1f} s)")  # fmt: skip
    if job.by_length:
        labels = bucket_labels(bounds)
        tables = {
            "source length": likelihood.by_source_length(scores, bounds),
            "target position": likelihood.by_target_position(scores, bounds),
        }
        record["buckets"] = {"bounds": bounds, "labels": labels}
        for title, figures in tables.items():
            record["by_" + title.replace(" ", "_")] = [asdict(f) for f in figures]
            print(f"\n{likelihood.bucket_table(title, labels, figures)}")
    text_path, json_path = likelihood.write_scores(out_dir, name, scores, record)
    print(f"written: {text_path}, {json_path}")


@hydra.main(config_path=CONFIG_DIR, config_name="score", version_base="1.3")
def score(cfg: DictConfig) -> None:
    """Score references with a checkpoint."""
    out_dir = HydraConfig.get().runtime.output_dir
    exit_on_error(PROG, lambda: run(job_config(cfg), out_dir))


def main() -> None:
    """rpr-nmt-score from the command line, its paths quoted for Hydra first."""
    sys.argv = quote_path_overrides(bracket_ensemble(sys.argv), PATH_KEYS, OUTPUT_KEYS)
    refuse_bad_overrides(PROG, ScoreJobConfig)
    score()


if __name__ == "__main__":
    main()
