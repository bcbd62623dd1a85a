"""prepare_data: raw text -> cleaned training pairs -> joint BPE -> encoded, cached splits.

Cache layout under data_cfg.cache_dir (each name carries 16 hex digits of its key):
    bpe/{name}-v{key}.model              key: training text fingerprint + BPE settings
    encoded/{name}-{split}-v{key}.npz    key: split fingerprint + filters (train) + BPE sha256
    encoded/{name}-train-v{key}.json     the training set's cleaning report
A second run with the same inputs reads these files and touches no raw text (local files are only
hashed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rpr_nmt.config import DataConfig
from rpr_nmt.data.bpe import bpe_settings, load_or_train_bpe
from rpr_nmt.data.cache import atomic_write, hash_key, remove_stale_temporaries
from rpr_nmt.data.cleaning import CleaningReport, drop_empty_and_duplicates, length_mask
from rpr_nmt.data.corpus import EncodedCorpus
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.sources import TRAIN, read_parallel_text, source_fingerprint
from rpr_nmt.data.tokenizer import Tokenizer

Log = Callable[[str], Any]


@dataclass
class PreparedData:
    """What training needs from the data: the tokenizer and the encoded splits.

    Attributes:
        tokenizer: the joint BPE tokenizer.
        splits: split name -> encoded pairs ("train" is the cleaned concatenation of train_splits).
        reused: "bpe" and each split name -> True when it was read from the cache.
        cleaning: counts of the training-set filters (None when "train" was not asked for).
    """

    tokenizer: Tokenizer
    splits: dict[str, EncodedCorpus]
    reused: dict[str, bool] = field(default_factory=dict)
    cleaning: CleaningReport | None = None


def _describe(cfg: DataConfig) -> str:
    names = ", ".join(cfg.train_splits)
    if cfg.source == "hub":
        return f"hub dataset {cfg.hub_dataset} splits {names}"
    return f"{cfg.root}/{{{names}}}.{{{cfg.src_lang},{cfg.tgt_lang}}}"


class _TrainText:
    """The cleaned training text, read and cleaned at most once, and only when a cache misses."""

    def __init__(self, cfg: DataConfig, log: Log) -> None:
        self.cfg, self.log = cfg, log
        self._value: tuple[list[str], list[str], CleaningReport] | None = None

    def __call__(self) -> tuple[list[str], list[str], CleaningReport]:
        if self._value is None:
            cfg, report = self.cfg, CleaningReport()
            src, tgt = read_parallel_text(cfg, TRAIN)
            src, tgt = drop_empty_and_duplicates(
                src, tgt, deduplicate=cfg.deduplicate, report=report
            )
            report.kept = len(src)
            report.check_nonempty(_describe(cfg), cfg.max_tokens_per_sentence, cfg.max_length_ratio)
            self._value = (src, tgt, report)
        return self._value


def _encode_train(
    cfg: DataConfig, tok: Tokenizer, text: _TrainText
) -> tuple[EncodedCorpus, CleaningReport]:
    src, tgt, report = text()
    corpus = EncodedCorpus.encode(tok, src, tgt)
    max_tokens, max_ratio = cfg.max_tokens_per_sentence, cfg.max_length_ratio
    keep = length_mask(
        corpus.src_lengths,
        corpus.tgt_lengths,
        max_tokens=max_tokens,
        max_ratio=max_ratio,
        report=report,
        max_source_tokens=cfg.max_train_source_tokens,
    )
    report.check_nonempty(_describe(cfg), max_tokens, max_ratio)
    return corpus.select(keep), report


def prepare_data(data_cfg: DataConfig, *, splits: Sequence[str], log: Log = print) -> PreparedData:
    """Load, clean, BPE-encode and cache the requested splits, reusing every cached step.

    Args:
        data_cfg: the data config (resolved: no interpolations left).
        splits: split names to encode; "train" means the cleaned concatenation of
            data_cfg.train_splits,
            other names (valid_split, test_split, ...) are encoded as they are, uncleaned.
        log: receives progress lines and the cleaning counts.

    Returns:
        The tokenizer (trained on the training split, or reused) and the encoded splits.

    Raises:
        DataError: missing, unreadable or misaligned input, or an empty training set after
            filtering.
    """
    cfg = data_cfg
    cache = Path(cfg.cache_dir)
    if "${" in str(cache):
        raise DataError(
            f"data.cache_dir is unresolved ({cache}); resolve the config before prepare_data"
        )
    for folder in (cache / "bpe", cache / "encoded"):  # left by killed writers; live ones stay
        for path in remove_stale_temporaries(folder):
            log(f"[data] removed {path}, left by an interrupted writer")

    start = time.perf_counter()
    text = _TrainText(cfg, log)
    train_fp = source_fingerprint(cfg, TRAIN)
    bpe_key = hash_key("bpe", train_fp, sorted(bpe_settings(cfg).items()))
    tok, bpe_reused = load_or_train_bpe(cfg, bpe_key, lambda: text()[:2], log)
    out = PreparedData(tokenizer=tok, splits={}, reused={"bpe": bpe_reused})

    for split in splits:
        is_train = split == TRAIN
        fp = train_fp if is_train else source_fingerprint(cfg, split)
        filters = (cfg.deduplicate, cfg.max_tokens_per_sentence, cfg.max_length_ratio)
        if cfg.max_train_source_tokens is not None:  # keeps earlier cache keys valid
            filters += (cfg.max_train_source_tokens,)
        key = hash_key("encoded", fp, filters if is_train else (), tok.sha256)
        path = cache / "encoded" / f"{cfg.name}-{split}-v{key[:16]}.npz"
        report_path = path.with_suffix(".json")
        reused = path.is_file() and (not is_train or report_path.is_file())
        if reused:
            corpus = EncodedCorpus.load(path)
            if is_train:
                out.cleaning = CleaningReport(**json.loads(report_path.read_text()))
        elif is_train:
            corpus, out.cleaning = _encode_train(cfg, tok, text)
            corpus.save(path)
            atomic_write(report_path, json.dumps(out.cleaning.to_dict()).encode())
        else:
            corpus = EncodedCorpus.encode(tok, *read_parallel_text(cfg, split))
            corpus.save(path)
        if is_train and out.cleaning is not None:
            max_tokens, ratio = cfg.max_tokens_per_sentence, cfg.max_length_ratio
            log(f"[data] train cleaning: {out.cleaning.summary(max_tokens, ratio)}")
        how = "cached" if reused else "encoded"
        log(
            f"[data] {split}: {len(corpus)} pairs, {int(corpus.src_lengths.sum())} + "
            f"{int(corpus.tgt_lengths.sum())} BPE tokens ({how}: {path})"
        )
        out.splits[split] = corpus
        out.reused[split] = reused
    log(f"[data] prepared {list(splits)} in {time.perf_counter() - start:.1f} s")
    return out
