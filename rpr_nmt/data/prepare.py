"""prepare_data: raw text -> cleaned training pairs -> joint BPE -> encoded, cached splits.

Cache layout under data_cfg.cache_dir (each name carries 16 hex digits of its key):
    bpe/{name}-v{key}.model                  key: training text fingerprint + BPE settings
    encoded/{name}-{split}-v{key}/           key: split fingerprint + filters (train) + BPE sha256
        src.npy src_offsets.npy tgt.npy tgt_offsets.npy   the ids, memory-mapped when loaded
        cleaning.json                        train only: the cleaning report
A second run with the same inputs reads these files and touches no raw text (local files are only
hashed). Encoded folders of the .npz era (`encoded/*.npz`, format 1) have other keys: they are
neither read nor removed, and the splits are encoded again.

Everything streams in chunks of chunk_pairs pairs: reading, cleaning (deduplication by 8-byte
hashes), encoding and the length filters; the arrays are appended to files as they grow. Memory
stays bounded by the chunk, the BPE sample (data.bpe_sample_sentences) and 9 bytes per raw training
pair (a kept flag and a hash).
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
from rpr_nmt.data.cache import hash_key, remove_stale_temporaries
from rpr_nmt.data.cleaning import CleaningReport
from rpr_nmt.data.corpus import CorpusWriter, EncodedCorpus
from rpr_nmt.data.encode import LengthFilter, encode_corpus, encode_threads
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.file_pairs import check_files
from rpr_nmt.data.held_out import check_mode, training_fingerprint
from rpr_nmt.data.sources import CHUNK_PAIRS, TRAIN, iter_parallel_text, source_fingerprint
from rpr_nmt.data.tokenizer import Tokenizer
from rpr_nmt.data.train_text import TrainText, describe_train

Log = Callable[[str], Any]
CORPUS_FORMAT = 2  # 1: one .npz per split; 2: a folder of .npy files (part of the encoded key)
REPORT_FILE = "cleaning.json"


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


def _encode_train(
    cfg: DataConfig, tok: Tokenizer, text: TrainText, folder: Path, threads: int
) -> None:
    """Encode the cleaned training text into `folder`, length-filtered chunk by chunk, with the
    cleaning report beside the arrays."""
    lengths = LengthFilter(cfg)
    out = CleaningReport()

    def finish(writer: CorpusWriter) -> None:
        out.add(text.report)  # read, empty, overlap and duplicates (kept is replaced below)
        for name in ("too_long", "source_too_long", "bad_ratio", "kept"):
            setattr(out, name, getattr(lengths.report, name))
        out.check_nonempty(describe_train(cfg), cfg.max_tokens_per_sentence, cfg.max_length_ratio)
        writer.extra_file(REPORT_FILE).write_text(json.dumps(out.to_dict()))

    encode_corpus(tok, text.chunks(), folder, threads=threads, keep=lengths, finish=finish)


def _tidy(cache: Path, log: Log) -> None:
    """Remove what killed writers left in the cache (live writers' files stay); point at old
    .npz caches, which this version no longer reads."""
    for folder in (cache / "bpe", cache / "encoded"):
        for path in remove_stale_temporaries(folder):
            why = (
                "left by an interrupted writer"
                if path.name.endswith(".tmp")
                else "an installed entry that lost a file: it is built again"
            )
            log(f"[data] removed {path}, {why}")
    old = sorted((cache / "encoded").glob("*.npz"))
    if old:
        size = sum(p.stat().st_size for p in old) / 2**30
        log(f"[data] {len(old)} encoded caches of the old .npz format in {cache / 'encoded'} are "
            f"no longer read; delete them to free {size:.1f} GiB")  # fmt: skip


def _encoded_folder(cfg: DataConfig, split: str, fp: str, tok: Tokenizer) -> Path:
    """The cache folder of an encoded split."""
    filters: tuple[Any, ...] = ()
    if split == TRAIN:
        filters = (cfg.deduplicate, cfg.max_tokens_per_sentence, cfg.max_length_ratio)
        if cfg.max_train_source_tokens is not None:
            filters += (cfg.max_train_source_tokens,)
    key = hash_key("encoded", fp, filters, tok.sha256, CORPUS_FORMAT)
    return Path(cfg.cache_dir) / "encoded" / f"{cfg.name}-{split}-v{key[:16]}"


def _tokens(corpus: EncodedCorpus) -> str:
    return f"{int(corpus.src.offsets[-1])} + {int(corpus.tgt.offsets[-1])} BPE tokens"


def prepare_data(
    data_cfg: DataConfig,
    *,
    splits: Sequence[str],
    log: Log = print,
    chunk_pairs: int = CHUNK_PAIRS,
) -> PreparedData:
    """Load, clean, BPE-encode and cache the requested splits, reusing every cached step.

    Args:
        data_cfg: the data config (resolved: no interpolations left).
        splits: split names to encode; "train" means the cleaned concatenation of
            data_cfg.train_splits, other names (valid_split, test_split, ...) are encoded as they
            are, uncleaned.
        log: receives progress lines and the cleaning counts.
        chunk_pairs: pairs read, cleaned and encoded at a time (results do not depend on it).

    Returns:
        The tokenizer (trained on the training split, or reused) and the encoded splits,
        memory-mapped from the cache.

    Raises:
        DataError: missing, unreadable or misaligned input (a training file pair of
            source=files that differs in line count is left out instead), a training pair that
            shares a sentence with a held-out split (held_out_overlap=refuse), or an empty training
            set after filtering.
    """
    cfg = data_cfg
    cache = Path(cfg.cache_dir)
    if "${" in str(cache):
        raise DataError(
            f"data.cache_dir is unresolved ({cache}); resolve the config before prepare_data"
        )
    check_mode(cfg)
    if cfg.source == "files":  # a missing file refused before anything is read or written
        for left_out in check_files(cfg):
            log(f"[data] {left_out}")
    _tidy(cache, log)
    start, threads = time.perf_counter(), encode_threads(cfg)
    train_fp = training_fingerprint(cfg)  # source_fingerprint(cfg, TRAIN) unless held_out_overlap
    bpe_key = hash_key("bpe", train_fp, sorted(bpe_settings(cfg).items()))
    with TrainText(cfg, cache / "encoded", chunk_pairs) as text:
        sample = lambda: text.bpe_sentences(cfg.bpe_sample_sentences)  # noqa: E731
        tok, bpe_reused = load_or_train_bpe(cfg, bpe_key, sample, log)
        out = PreparedData(tokenizer=tok, splits={}, reused={"bpe": bpe_reused})
        for split in splits:
            is_train, began = split == TRAIN, time.perf_counter()
            fp = train_fp if is_train else source_fingerprint(cfg, split)
            folder = _encoded_folder(cfg, split, fp, tok)
            reused = folder.is_dir()
            if not reused and is_train:
                _encode_train(cfg, tok, text, folder, threads)
            elif not reused:
                chunks = iter_parallel_text(cfg, split, chunk_pairs)
                encode_corpus(tok, chunks, folder, threads=threads)
            corpus = EncodedCorpus.load(folder)
            if is_train:
                report = json.loads((folder / REPORT_FILE).read_text())
                out.cleaning = CleaningReport(**report)
                max_tokens, ratio = cfg.max_tokens_per_sentence, cfg.max_length_ratio
                held_out = cfg.held_out_overlap != "keep"
                summary = out.cleaning.summary(max_tokens, ratio, held_out=held_out)
                log(f"[data] train cleaning: {summary}")
            how = "cached" if reused else f"encoded in {time.perf_counter() - began:.1f} s"
            log(f"[data] {split}: {len(corpus)} pairs, {_tokens(corpus)} ({how}: {folder})")
            out.splits[split] = corpus
            out.reused[split] = reused
    log(f"[data] prepared {list(splits)} in {time.perf_counter() - start:.1f} s")
    return out
