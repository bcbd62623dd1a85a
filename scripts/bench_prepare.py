"""Benchmark prepare_data at WMT scale: time and peak memory of a cold preparation and of a load.

    .venv/bin/python scripts/bench_prepare.py --pairs 100000 300000 --threads 2 [--reference]

For each size N it builds (once, under data/bench/, git-ignored) a local corpus of N En-De pairs
made of real sentences: pairs of the WMT news test sets and Multi30k, sampled, one to three joined
into one (WMT14's length on average), with random word drops so that deduplication keeps most;
about 1% exact repeats, 0.1% empty sides, 0.2% over-long pairs and 0.2% bad length ratios give
every filter work. Each
measurement runs in a fresh subprocess: `prepare` (cold cache: BPE training and encoding, the WMT14
settings: 32768 pieces, 2M-sentence BPE sample, 256-token cap, ratio 3, deduplicate) and `load`
(the cached data, memory-mapped, plus the BatchIterator of train.max_tokens=4096). Peak memory is
the subprocess's VmHWM. --reference also runs the old whole-list code (tests/data/reference.py) on
the same corpus and checks that its BPE model, ids and counts equal the cached ones.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # for tests.data.reference

from rpr_nmt.config import DataConfig  # noqa: E402
from rpr_nmt.data.textfile import read_lines  # noqa: E402

CORPUS_VERSION = 2  # of the generated corpora: bump when synthetic_pair changes


def memory() -> dict[str, float]:
    """This process's peak and current resident memory in MiB (from /proc/self/status)."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def real_pairs(data_root: Path) -> list[tuple[str, str]]:
    """Aligned En-De pairs of the WMT news test sets (2008-2020) and Multi30k train."""
    news = data_root / "wmt_news_ende"
    pairs = []
    for en in sorted(news.glob("*.en.gz")):
        de = en.with_name(en.name.replace(".en.gz", ".de.gz"))
        if de.is_file() and not en.name.startswith("newstestB"):
            pairs += zip(read_lines(en), read_lines(de))
    multi = data_root / "multi30k"
    pairs += zip(read_lines(multi / "train.en.gz"), read_lines(multi / "train.de.gz"))
    return [(s, t) for s, t in pairs if s.strip() and t.strip()]


def _drop_word(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    if len(words) > 3:
        del words[rng.randrange(len(words))]
    return " ".join(words)


def synthetic_pair(pool: list[tuple[str, str]], rng: random.Random, recent: list) -> tuple:
    """One generated pair: one to three real pairs joined, with random word drops."""
    u = rng.random()
    if u < 0.01 and recent:
        return rng.choice(recent)  # an exact repeat
    s, t = rng.choice(pool)
    if u < 0.011:
        return (s, "") if u < 0.0105 else (" ", t)
    if u < 0.013:  # over 256 BPE tokens
        more = [rng.choice(pool) for _ in range(12)]
        return " ".join([s, *(p[0] for p in more)]), " ".join([t, *(p[1] for p in more)])
    if u < 0.015:  # the target more than 3 times the source
        return s, " ".join([t, *(rng.choice(pool)[1] for _ in range(4))])
    joined = rng.choices((1, 2, 3), weights=(3, 5, 2))[0]  # WMT14 En-De: about 80 tokens a pair
    for s2, t2 in (rng.choice(pool) for _ in range(joined - 1)):
        s, t = f"{s} {s2}", f"{t} {t2}"
    if rng.random() < 0.7:
        s = _drop_word(s, rng)
    if rng.random() < 0.7:
        t = _drop_word(t, rng)
    return s, t


def build_corpus(data_root: Path, folder: Path, n: int, seed: int = 0) -> None:
    """Write folder/train.{en,de}.gz with n generated pairs (skipped when they exist)."""
    if (folder / "train.de.gz").is_file():
        return
    pool, rng = real_pairs(data_root), random.Random(seed)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    recent: list[tuple[str, str]] = []
    with (
        gzip.open(tmp / "train.en.gz", "wt", encoding="utf-8", compresslevel=1) as en,
        gzip.open(tmp / "train.de.gz", "wt", encoding="utf-8", compresslevel=1) as de,
    ):
        for i in range(n):
            s, t = synthetic_pair(pool, rng, recent)
            en.write(s + "\n")
            de.write(t + "\n")
            if i % 97 == 0:
                recent = recent[-999:] + [(s, t)]
    tmp.rename(folder)


def bench_config(corpus: Path, cache: Path, threads: int) -> DataConfig:
    """configs/data/wmt14_en_de.yaml's settings on the local corpus, with deduplication."""
    cfg = DataConfig(
        name="bench", source="local", root=str(corpus), src_lang="en", tgt_lang="de",
        train_splits=["train"], vocab_size=32768, bpe_sample_sentences=2_000_000,
        max_tokens_per_sentence=256, max_length_ratio=3.0, deduplicate=True, cache_dir=str(cache),
    )  # fmt: skip
    cfg.encode_threads = threads  # type: ignore[attr-defined] - the proposed data.encode_threads
    return cfg


def child_prepare(cfg: DataConfig) -> dict:
    from rpr_nmt.data import prepare_data

    start = time.perf_counter()
    data = prepare_data(cfg, splits=["train"], log=lambda line: print(line, file=sys.stderr))
    seconds, train = time.perf_counter() - start, data.splits["train"]
    tokens = int(train.src.offsets[-1] + train.tgt.offsets[-1])
    return dict(seconds=seconds, read=data.cleaning.read, kept=data.cleaning.kept, tokens=tokens,
                **memory())  # fmt: skip


def child_load(cfg: DataConfig) -> dict:
    import itertools

    from rpr_nmt.data import BatchIterator, prepare_data

    start = time.perf_counter()
    data = prepare_data(cfg, splits=["train"], log=lambda _: None)
    loaded = time.perf_counter() - start
    assert data.reused["train"], "the load benchmark found no cache"
    tok = data.tokenizer
    it = BatchIterator(data.splits["train"], max_tokens=4096, pad_id=tok.pad_id,
                       bos_id=tok.bos_id, eos_id=tok.eos_id, shuffle=True, seed=1)  # fmt: skip
    built = time.perf_counter() - start - loaded
    for _ in itertools.islice(iter(it), 200):
        pass
    return dict(load_seconds=loaded, iterator_seconds=built, batches=len(it.batches),
                index_mb=it.batches.nbytes / 2**20, **memory())  # fmt: skip


def child_reference(cfg: DataConfig) -> dict:
    import numpy as np

    from rpr_nmt.data import prepare_data
    from tests.data import reference

    start = time.perf_counter()
    proto, split, report = reference.prepare_train(cfg)
    seconds = time.perf_counter() - start
    peak = memory()
    cached = prepare_data(cfg, splits=["train"], log=lambda _: None)
    train = cached.splits["train"]
    want = (split.src, split.src_offsets, split.tgt, split.tgt_offsets)
    arrays = zip(want, (train.src.flat, train.src.offsets, train.tgt.flat, train.tgt.offsets))
    same = (proto == cached.tokenizer.proto and report == cached.cleaning.to_dict()
            and all(np.array_equal(a, b) for a, b in arrays))  # fmt: skip
    return dict(seconds=seconds, identical=bool(same), **peak)


def run_child(kind: str, corpus: Path, cache: Path, threads: int) -> dict:
    """Run one measurement in a fresh interpreter and return its JSON result."""
    cmd = [sys.executable, __file__, "--child", kind, "--corpus", str(corpus),
           "--cache", str(cache), "--threads", str(threads)]  # fmt: skip
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(args: argparse.Namespace, n: int) -> list[str]:
    """Build the corpus of n pairs, run the measurements, return the table row's cells."""
    corpus, cache = args.out / f"corpus-v{CORPUS_VERSION}-{n}", args.out / f"cache-{n}"
    t = time.perf_counter()
    build_corpus(args.data_root, corpus, n)
    print(f"[bench] corpus of {n:,} pairs ready ({time.perf_counter() - t:.0f} s)", file=sys.stderr)
    shutil.rmtree(cache, ignore_errors=True)
    prep = run_child("prepare", corpus, cache, args.threads)
    load = run_child("load", corpus, cache, args.threads)
    cells = [
        f"{n:,}", f"{prep['kept']:,}", f"{prep['tokens'] / 1e6:.1f}M", f"{prep['seconds']:.1f} s",
        f"{n / prep['seconds']:,.0f}", f"{prep['VmHWM']:,.0f} MiB",
        f"{load['load_seconds']:.2f} + {load['iterator_seconds']:.2f} s",
        f"{load['VmHWM']:,.0f} MiB (anon {load['RssAnon']:,.0f}, file {load['RssFile']:,.0f})",
        f"{load['index_mb']:.1f} MB",
    ]  # fmt: skip
    if args.reference:
        ref = run_child("reference", corpus, cache, args.threads)
        cells += [f"{ref['seconds']:.1f} s, {ref['VmHWM']:,.0f} MiB, identical={ref['identical']}"]
    if not args.keep_cache:
        shutil.rmtree(cache, ignore_errors=True)
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.environ.get("RPR_NMT_DATA", str(REPO.parent / "shared" / "data"))
    parser.add_argument("--data-root", type=Path, default=Path(default_root))
    parser.add_argument("--pairs", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--threads", type=int, default=2, help="sentencepiece encoding threads")
    parser.add_argument("--out", type=Path, default=REPO / "data" / "bench", help="git-ignored")
    parser.add_argument("--reference", action="store_true", help="also time the old code")
    parser.add_argument("--keep-cache", action="store_true", help="keep the prepared caches")
    parser.add_argument("--child", choices=["prepare", "load", "reference"], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if too_few := [str(n) for n in args.pairs if n < 1]:
        parser.error(f"--pairs {' '.join(too_few)}: at least 1 pair each")
    if args.child:
        cfg = bench_config(args.corpus, args.cache, args.threads)
        child = {"prepare": child_prepare, "load": child_load, "reference": child_reference}
        print(json.dumps(child[args.child](cfg)))
        return
    header = ["pairs", "kept", "BPE tokens", "prepare (cold)", "pairs/s", "prepare peak RSS",
              "load + BatchIterator", "load peak RSS", "batch index"]  # fmt: skip
    if args.reference:
        header.append("old whole-list code: time, peak RSS")
    print(f"| {' | '.join(header)} |\n|{'---|' * len(header)}")
    for n in args.pairs:
        print(f"| {' | '.join(measure(args, n))} |", flush=True)
    print(f"threads {args.threads}, {os.cpu_count()} CPUs, corpora and caches under {args.out}")


if __name__ == "__main__":
    main()
