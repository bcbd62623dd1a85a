"""rpr-nmt-evaluate: decode a split with a checkpoint (several are averaged) and score it.

    rpr-nmt-evaluate checkpoint=runs/train/default/checkpoints/last.pt   # the data's test split
    rpr-nmt-evaluate 'checkpoint=[a.pt,b.pt]' data=multi30k_en_de decode.beam_size=4

Prints sacreBLEU with its signature, chrF and the paper-style tokenized BLEU; writes
hyp_<split>.txt and eval_<split>.json into Hydra's run directory. A missing or unreadable
checkpoint, bad data or impossible decode settings print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import sys
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, ListConfig, MissingMandatoryValue

from rpr_nmt.checkpoint import CheckpointError
from rpr_nmt.config import CONFIG_DIR, to_dict

PROG = "rpr-nmt-evaluate"


class UsageError(Exception):
    """A setting on the command line that cannot work."""


def checkpoint_paths(cfg: DictConfig) -> list[str]:
    """cfg.checkpoint as a list of paths (one path, or a list to average)."""
    try:
        value = cfg.checkpoint
    except MissingMandatoryValue as e:
        raise UsageError(
            "no checkpoint given: add checkpoint=PATH (or 'checkpoint=[a.pt,b.pt]')"
        ) from e
    paths = list(value) if isinstance(value, (list, ListConfig)) else [value]
    if not paths:
        raise UsageError("checkpoint=[] is empty: give at least one checkpoint path")
    return [str(p) for p in paths]


def decode_settings(cfg: DictConfig) -> dict[str, Any]:
    """cfg.decode as a plain dict, validated (raises UsageError)."""
    from rpr_nmt.decode import DecodeSettings
    from rpr_nmt.decode.translate import resolve_device

    decode = to_dict(cfg.decode)
    try:
        DecodeSettings.from_config(decode)
        resolve_device(decode["device"])
    except ValueError as e:
        raise UsageError(str(e)) from e
    return decode


def run(cfg: DictConfig, out_dir: str) -> None:
    """Load, decode, score, print and write the files."""
    from rpr_nmt.checkpoint import load_for_inference
    from rpr_nmt.data import read_parallel_text
    from rpr_nmt.decode.translate import resolve_device
    from rpr_nmt.evaluate import evaluate_split

    paths, decode = checkpoint_paths(cfg), decode_settings(cfg)
    device = resolve_device(decode["device"])
    model, tokenizer, config = load_for_inference(paths, device)
    data_cfg = to_dict(cfg.data) if cfg.get("data") is not None else dict(config["data"])
    split = cfg.split or data_cfg["test_split"]
    sources, refs = read_parallel_text(data_cfg, split)
    setup = f"beam {decode['beam_size']}, alpha {decode['length_penalty']}, {decode['precision']}"
    print(f"{PROG}: {len(paths)} checkpoint(s); {data_cfg['name']} {split}, "
          f"{len(sources)} sentences; {setup} on {device}", flush=True)  # fmt: skip
    scores = evaluate_split(
        model, tokenizer, sources, refs, decode, data_cfg["tgt_lang"], out_dir, split,
        checkpoint=paths, log=print,
    )  # fmt: skip
    print(f"BLEU = {scores.bleu:.2f}  {scores.signature}")
    print(f"chrF = {scores.chrf:.2f}  {scores.chrf_signature}")
    print(f"tokenized BLEU = {scores.tokenized_bleu:.2f}  {scores.tokenized_signature}")
    print(f"written: {out_dir}/hyp_{split}.txt, {out_dir}/eval_{split}.json")


@hydra.main(config_path=CONFIG_DIR, config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    """Evaluate a checkpoint on one split of its (or the given) data."""
    from rpr_nmt.data import DataError

    try:
        run(cfg, HydraConfig.get().runtime.output_dir)
    except (CheckpointError, DataError, UsageError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
