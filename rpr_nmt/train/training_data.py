"""The Trainer's data: the train and valid splits prepared (or read from the cache), checked, and
batched for this rank, with the text validation BLEU decodes.

The checks refuse, before training, prepared splits that cannot train or be evaluated: a valid
split without pairs, a missing or empty test split, a learned position table shorter than a
sentence of the data (what the checks of rpr_nmt.train.setup cannot know before the data exists).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rpr_nmt.config import DataConfig, ModelConfig, TrainJobConfig
from rpr_nmt.data import (
    BatchIterator,
    DataError,
    EncodedCorpus,
    PreparedData,
    Ragged,
    Tokenizer,
    prepare_data,
    read_parallel_text,
)
from rpr_nmt.data.sources import local_path
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.errors import SettingsError


def check_learned_table_fits(
    model: ModelConfig, data: DataConfig, splits: Mapping[str, EncodedCorpus]
) -> None:
    """Refuse a learned position table shorter than a sentence of the prepared splits (train and
    validation), as the model reads them: a source's ids + EOS, a target's BOS + ids. Found at the
    first update or the first validation instead, it crashed a run that could not be mended (a
    changed model.max_positions is another model)."""
    if model.absolute_positions != "learned":
        return
    stacks = {"source": model.positions_in != "decoder", "target": model.positions_in != "encoder"}
    rows, longest = model.max_positions, {}  # split -> (positions, side)
    for split, corpus in splits.items():
        for side, ragged in (("source", corpus.src), ("target", corpus.tgt)):
            if stacks[side]:
                longest[split] = max(longest.get(split, (0, "")), (_longest_row(ragged) + 1, side))
    if all(n <= rows for n, _ in longest.values()):
        return
    split, (n, side) = max(longest.items(), key=lambda item: item[1][0])
    need = f"raise model.max_positions to at least {n}"
    limit = data.max_tokens_per_sentence
    if all(n <= rows for s, (n, _) in longest.items() if s != "train"):  # the training pairs only
        fix = f"{need}, or lower data.max_tokens_per_sentence={limit} to {rows - 1}"
    else:  # the length filter keeps only training pairs: a longer validation sentence stays
        fix = f"{need} (data.max_tokens_per_sentence={limit} filters the training pairs only)"
    raise SettingsError(
        f"model.max_positions={rows} is shorter than the data: the longest {split} {side} takes "
        f"{n} positions ({n - 1} tokens + {'EOS' if side == 'source' else 'BOS'}); {fix}"
    )


def check_evaluated_splits(
    config: TrainJobConfig, splits: Mapping[str, EncodedCorpus], *, test: bool = True
) -> list[str] | None:
    """Refuse, before training, a valid split without pairs and (with train.evaluate_at_end and
    train.evaluate_test) a test split that is missing, unreadable or empty. Found later, an empty
    valid split gave a validation loss of 0.0 that fixed best.pt at once (or crashed validation
    BLEU), and a bad test split ended every run, and every rerun, without a summary.

    Returns:
        The test split's sources, or None with train.evaluate_at_end or train.evaluate_test off,
        or `test` false (a rank other than 0, which does not evaluate).

    Raises:
        DataError: the split refused and the way out, in one line.
    """
    data = config.data
    if len(splits[data.valid_split]) == 0:
        raise DataError(
            f"validation split '{data.valid_split}' ({_where(data, data.valid_split)}) has no "
            "pairs: set data.valid_split to a split with pairs"
        )
    if not (config.train.evaluate_at_end and config.train.evaluate_test and test):
        return None
    way_out = "set data.test_split to a readable split with pairs, or train.evaluate_at_end=false"
    try:
        sources, _ = read_parallel_text(data, data.test_split)
    except DataError as e:
        raise DataError(f"test split '{data.test_split}': {e}; {way_out}") from e
    if not sources:
        raise DataError(
            f"test split '{data.test_split}' ({_where(data, data.test_split)}) has no pairs "
            f"for the evaluation at the end of training: {way_out}"
        )
    return sources


def _where(data: DataConfig, split: str) -> str:
    """The files (or hub split) of a split that exists, for a message."""
    if data.source == "hub":
        return f"hub dataset {data.hub_dataset!r}, split {(data.hub_splits or {}).get(split)}"
    if data.source == "files":  # the pairs data.files names, under data.root
        named = ", ".join(f"{src} and {tgt}" for src, tgt in (data.files or {}).get(split, []))
        return f"{named} under {data.root}"
    paths = [local_path(data.root, split, lang) for lang in (data.src_lang, data.tgt_lang)]
    return f"{paths[0]} and {paths[1]}"


def check_test_split_fits(config: TrainJobConfig, tokenizer: Tokenizer, sources: list[str]) -> None:
    """Refuse, before training, a learned encoder table shorter than a test source that the
    evaluation at the end of training would decode (SettingsError naming its line)."""
    from rpr_nmt.train.validation import check_evaluated_sources_fit, encoder_table_rows

    if encoder_table_rows(config.model) is None:
        return
    check_evaluated_sources_fit(config, tokenizer, config.data.test_split, sources, run_dir=None)


def _longest_row(ragged: Ragged) -> int:
    """The longest row of a Ragged, block by block (its offsets may be memory-mapped)."""
    offsets, block = ragged.offsets, 1 << 20
    starts = range(0, len(offsets) - 1, block)
    return max((int(np.diff(offsets[i : i + block + 1]).max()) for i in starts), default=0)


@dataclass
class TrainingData:
    """The tokenizer, this rank's batch iterators, and the text that validation BLEU decodes."""

    tokenizer: Tokenizer
    train_batches: BatchIterator
    valid_batches: BatchIterator
    bleu_text: tuple[list[str], list[str]] | None  # (sources, references); rank 0 only


def _check_prepared(
    config: TrainJobConfig, data: PreparedData, run_dir: Path, *, test: bool
) -> None:
    """Refuse prepared splits that cannot train or be evaluated (the test split with `test`)."""
    test_sources = check_evaluated_splits(config, data.splits, test=test)
    check_learned_table_fits(config.model, config.data, data.splits)
    new_run = not (run_dir / "checkpoints" / "last.pt").exists()
    if new_run and test_sources is not None:  # refused before training
        check_test_split_fits(config, data.tokenizer, test_sources)


def load_training_data(
    config: TrainJobConfig, ctx: DistributedContext, run_dir: Path, log: logging.Logger
) -> TrainingData:
    """Prepare (or read the cache of) the train and valid splits; batch them for this rank.

    Rank 0 trains or reads the BPE model, encodes the splits and checks them (the test split too:
    it alone evaluates at the end) first; the other ranks wait for its outcome, then read rank 0's
    cache and check what they read (or, when rank 0 failed, end with PeerError).
    """
    cfg, data_cfg = config.train, config.data
    splits = ["train", data_cfg.valid_split]
    if ctx.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            data = prepare_data(data_cfg, splits=splits, log=log.info)
            _check_prepared(config, data, run_dir, test=True)
        except BaseException as error:
            ctx.share_main_outcome(f"{type(error).__name__}: {error}")
            raise
        ctx.share_main_outcome(None)
    else:
        ctx.share_main_outcome(None)
        data = prepare_data(data_cfg, splits=splits, log=_quiet)
        _check_prepared(config, data, run_dir, test=False)
    tok = data.tokenizer
    batching = dict(
        max_tokens=cfg.max_tokens, pad_id=tok.pad_id, bos_id=tok.bos_id, eos_id=tok.eos_id,
        seed=cfg.seed, rank=ctx.rank, world_size=ctx.world_size,
    )  # fmt: skip
    bleu_text = None
    if cfg.valid_bleu and ctx.is_main:  # rank 0 alone decodes
        sources, references = read_parallel_text(data_cfg, data_cfg.valid_split)
        bleu_text = (sources[: cfg.valid_bleu_sentences], references[: cfg.valid_bleu_sentences])
    return TrainingData(
        tokenizer=tok,
        train_batches=BatchIterator(data.splits["train"], shuffle=True, **batching),
        valid_batches=BatchIterator(data.splits[data_cfg.valid_split], shuffle=False, **batching),
        bleu_text=bleu_text,
    )


def _quiet(_: str) -> None:
    pass
