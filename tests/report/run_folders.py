"""A run folder as rpr-nmt-train leaves it and `rpr-nmt-report --collect` copies it, for the
report's tests.

    <sweep>/<overrides joined by commas>/
        .hydra/overrides.yaml, .hydra/config.yaml
        train_summary.json
        hyp_test.txt                      (when `hyps` is given)
        src_lengths_test.txt              (when `src_lengths` is given)
        checkpoints/last.pt               (when `bpe` is given: the BPE model and no weights)
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml


def write_run_folder(
    sweep: Path,
    overrides: list[str],
    config: dict,
    summary: dict,
    *,
    hyps: list[str] | None = None,
    src_lengths: list[int] | None = None,
    bpe: bytes | None = None,
) -> Path:
    """Write one run of `sweep` named by its `overrides`; returns its folder."""
    run = sweep / ",".join(overrides)
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    (run / "train_summary.json").write_text(json.dumps(summary))
    if hyps is not None:
        (run / "hyp_test.txt").write_text("\n".join(hyps) + "\n")
    if src_lengths is not None:
        (run / "src_lengths_test.txt").write_text("".join(f"{n}\n" for n in src_lengths))
    if bpe is not None:
        (run / "checkpoints").mkdir()
        torch.save({"model": {}, "bpe_model": bpe}, run / "checkpoints" / "last.pt")
    return run


def write_shaw_run(sweep: Path, k: int, seed: int, bleu: float) -> None:
    """A run of Shaw's model at clipping distance k (a^K and a^V) scoring `bleu` on test."""
    overrides = [f"model.max_relative_position={k}", f"train.seed={seed}"]
    model = {"max_relative_position": k, "relative_keys": True, "relative_values": True}
    summary = {"test_bleu": bleu, "valid_bleu": bleu + 1, "steps": 100, "train_tokens_per_sec": 5e3}
    write_run_folder(sweep, overrides, {"model": model}, summary)
