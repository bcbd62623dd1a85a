"""Validation during training (loss, perplexity, greedy BLEU) and the evaluation at the end.

Validation never changes what training does next: it runs in eval mode without gradients, and the
random states are restored afterwards, so that a run validated at step N and one that was not
continue identically (exact resume depends on it).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import asdict, is_dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rpr_nmt.checkpoint import average_last
from rpr_nmt.config import DecodeConfig, ModelConfig, TrainConfig, TrainJobConfig
from rpr_nmt.decode.constraints import PositionLimitError, check_sources_fit
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.ema import WeightAverage
from rpr_nmt.train.errors import SettingsError
from rpr_nmt.train.loss import label_smoothed_loss
from rpr_nmt.train.monitor import perplexity
from rpr_nmt.train.rng import rng_state, set_rng_state

log = logging.getLogger("rpr_nmt.train")


@contextlib.contextmanager
def preserved_rng_and_mode(model: nn.Module):
    """Eval mode and untouched random states inside; training mode and the old states afterwards."""
    state = rng_state()
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
        set_rng_state(state)


@torch.no_grad()
def validation_loss(
    model: nn.Module,
    batches: Iterable[Any],
    *,
    ctx: DistributedContext,
    autocast: contextlib.AbstractContextManager | Any,
    pad_id: int,
    label_smoothing: float,
) -> dict[str, float]:
    """Label-smoothed loss and perplexity per target token over a whole split (summed over ranks).

    Args:
        model: the Transformer (each rank passes its own shard of the batches).
        batches: Batch objects of this rank's share of the split.
        ctx: the distributed context (sums over ranks).
        autocast: a factory of the precision context, called once per batch.
        pad_id: padding id.
        label_smoothing: the training label smoothing, so that valid/loss compares with train/loss.

    Returns:
        {"loss": smoothed loss per token, "ppl": exp(cross-entropy per token)}.
    """
    totals = torch.zeros(3, dtype=torch.float64)
    with preserved_rng_and_mode(model):
        for batch in batches:
            batch = batch.to(ctx.device)
            with autocast():
                logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            loss, nll = label_smoothed_loss(
                logits, batch.tgt_out, epsilon=label_smoothing, pad_id=pad_id
            )
            totals += torch.tensor(
                [loss.item(), nll.item(), batch.n_tgt_tokens], dtype=torch.float64
            )
    loss_sum, nll_sum, tokens = ctx.all_reduce_sum(totals).tolist()
    tokens = max(tokens, 1.0)
    return {"loss": loss_sum / tokens, "ppl": perplexity(nll_sum / tokens)}


def greedy_config(decode_cfg: DecodeConfig, device: torch.device) -> DecodeConfig:
    """The decode config for validation BLEU: greedy, one hypothesis, on the training device."""
    return replace(decode_cfg, beam_size=1, length_penalty=0.0, nbest=1, device=device.type)


@torch.no_grad()
def validation_bleu(
    model: nn.Module,
    tokenizer: Any,
    sources: list[str],
    references: list[str],
    *,
    decode_cfg: DecodeConfig,
    tgt_lang: str,
    device: torch.device,
) -> float:
    """sacreBLEU of greedy translations of `sources` (rank 0 only; the others wait at a barrier).

    Returns:
        The corpus BLEU score.
    """
    from rpr_nmt.decode import translate
    from rpr_nmt.evaluate import detokenize, score_corpus

    with preserved_rng_and_mode(model):
        nbest = translate(model, tokenizer, sources, greedy_config(decode_cfg, device))
    hypotheses = [detokenize(tokenizer, hyps) for hyps in nbest]
    return float(score_corpus(hypotheses, references, tgt_lang).bleu)


def encoder_table_rows(model: ModelConfig) -> int | None:
    """Rows of the model's learned encoder position table; None when the encoder reads every
    position (any other method, or learned positions in the decoder only)."""
    learned = model.absolute_positions == "learned" and model.positions_in != "decoder"
    return model.max_positions if learned else None


def check_evaluated_sources_fit(
    config: TrainJobConfig,
    tokenizer: Any,
    split: str,
    sources: Sequence[str],
    *,
    run_dir: Path | None,
) -> None:
    """Refuse a source of a split the end of training evaluates that is longer than a learned
    encoder table: no evaluation of this model can translate it (the table's size is the
    model's), so the message says what to do instead of a traceback from the model.

    Args:
        config: the run's config (its model's table, its data's name).
        tokenizer: the run's BPE tokenizer.
        split: the split's name, for the message.
        sources: its raw source sentences.
        run_dir: the run folder once trained (its checkpoints are kept); None before training.

    Raises:
        SettingsError: one line naming the split, the line and what to do.
    """
    rows = encoder_table_rows(config.model)
    if rows is None:
        return
    lengths = [len(tokenizer.encode(s)) + 1 for s in sources]  # ids + EOS, as decoding reads them
    try:
        check_sources_fit(lengths, rows, lines=range(1, len(sources) + 1))
    except PositionLimitError as e:
        n = e.positions
        if run_dir is None:
            fix = f"raise model.max_positions to at least {n}, or set train.evaluate_at_end=false"
        else:
            fix = (
                f"the checkpoints in {run_dir / 'checkpoints'} are kept: evaluate another split "
                f"(rpr-nmt-evaluate checkpoint={run_dir} split=...), or train a new run with "
                f"model.max_positions of at least {n} to evaluate this one"
            )
        raise SettingsError(
            f"{config.data.name} split '{split}' line {e.line}: a source of {n} positions is "
            f"longer than the learned position table (model.max_positions={rows}): the "
            f"evaluation at the end of training cannot translate it, nor can rpr-nmt-evaluate "
            f"with this model; {fix}"
        ) from e


def evaluate_at_end(
    model: nn.Module,
    tokenizer: Any,
    config: TrainJobConfig,
    out_dir: Path,
    device: torch.device,
    checkpoint: str,
) -> dict[str, Any]:
    """Decode the valid and test splits with cfg.decode (valid alone with train.evaluate_test
    false); write hyp and eval files into out_dir.

    Returns:
        Summary entries: each number or string of each split's Scores, prefixed by the role:
        valid_bleu, test_bleu, test_chrf, ...

    Raises:
        SettingsError: a source of either split is longer than a learned encoder table (checked
            before either is decoded; the checkpoints in out_dir stay as they are).
    """
    from rpr_nmt.data import read_parallel_text
    from rpr_nmt.evaluate import evaluate_split

    data_cfg = config.data
    decode_cfg = replace(config.decode, device=device.type)
    splits = dict(evaluated_splits(config))
    texts = {role: read_parallel_text(data_cfg, split) for role, split in splits.items()}
    for role, (sources, _) in texts.items():
        check_evaluated_sources_fit(config, tokenizer, splits[role], sources, run_dir=out_dir)
    entries: dict[str, Any] = {}
    with preserved_rng_and_mode(model):
        for role, (sources, references) in texts.items():
            split = splits[role]
            scores = evaluate_split(
                model, tokenizer, sources, references, decode_cfg, data_cfg.tgt_lang, out_dir,
                split, checkpoint=checkpoint, log=log.info,
            )  # fmt: skip
            for name, value in _scores_dict(scores).items():
                if isinstance(value, (int, float, str)):
                    entries[f"{role}_{name}"] = value
    return entries


def evaluated_splits(config: TrainJobConfig) -> list[tuple[str, str]]:
    """(role, split) of each split the end of a run decodes: valid, then test unless
    train.evaluate_test is off (a recipe tuned on the valid split)."""
    roles = [("valid", config.data.valid_split)]
    if config.train.evaluate_test:
        roles.append(("test", config.data.test_split))
    return roles


def evaluation_setup(config: TrainJobConfig) -> dict[str, Any]:
    """What decides the final evaluation's figures besides the weights: decoding, averaging, and
    whether the test split was left out (only then recorded, so earlier summaries still match)."""
    cfg = config.train
    setup = {
        "decode": asdict(config.decode),
        "average_last": cfg.average_last,
        "ema": cfg.ema_decay,
    }
    if not cfg.evaluate_test:
        setup["test"] = False
    return setup


def earlier_evaluation(
    summary_path: Path, steps: int, setup: dict[str, Any], splits: tuple[str, ...]
) -> dict[str, Any] | None:
    """The final evaluation a finished run already has, so that rerunning it costs no decoding.

    Returns the summary entries evaluate_at_end wrote (valid_*, test_*, evaluated_*,
    averaged_*), when summary_path records one at the same update with the same setup and the
    eval files of both splits are still beside it; else None (evaluate again).
    """
    try:
        earlier = json.loads(summary_path.read_text())
    except (OSError, ValueError):
        return None
    as_saved = json.loads(json.dumps(setup, default=str))  # tuples as lists, as JSON keeps them
    if earlier.get("steps") != steps or earlier.get("evaluated_setup") != as_saved:
        return None
    if not all((summary_path.parent / f"eval_{split}.json").is_file() for split in splits):
        return None
    prefixes = ("valid_", "test_", "evaluated_", "averaged_")
    return {k: v for k, v in earlier.items() if k.startswith(prefixes)}


def _scores_dict(scores: Any) -> dict[str, Any]:
    if is_dataclass(scores):
        return asdict(scores)
    if isinstance(scores, Mapping):
        return dict(scores)
    return {k: v for k, v in vars(scores).items() if not k.startswith("_")}


def validation_figures(
    model: nn.Module,
    batches: Iterable[Any],
    bleu_text: tuple[list[str], list[str]] | None,
    *,
    tokenizer: Any,
    config: TrainJobConfig,
    ctx: DistributedContext,
    autocast: Callable[[], Any],
) -> dict[str, float]:
    """Validation loss and perplexity over `batches` (every rank), and with train.valid_bleu the
    greedy BLEU of `bleu_text` (sources, references; rank 0 decodes, every rank gets its score)."""
    figures = validation_loss(
        model, batches, ctx=ctx, autocast=autocast, pad_id=tokenizer.pad_id,
        label_smoothing=config.train.label_smoothing,
    )  # fmt: skip
    if config.train.valid_bleu:
        bleu = 0.0
        if bleu_text is not None:
            bleu = validation_bleu(
                model, tokenizer, *bleu_text, decode_cfg=config.decode,
                tgt_lang=config.data.tgt_lang, device=ctx.device,
            )  # fmt: skip
        # Rank 0's score reaches every rank, so that all agree on a new best (and on saving).
        total = ctx.all_reduce_sum(torch.tensor([bleu], dtype=torch.float64))
        figures["bleu"] = total.item()
    return figures


def why_fewer_to_average(cfg: TrainConfig, step: int) -> str:
    """Why a run at update `step` may hold fewer than train.average_last step checkpoints: too few
    saves (train.save_every), or older ones deleted by an earlier session that kept fewer (the
    trainer keeps max(keep_last, average_last))."""
    saves = -(-step // cfg.save_every)  # every save_every updates and at the end
    if saves < cfg.average_last:
        return (
            f"{step} updates at train.save_every={cfg.save_every} save {saves}: lower "
            f"train.save_every (or train longer) to have {cfg.average_last}"
        )
    return (
        "an earlier session of this run kept fewer and deleted the older ones (a smaller "
        "train.keep_last and train.average_last)"
    )


def final_evaluation(
    model: nn.Module,
    ema: WeightAverage | None,
    tokenizer: Any,
    config: TrainJobConfig,
    run_dir: Path,
    device: torch.device,
    *,
    step: int,
    trained: bool,
) -> dict[str, Any]:
    """The end of a run (rank 0): average the last checkpoints when asked, then decode valid and
    test with config.decode, with the weights rpr-nmt-evaluate would load (the weight average when
    there is one). A finished run rerun (`trained` false) keeps the evaluation its summary holds.

    Returns:
        The summary's entries: averaged_checkpoint, evaluated_*, valid_* and test_* figures, and
        evaluated_before when they were kept from an earlier session.
    """
    cfg, checkpoint_dir = config.train, run_dir / "checkpoints"
    setup = evaluation_setup(config)
    if cfg.evaluate_at_end and not trained:
        splits = tuple(split for _, split in evaluated_splits(config))
        summary = run_dir / "train_summary.json"
        earlier = earlier_evaluation(summary, step, setup, splits)
        if earlier is not None:
            log.info("update %d was evaluated before: kept from %s", step, summary)
            return {**earlier, "evaluated_before": True}
    extra: dict[str, Any] = {}
    checkpoint, weights = checkpoint_dir / "last.pt", None
    if cfg.average_last > 0:
        why_fewer = why_fewer_to_average(cfg, step)
        checkpoint, averaged = average_last(checkpoint_dir, cfg.average_last, why_fewer=why_fewer)
        weights = averaged.weights()
        extra["averaged_checkpoint"] = str(checkpoint)
    elif ema is not None:
        weights = ema.weights_for(model)
    if not cfg.evaluate_at_end:
        return extra
    if weights is not None:
        model = deepcopy(model)
        model.load_state_dict(weights)
    extra["evaluated_checkpoint"] = str(checkpoint)
    extra["evaluated_setup"] = setup
    extra.update(evaluate_at_end(model, tokenizer, config, run_dir, device, str(checkpoint)))
    return extra
