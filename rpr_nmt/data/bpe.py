"""Training the joint BPE model, cached under cache_dir by a hash of its inputs and settings."""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sentencepiece as spm

from rpr_nmt.config import DataConfig
from rpr_nmt.data.cache import atomic_write
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer, default_threads

BPE_SEED = 0  # seeds the sentence sample, so the same inputs give the same model


def bpe_settings(data_cfg: DataConfig) -> dict[str, Any]:
    """The config values that shape the BPE model (part of its cache key)."""
    keys = ("vocab_size", "bpe_sample_sentences", "bpe_character_coverage", "deduplicate")
    return {k: getattr(data_cfg, k) for k in keys}


def bpe_cache_path(cache_dir: str | Path, name: str, key: str) -> Path:
    """Where the model of a given cache key lives."""
    return Path(cache_dir) / "bpe" / f"{name}-v{key[:16]}.model"


def sample_pairs(n_pairs: int, n: int) -> np.ndarray | None:
    """Which pairs train the BPE model: None = all of them, else n // 2 sorted pair indices.

    The indices are drawn with a fixed seed (default_rng(BPE_SEED).choice without replacement), so
    the sample depends only on the number of cleaned pairs; the sentences are both sides of these
    pairs, all sources first (sample_sentences).

    Args:
        n_pairs: cleaned training pairs.
        n: data.bpe_sample_sentences.
    """
    if 2 * n_pairs <= n:
        return None
    rng = np.random.default_rng(BPE_SEED)
    return np.sort(rng.choice(n_pairs, size=max(1, n // 2), replace=False))


def sample_sentences(src: Sequence[str], tgt: Sequence[str], n: int) -> list[str]:
    """Sentences for BPE training: all of them, or both sides of n // 2 random pairs.

    The sample is drawn with a fixed seed, so it depends only on the text.
    """
    pairs = sample_pairs(len(src), n)
    if pairs is None:
        return [*src, *tgt]
    return [src[i] for i in pairs] + [tgt[i] for i in pairs]


def _drain(sentences: list[str]) -> Iterator[str]:
    """The sentences in order, each dropped from the list once sentencepiece has copied it."""
    sentences.reverse()
    while sentences:
        yield sentences.pop()


def train_bpe(sentences: Sequence[str], *, vocab_size: int, character_coverage: float) -> bytes:
    """Train a sentencepiece BPE model with the fixed special ids.

    Args:
        sentences: training text, one sentence per item (source and target together for a joint
            model). A list is emptied while sentencepiece reads it.
        vocab_size: pieces in the model, specials included.
        character_coverage: sentencepiece character_coverage (1.0 for Latin scripts).

    Returns:
        The serialized model.

    Raises:
        DataError: sentencepiece rejects the input, e.g. vocab_size too large for a tiny corpus.
    """
    model, count = io.BytesIO(), len(sentences)
    try:
        spm.SentencePieceTrainer.train(
            # A list is handed over item by item and emptied, so the text is held once, by
            # sentencepiece, not twice.
            sentence_iterator=_drain(sentences) if isinstance(sentences, list) else iter(sentences),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            input_sentence_size=0,  # we sample ourselves, reproducibly
            shuffle_input_sentence=False,
            num_threads=default_threads(),
            minloglevel=2,
        )
    except RuntimeError as e:
        raise DataError(
            f"sentencepiece BPE training failed on {count} sentences with "
            f"vocab_size={vocab_size}: "
            f"{e}. For a small corpus lower data.vocab_size."
        ) from e
    return model.getvalue()


def load_or_train_bpe(
    data_cfg: DataConfig,
    key: str,
    sample: Callable[[], list[str]],
    log: Callable[[str], Any] = print,
) -> tuple[Tokenizer, bool]:
    """The cached BPE model for `key`, trained on `sample()` when missing.

    Args:
        data_cfg: the data config (name, cache_dir and the bpe_settings keys).
        key: hash of the training text's fingerprint and bpe_settings.
        sample: called only on a cache miss; returns the training sentences (sample_pairs' pairs of
            the cleaned training text, sources first).
        log: receives one progress line.

    Returns:
        (tokenizer, reused): reused is True when the model came from the cache.
    """
    path = bpe_cache_path(data_cfg.cache_dir, data_cfg.name, key)
    if path.is_file():
        tok = Tokenizer.from_file(path)
        log(f"[data] BPE: reusing {path} (vocab {tok.vocab_size}, sha256 {tok.sha256[:12]})")
        return tok, True
    start = time.perf_counter()
    sentences = sample()
    count = len(sentences)
    proto = train_bpe(
        sentences,
        vocab_size=data_cfg.vocab_size,
        character_coverage=data_cfg.bpe_character_coverage,
    )
    atomic_write(path, proto)
    tok = Tokenizer(proto)
    log(
        f"[data] BPE: trained on {count} sentences in {time.perf_counter() - start:.1f} s -> "
        f"{path} (vocab {tok.vocab_size}, sha256 {tok.sha256[:12]})"
    )
    return tok, False
