"""Training the joint BPE model, cached under cache_dir by a hash of its inputs and settings."""

from __future__ import annotations

import io
import re
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
SPECIAL_PIECES = len({PAD_ID, UNK_ID, BOS_ID, EOS_ID})  # the pieces before any of the text's


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


def train_bpe(
    sentences: Sequence[str],
    *,
    vocab_size: int,
    character_coverage: float,
    sample_sentences: int | None = None,
) -> bytes:
    """Train a sentencepiece BPE model with the fixed special ids.

    Args:
        sentences: training text, one sentence per item (source and target together for a joint
            model). A list is emptied while sentencepiece reads it.
        vocab_size: pieces in the model, specials included.
        character_coverage: sentencepiece character_coverage (1.0 for Latin scripts).
        sample_sentences: data.bpe_sample_sentences, named in the advice when given.

    Returns:
        The serialized model.

    Raises:
        DataError: a setting out of range, or sentencepiece rejects the input (e.g. vocab_size
            too large for a tiny corpus), with the setting to change.
    """
    check_bpe_values(vocab_size, character_coverage, sample_sentences)
    model, count = io.BytesIO(), len(sentences)
    try:
        spm.SentencePieceTrainer.train(
            # A list is handed over item by item and emptied, so the text is held once, by
            # sentencepiece, not twice.
            sentence_iterator=_drain(sentences) if isinstance(sentences, list) else iter(sentences),
            model_writer=model,
            model_type="bpe",
            # Below SPECIAL_PIECES sentencepiece fails placing a special piece, before it counts
            # the pieces the text needs; at SPECIAL_PIECES it names that minimum (_advice).
            vocab_size=max(vocab_size, SPECIAL_PIECES),
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
        reason = " ".join(str(e).split()).rstrip(". ")
        advice = _advice(reason, count, vocab_size, sample_sentences)
        raise DataError(
            f"sentencepiece BPE training failed on {count} sentences with "
            f"vocab_size={vocab_size}: {advice} (sentencepiece: {reason})"
        ) from e
    if vocab_size < SPECIAL_PIECES:  # a text of no character: the specials alone are the minimum
        raise DataError(
            f"data.vocab_size={vocab_size} is below the {SPECIAL_PIECES} special pieces (pad, unk, "
            f"bos, eos): raise it to at least {SPECIAL_PIECES} plus the text's characters"
        )
    return model.getvalue()


# sentencepiece's own limits (trainer_interface.cc): character_coverage in [0.98, 1]; sentences
# longer than max_sentence_length bytes are skipped.
MIN_CHARACTER_COVERAGE = 0.98
MAX_SENTENCE_BYTES = 4192


def check_bpe_values(
    vocab_size: int, character_coverage: float, sample_sentences: int | None = None
) -> None:
    """Refuse BPE settings that sentencepiece would reject (DataError naming the setting)."""
    if vocab_size <= 0:
        raise DataError(f"data.vocab_size={vocab_size} must be positive (8000 for Multi30k)")
    if not MIN_CHARACTER_COVERAGE <= character_coverage <= 1:
        raise DataError(
            f"data.bpe_character_coverage={character_coverage} must be in "
            f"[{MIN_CHARACTER_COVERAGE}, 1], the range sentencepiece accepts (1.0 for Latin "
            "scripts)"
        )
    if sample_sentences is not None and sample_sentences < 1:
        raise DataError(
            f"data.bpe_sample_sentences={sample_sentences} must be positive (2000000 for WMT)"
        )


def _advice(reason: str, count: int, vocab_size: int, sample_sentences: int | None) -> str:
    """What to change for sentencepiece's error `reason` (training on `count` sentences)."""
    # The sample has about bpe_sample_sentences sentences, or fewer when it is the whole text.
    sampled = sample_sentences is not None and count >= sample_sentences - 1
    more = f"raise data.bpe_sample_sentences (now {sample_sentences})" if sampled else ""
    required = re.search(r"smaller than required_chars\. \d+ vs (\d+)", reason)
    if required:
        return (
            f"the text's characters and the special pieces need {required[1]} pieces: raise "
            f"data.vocab_size to at least {required[1]}"
        )
    too_high = re.search(r"Vocabulary size too high.*<= (\d+)", reason)
    if too_high:
        lower = f"lower data.vocab_size to at most {too_high[1]}"
        if more:
            return f"too few sentences for this vocabulary: {more}, or {lower}"
        return f"for this small training text {lower}"
    if "sentences_.empty()" in reason:
        return (
            "the training text has too few lines: none is a usable sentence (sentencepiece skips "
            f"lines over {MAX_SENTENCE_BYTES} bytes); check the files' line endings (lines ended "
            "by CR alone make a file one line: convert them to LF)"
            + (f", or {more}" if more else "")
        )
    if "vocab_size()) > (0)" in reason:
        return f"data.vocab_size={vocab_size} must be positive"
    if "character_coverage()" in reason:
        return f"data.bpe_character_coverage is out of range [{MIN_CHARACTER_COVERAGE}, 1]"
    return "check data.vocab_size, data.bpe_character_coverage and the training text"


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
    check_bpe_values(
        data_cfg.vocab_size, data_cfg.bpe_character_coverage, data_cfg.bpe_sample_sentences
    )
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
        sample_sentences=data_cfg.bpe_sample_sentences,
    )
    atomic_write(path, proto)
    tok = Tokenizer(proto)
    log(
        f"[data] BPE: trained on {count} sentences in {time.perf_counter() - start:.1f} s -> "
        f"{path} (vocab {tok.vocab_size}, sha256 {tok.sha256[:12]})"
    )
    return tok, False
