"""rpr-nmt-evaluate: decode a split with a checkpoint (several are averaged) and score it.

    rpr-nmt-evaluate checkpoint=runs/train/default/checkpoints/last.pt   # the data's test split
    rpr-nmt-evaluate 'checkpoint=[a.pt,b.pt]' data=multi30k_en_de decode.beam_size=4
    rpr-nmt-evaluate checkpoint=runs/train/default     # the run's kept step checkpoints, averaged
    rpr-nmt-evaluate 'ensemble=[seed1/last.pt,seed2/last.pt,runs/seed3]'   # decoded together
    rpr-nmt-evaluate checkpoint=gpu/last.pt data_root=../shared/data/multi30k   # the corpus moved
    rpr-nmt-evaluate checkpoint=last.pt split=val 'extra_references=[val2.de,val3.de]'  # 3 refs
    rpr-nmt-evaluate checkpoint=last.pt bleu_tokenize=intl   # as `sacrebleu -tok intl`

Prints sacreBLEU, chrF and TER, each with its signature (nrefs:3 with two extra reference files:
sacrebleu's multi-reference scores), and the paper-style tokenized BLEU; writes
hyp_<split>.txt and eval_<split>.json into Hydra's run directory (the JSON records the weights
used: "ema" or "raw", "raw" too where weights=ema meets a checkpoint without a weight average).
A missing or unreadable checkpoint, bad data, impossible decode settings or a source sentence
longer than a learned position table (named by its line) print one line on stderr and exit with
status 2.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rpr_nmt.cli.common import (
    UsageError,
    bracket_ensemble,
    checked_decode_config,
    exit_on_error,
    job_config,
    load_model,
)
from rpr_nmt.cli.config_store import CONFIG_DIR
from rpr_nmt.cli.override_errors import refuse_bad_overrides
from rpr_nmt.cli.path_overrides import quote_path_overrides
from rpr_nmt.config import DataConfig, EvaluateJobConfig, SplitChoiceConfig

PROG = "rpr-nmt-evaluate"
# The settings that take paths to read, and those that take a path to write (which need not
# exist yet), quoted for Hydra where it would misread them (path_overrides.py).
PATH_KEYS = ("checkpoint", "ensemble", "data_root", "extra_references")
OUTPUT_KEYS = ("hydra.run.dir",)


def run(job: EvaluateJobConfig, out_dir: str) -> None:
    """Load, decode, score, print and write the files."""
    from rpr_nmt.data import DataError, read_parallel_text
    from rpr_nmt.decode.constraints import PositionLimitError
    from rpr_nmt.evaluate import evaluate_split, sacrebleu_bleu
    from rpr_nmt.model import resolve_device

    decode = checked_decode_config(job.decode)
    if job.bleu_tokenize is not None:  # before the model is loaded and the split decoded
        try:
            sacrebleu_bleu("", job.bleu_tokenize)
        except ValueError as e:
            raise UsageError(str(e)) from e
    device = resolve_device(decode.device)
    loaded = load_model(job, device)
    data_cfg = data_config(job, loaded.config.data)
    split = job.split or data_cfg.test_split
    sources, refs = read_parallel_text(data_cfg, split)
    if not sources:  # sacrebleu fails on no sentences; a BLEU of nothing is not a measure
        raise DataError(f"{data_cfg.name} split '{split}' has no sentences: choose another split")
    extra_refs = [read_extra_references(path, len(refs)) for path in job.extra_references]
    setup = f"beam {decode.beam_size}, alpha {decode.length_penalty}, {decode.precision}"
    print(f"{PROG}: {loaded.description}; {data_cfg.name} {split}, "
          f"{len(sources)} sentences; {setup} on {device}", flush=True)  # fmt: skip
    try:
        scores = evaluate_split(
            loaded.model, loaded.tokenizer, sources, refs, decode, data_cfg.tgt_lang, out_dir,
            split, checkpoint=loaded.checkpoint, ensemble=loaded.ensemble, extra_refs=extra_refs,
            reference_files=job.extra_references, log=print,
            weights={"weights": loaded.weights_record, "weights_asked": job.weights},
            bleu_tokenize=job.bleu_tokenize,
        )  # fmt: skip
    except PositionLimitError as e:  # before any sentence is decoded; names the split's line
        raise DataError(f"{data_cfg.name} split '{split}' {e}") from e
    print(f"BLEU = {scores.bleu:.2f}  {scores.signature}")
    print(f"chrF = {scores.chrf:.2f}  {scores.chrf_signature}")
    print(f"TER = {scores.ter:.2f}  {scores.ter_signature}")
    print(f"tokenized BLEU = {scores.tokenized_bleu:.2f}  {scores.tokenized_signature}")
    print(f"written: {out_dir}/hyp_{split}.txt, {out_dir}/eval_{split}.json")


def read_extra_references(path: str, n_lines: int) -> list[str]:
    """The lines of an extra reference file, `n_lines` of them, none empty.

    Raises:
        DataError: the file is missing or unreadable, has another line count than the split, or
            an empty line (sacrebleu would silently score that sentence against fewer references).
    """
    from rpr_nmt.data import DataError
    from rpr_nmt.data.textfile import read_lines

    lines = read_lines(path)
    if len(lines) != n_lines:
        raise DataError(
            f"extra reference file {path} has {len(lines)} lines but the split has {n_lines}: "
            "line i of every reference file must translate source line i"
        )
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            raise DataError(
                f"extra reference file {path} line {number} is empty: give that sentence's "
                "reference"
            )
    return lines


def data_config(job: SplitChoiceConfig, trained_on: DataConfig) -> DataConfig:
    """The corpus to read: data=... when given, else the checkpoint's; at data_root when given.

    Raises:
        DataError: data=... is another language pair than the checkpoint's, or the checkpoint's
            local corpus folder is not on this machine and no data_root says where it is now.
    """
    from rpr_nmt.data import DataError

    data_cfg = job.data if job.data is not None else trained_on
    pair = f"{data_cfg.src_lang}-{data_cfg.tgt_lang}"
    trained_pair = f"{trained_on.src_lang}-{trained_on.tgt_lang}"
    if pair != trained_pair:  # a model scores near 0 on another pair: a mistake, not a measure
        raise DataError(
            f"data={data_cfg.name} is {pair}, but the checkpoint translates {trained_pair} "
            f"(trained on {trained_on.name}): evaluate on {trained_pair} data, e.g. "
            f"data={trained_on.name}"
        )
    if job.data_root is not None:
        return replace(data_cfg, root=job.data_root)
    if job.data is None and data_cfg.source == "local" and not Path(data_cfg.root).is_dir():
        raise DataError(
            f"the checkpoint was trained on {data_cfg.name} in {data_cfg.root}, not on this "
            f"machine: pass data_root=FOLDER, the folder of its "
            f"{data_cfg.test_split}.{data_cfg.src_lang} file here"
        )
    return data_cfg


@hydra.main(config_path=CONFIG_DIR, config_name="evaluate", version_base="1.3")
def evaluate(cfg: DictConfig) -> None:
    """Evaluate a checkpoint on one split of its (or the given) data."""
    out_dir = HydraConfig.get().runtime.output_dir
    exit_on_error(PROG, lambda: run(job_config(cfg), out_dir))


def main() -> None:
    """rpr-nmt-evaluate from the command line, its paths quoted for Hydra first."""
    sys.argv = quote_path_overrides(bracket_ensemble(sys.argv), PATH_KEYS, OUTPUT_KEYS)
    refuse_bad_overrides(PROG, EvaluateJobConfig)
    evaluate()


if __name__ == "__main__":
    main()
