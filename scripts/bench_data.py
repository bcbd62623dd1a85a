"""Benchmark the data pipeline: prepare Multi30k En-De cold and cached, encoding and batching speed.

    .venv/bin/python scripts/bench_data.py [--data-root ../shared/data] [--lines N] [--batches N]
                                           [--max-tokens N]

Prints one Markdown table (the figures in docs/performance.md, "## Data").
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from rpr_nmt.config import DataConfig
from rpr_nmt.data import BatchIterator, EncodedCorpus, prepare_data
from rpr_nmt.data.batching import make_batches
from rpr_nmt.data.sources import read_lines

REPO = Path(__file__).resolve().parent.parent


def multi30k_cfg(data_root: Path, cache_dir: str) -> DataConfig:
    """configs/data/multi30k_en_de.yaml as the DataConfig that data code receives."""
    return DataConfig(
        name="multi30k_en_de",
        source="local",
        root=str(data_root / "multi30k"),
        src_lang="en",
        tgt_lang="de",
        train_splits=["train"],
        valid_split="val",
        test_split="test_2016_flickr",
        hub_dataset="bentrevett/multi30k",
        hub_config="",
        hub_splits={"train": "train", "val": "validation", "test_2016_flickr": "test"},
        streaming=False,
        max_train_pairs=None,
        vocab_size=8000,
        bpe_sample_sentences=2_000_000,
        bpe_character_coverage=1.0,
        max_tokens_per_sentence=128,
        max_length_ratio=3.0,
        deduplicate=False,
        cache_dir=cache_dir,
    )


def news_lines(data_root: Path, n: int) -> list[str]:
    """n lines of real news text (WMT En-De test sets, both languages), repeated as needed."""
    files = sorted((data_root / "wmt_news_ende").glob("newstest20*.gz"))
    lines = [line for f in files for line in read_lines(f)]
    return list(itertools.islice(itertools.cycle(lines), n))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.environ.get("RPR_NMT_DATA", str(REPO.parent / "shared" / "data"))
    parser.add_argument("--data-root", type=Path, default=Path(default_root))
    parser.add_argument(
        "--lines", type=int, default=100_000, help="lines for the encoding benchmark"
    )
    parser.add_argument(
        "--batches", type=int, default=2000, help="batches for the iterator benchmark"
    )
    parser.add_argument("--max-tokens", type=int, default=4096, help="train.max_tokens")
    args = parser.parse_args()
    for name in ("lines", "batches", "max_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)}: at least 1")
    rows: list[tuple[str, str]] = []
    quiet = lambda _: None  # noqa: E731

    with tempfile.TemporaryDirectory() as cache:
        cfg = multi30k_cfg(args.data_root, cache)
        splits = ["train", "val", "test_2016_flickr"]
        t = time.perf_counter()
        data = prepare_data(cfg, splits=splits, log=quiet)
        cold = time.perf_counter() - t
        assert not any(data.reused.values())
        t = time.perf_counter()
        warm_data = prepare_data(cfg, splits=splits, log=quiet)
        warm = time.perf_counter() - t
        assert all(warm_data.reused.values())
    train = data.splits["train"]
    rows.append(
        ("Multi30k En-De prepare, cold (BPE 8000 + encode train/val/test)", f"{cold:.2f} s")
    )
    rows.append(("Multi30k En-De prepare, cached", f"{warm:.3f} s"))

    text = news_lines(args.data_root, args.lines)
    tok = data.tokenizer
    t = time.perf_counter()
    corpus = EncodedCorpus.encode(tok, text, text)  # both sides: 2 x lines sentences
    enc = time.perf_counter() - t
    n_tok = int(corpus.src_lengths.sum())
    rows.append(
        (
            f"encode {args.lines // 1000}k news lines (Multi30k BPE, into flat arrays)",
            f"{2 * args.lines / enc:,.0f} sentences/s ({2 * n_tok / enc:,.0f} tokens/s)",
        )
    )

    t = time.perf_counter()
    it = BatchIterator(
        train, max_tokens=args.max_tokens, pad_id=0, bos_id=2, eos_id=3, shuffle=True, seed=1
    )
    build = time.perf_counter() - t
    rows.append(
        (f"BatchIterator build (Multi30k train, max_tokens {args.max_tokens})", f"{build:.3f} s")
    )
    t = time.perf_counter()
    tokens = 0
    for batch in itertools.islice(iter(it), args.batches):
        tokens += batch.n_src_tokens + batch.n_tgt_tokens
    dt = time.perf_counter() - t
    rows.append(
        (
            f"BatchIterator, {args.batches} batches ({len(it)} per epoch)",
            f"{args.batches / dt:,.0f} batches/s ({tokens / dt:,.0f} src+tgt tokens/s)",
        )
    )

    # Bucketing at WMT14 En-De scale: lengths only, drawn from Multi30k's, 155x as many pairs.
    n = 4_500_000
    gen = torch.Generator().manual_seed(0)
    pick = torch.randint(len(train), (n,), generator=gen).numpy()
    t = time.perf_counter()
    big = make_batches(train.src_lengths[pick] + 1, train.tgt_lengths[pick] + 1, args.max_tokens)
    rows.append(
        (f"make_batches, 4.5M pairs ({len(big):,} batches)", f"{time.perf_counter() - t:.2f} s")
    )

    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {cpu}, {os.cpu_count()} CPUs")
    print("| measurement | result |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
