"""Fixtures for the data tests: a config builder and tiny synthetic parallel corpora in tmp_path."""

from __future__ import annotations

import gzip
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rpr_nmt.config import DataConfig

WORDS = (
    "the a man woman child dog cat ball street park water red blue green small big old young "
    "runs walks plays sits looks holds throws jumps eats reads wearing standing sitting under near "
    "with in on at over behind two three people group bicycle shirt hat building tree grass snow"
).split()


def synthetic_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """n aligned pairs: English-like sentences and a reversed, upper-cased 'translation'."""
    rng = random.Random(seed)
    src, tgt = [], []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        src.append(" ".join(words).capitalize() + ".")
        tgt.append(" ".join(w.upper() for w in reversed(words)) + " .")
    return src, tgt


def write_lines(path: Path, lines: Sequence[str]) -> Path:
    """Write lines as UTF-8 text, gzip-compressed when path ends in .gz."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def make_cfg(tmp_path: Path) -> Callable[..., DataConfig]:
    """Builds a DataConfig with a tmp cache and small BPE; keyword overrides replace fields."""

    def make(**overrides: Any) -> DataConfig:
        # DataConfig's own defaults, so a new field needs no edit here; tiny-corpus values on top.
        cfg = DataConfig(
            name="tiny",
            root=str(tmp_path / "corpus"),
            train_splits=["train"],
            valid_split="valid",
            test_split="test",
            vocab_size=120,
            max_tokens_per_sentence=256,
            cache_dir=str(tmp_path / "cache"),
        )
        return replace(cfg, **overrides)  # a TypeError names a field DataConfig lacks

    return make


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    """tmp_path/corpus with train (400 pairs, .gz), valid and test (30 pairs, plain), en/de."""
    root = tmp_path / "corpus"
    for split, n, suffix, seed in (
        ("train", 400, ".gz", 0),
        ("valid", 30, "", 1),
        ("test", 30, "", 2),
    ):
        src, tgt = synthetic_pairs(n, seed)
        write_lines(root / f"{split}.en{suffix}", src)
        write_lines(root / f"{split}.de{suffix}", tgt)
    return root
