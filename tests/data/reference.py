"""The whole-list data preparation as it was before streaming (commit 904a499): a test oracle.

Everything is read into Python lists, cleaned with a dict of (source, target) tuples, sampled for
BPE, encoded whole and filtered with one mask. The streaming pipeline in rpr_nmt.data must give the
same BPE model bytes, token ids, pair order, cleaning counts and batches. The package never imports
this; scripts/bench_prepare.py --reference times it against the streaming code.
"""

from __future__ import annotations

import gzip
import io
import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sentencepiece as spm

from rpr_nmt.config import DataConfig
from rpr_nmt.data.tokenizer import default_threads

BPE_SEED = 0


@dataclass
class ReferenceSplit:
    """One encoded split: flat int32 ids and int64 offsets of each side."""

    src: np.ndarray
    src_offsets: np.ndarray
    tgt: np.ndarray
    tgt_offsets: np.ndarray


def read_lines(path: Path) -> list[str]:
    """All lines of a UTF-8 file (.gz or plain), split on "\\n", one trailing "\\r" removed."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        lines = f.read().decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _local(root: str, split: str, lang: str) -> Path:
    plain = Path(root) / f"{split}.{lang}"
    return plain if plain.is_file() else plain.with_name(plain.name + ".gz")


def _hub(cfg: DataConfig, split: str, limit: int | None) -> tuple[list[str], list[str]]:
    import datasets

    ds = datasets.load_dataset(
        cfg.hub_dataset,
        cfg.hub_config or None,
        split=cfg.hub_splits[split],
        streaming=cfg.streaming,
    )
    rows = list(itertools.islice(iter(ds), limit))
    if rows and "translation" in rows[0]:
        return [r["translation"][cfg.src_lang] for r in rows], [
            r["translation"][cfg.tgt_lang] for r in rows
        ]
    return [r[cfg.src_lang] for r in rows], [r[cfg.tgt_lang] for r in rows]


def read_text(cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """The raw text of a split; "train" concatenates train_splits, capped at max_train_pairs."""
    limit = cfg.max_train_pairs if split == "train" else None
    src: list[str] = []
    tgt: list[str] = []
    for name in cfg.train_splits if split == "train" else [split]:
        if limit is not None and len(src) >= limit:
            break
        if cfg.source == "hub":
            s, t = _hub(cfg, name, None if limit is None else limit - len(src))
        else:
            s = read_lines(_local(cfg.root, name, cfg.src_lang))
            t = read_lines(_local(cfg.root, name, cfg.tgt_lang))
        src += s
        tgt += t
    if limit is not None:
        del src[limit:], tgt[limit:]
    return src, tgt


def train_bpe(cfg: DataConfig, src: list[str], tgt: list[str]) -> bytes:
    """The old sample (n // 2 pairs by default_rng(0).choice, sources then targets) and training."""
    n = cfg.bpe_sample_sentences
    if len(src) + len(tgt) <= n:
        sentences = [*src, *tgt]
    else:
        rng = np.random.default_rng(BPE_SEED)
        pairs = np.sort(rng.choice(len(src), size=max(1, n // 2), replace=False))
        sentences = [src[i] for i in pairs] + [tgt[i] for i in pairs]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences), model_writer=model, model_type="bpe",
        vocab_size=cfg.vocab_size, character_coverage=cfg.bpe_character_coverage,
        pad_id=0, unk_id=1, bos_id=2, eos_id=3, input_sentence_size=0,
        shuffle_input_sentence=False, num_threads=default_threads(), minloglevel=2,
    )  # fmt: skip
    return model.getvalue()


def _flat(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(offsets[-1]))
    return flat, offsets


def prepare_train(cfg: DataConfig) -> tuple[bytes, ReferenceSplit, dict[str, int]]:
    """(BPE model, encoded training split, cleaning counts) exactly as the old prepare_data."""
    src, tgt = read_text(cfg, "train")
    report = dict(read=len(src), empty=0, overlap=0, duplicates=0, too_long=0, source_too_long=0)
    kept = [(s, t) for s, t in zip(src, tgt) if s.strip() and t.strip()]
    report["empty"] = len(src) - len(kept)
    if cfg.deduplicate:
        unique = list(dict.fromkeys(kept))
        report["duplicates"] = len(kept) - len(unique)
        kept = unique
    src, tgt = [p[0] for p in kept], [p[1] for p in kept]
    proto = train_bpe(cfg, src, tgt)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    s_ids = sp.encode(src, out_type=int, num_threads=default_threads())
    t_ids = sp.encode(tgt, out_type=int, num_threads=default_threads())
    ls = np.array([len(r) for r in s_ids], dtype=np.int64)
    lt = np.array([len(r) for r in t_ids], dtype=np.int64)
    too_long = (ls > cfg.max_tokens_per_sentence) | (lt > cfg.max_tokens_per_sentence)
    longer, shorter = np.maximum(ls, lt), np.maximum(np.minimum(ls, lt), 1)
    bad_ratio = ~too_long & (longer > cfg.max_length_ratio * shorter)
    source_too_long = np.zeros_like(too_long)
    if cfg.max_train_source_tokens is not None:
        source_too_long = ~(too_long | bad_ratio) & (ls > cfg.max_train_source_tokens)
    keep = ~(too_long | bad_ratio | source_too_long)
    report.update(too_long=int(too_long.sum()), bad_ratio=int(bad_ratio.sum()))
    report.update(source_too_long=int(source_too_long.sum()), kept=int(keep.sum()))
    index = np.flatnonzero(keep)
    split = ReferenceSplit(*_flat([s_ids[i] for i in index]), *_flat([t_ids[i] for i in index]))
    return proto, split, report


def encode_split(cfg: DataConfig, split: str, proto: bytes) -> ReferenceSplit:
    """An uncleaned split encoded whole."""
    sp = spm.SentencePieceProcessor(model_proto=proto)
    src, tgt = read_text(cfg, split)
    return ReferenceSplit(
        *_flat(sp.encode(src, out_type=int)), *_flat(sp.encode(tgt, out_type=int))
    )


def make_batches(src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """The old batch cutting: lexsort by (max, source, target length), then greedy cuts."""
    key = np.maximum(src_len, tgt_len)
    order = np.lexsort((tgt_len, src_len, key))
    key = key[order]
    batches, start, n = [], 0, len(order)
    while start < n:
        cap = max(1, max_tokens // int(key[start]))
        window = key[start : start + cap]
        size = max(1, int(np.count_nonzero(np.arange(1, len(window) + 1) * window <= max_tokens)))
        batches.append(order[start : start + size])
        start += size
    return batches
