"""Print the parameter counts of the model presets (configs/model/*.yaml).

transformer_base and transformer_big with the paper's 32,768-piece joint vocabulary,
transformer_small (and tiny) with Multi30k's 8,000. Tied parameters (shared embeddings, tables
shared across layers) count once.

Usage:
    python scripts/count_params.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rpr_nmt.config import ModelConfig  # noqa: E402
from rpr_nmt.model import build_model  # noqa: E402

PRESETS = {
    "transformer_base": 32768,
    "transformer_big": 32768,
    "transformer_small": 8000,
    "transformer_tiny": 8000,
}


def count(model: torch.nn.Module, name_filter: str = "") -> int:
    """Parameters whose name contains name_filter; named_parameters() lists a shared one once."""
    return sum(p.numel() for name, p in model.named_parameters() if name_filter in name)


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args(argv)
    print("| preset | vocab | parameters | of which embeddings | of which w^K / w^V tables |")
    print("|---|---|---|---|---|")
    for preset, vocab in PRESETS.items():
        config = yaml.safe_load((REPO / "configs" / "model" / f"{preset}.yaml").read_text())
        config.pop("defaults", None)
        with torch.device("meta"):  # shapes only: no memory, no initialisation time
            model = build_model(ModelConfig(**config), vocab_size=vocab, pad_id=0)
        total, emb = count(model), count(model, "embed.table")
        tables = count(model, "rel_keys") + count(model, "rel_values")
        print(f"| {preset} | {vocab} | {total:,} | {emb:,} | {tables:,} |")


if __name__ == "__main__":
    main()
