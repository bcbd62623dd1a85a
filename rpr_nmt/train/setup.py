"""What the Trainer builds before its loop: settings checked, seeds set, the wrapped model and the
optimizer. Its data, prepared and checked, is rpr_nmt.train.training_data's."""

from __future__ import annotations

import copy
import logging
import math
import random
from dataclasses import replace
from pathlib import Path

import torch

from rpr_nmt.checkpoint import CheckpointError
from rpr_nmt.config import DataConfig, DecodeConfig, ModelConfig, TrainConfig, TrainJobConfig
from rpr_nmt.data import DataError
from rpr_nmt.data.bpe import check_bpe_values
from rpr_nmt.data.held_out import check_mode
from rpr_nmt.model.positions import position_problem
from rpr_nmt.precision import bf16_support, resolve_precision
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.errors import SettingsError
from rpr_nmt.train.step import autocast_factory, check_arithmetic

MAX_SEED = 2**32 - 1  # np.random.seed takes 0..2**32-1


def check_settings(cfg: TrainConfig) -> None:
    """Refuse settings that compose but cannot work together (SettingsError says which)."""
    _check_numbers(cfg)
    if cfg.best_metric not in ("loss", "bleu"):
        raise SettingsError(f"train.best_metric={cfg.best_metric!r}: use loss or bleu")
    if cfg.compile_scope not in ("layers", "model"):
        raise SettingsError(f"train.compile_scope={cfg.compile_scope!r}: use layers or model")
    check_arithmetic(cfg.arithmetic, unresolved=True)
    if cfg.best_metric == "bleu" and not cfg.valid_bleu:
        raise SettingsError("train.best_metric=bleu needs train.valid_bleu=true")
    for key in ("max_steps", "max_tokens", "update_freq", "log_every", "valid_every", "save_every"):
        if getattr(cfg, key) < 1:
            raise SettingsError(f"train.{key}={getattr(cfg, key)} must be at least 1")
    if cfg.max_bad_steps < 1:
        raise SettingsError(f"train.max_bad_steps={cfg.max_bad_steps} must be at least 1")
    if cfg.keep_last < 0:
        raise SettingsError(f"train.keep_last={cfg.keep_last} must be at least 0")
    if cfg.average_last < 0:
        raise SettingsError(f"train.average_last={cfg.average_last} must be at least 0 (0 = off)")
    if cfg.lr <= 0:
        raise SettingsError(f"train.lr={cfg.lr} must be above 0")
    for key in ("warmup_steps", "clip_norm"):
        if getattr(cfg, key) < 0:
            raise SettingsError(f"train.{key}={getattr(cfg, key)} must be at least 0 (0 = off)")
    for key in ("label_smoothing", "ema_decay"):
        if not 0 <= getattr(cfg, key) < 1:
            raise SettingsError(f"train.{key}={getattr(cfg, key)} must be in [0, 1) (0 = off)")
    if not 0 <= cfg.cooldown <= 1:
        raise SettingsError(f"train.cooldown={cfg.cooldown} must be in [0, 1] (0 = off)")
    if cfg.valid_bleu and cfg.valid_bleu_sentences < 1:
        raise SettingsError(
            f"train.valid_bleu_sentences={cfg.valid_bleu_sentences} must be at least 1 "
            "(train.valid_bleu=false turns validation BLEU off)"
        )
    if cfg.max_time_minutes is not None and cfg.max_time_minutes <= 0:
        raise SettingsError(
            f"train.max_time_minutes={cfg.max_time_minutes} must be above 0 (null = no limit)"
        )
    if not 0 <= cfg.seed <= MAX_SEED:  # numpy's seed range: found only after data preparation
        raise SettingsError(f"train.seed={cfg.seed} must be in [0, {MAX_SEED}]")


def _check_numbers(cfg: TrainConfig) -> None:
    """Refuse NaN in any float setting (it passes every range check below), and infinity where
    no step could use it; inf stays allowed where it means "off" (clip_norm, max_time_minutes)."""
    for key in ("lr", "adam_beta1", "adam_beta2", "adam_eps", "weight_decay"):
        if not math.isfinite(getattr(cfg, key)):
            raise SettingsError(f"train.{key}={getattr(cfg, key)} must be a finite number")
    for key in ("clip_norm", "max_time_minutes"):
        value = getattr(cfg, key)
        if value is not None and math.isnan(value):
            off = "0 = off" if key == "clip_norm" else "null = no limit"
            raise SettingsError(f"train.{key}=nan is not a number: set a number ({off})")


def check_data_settings(cfg: DataConfig) -> None:
    """Refuse data settings that compose but silently do something else: NaN passes every range
    check (a NaN max_length_ratio turned the ratio filter off), a cap below one pair was
    reported as an empty training set blamed on the length filter, and one language on both sides
    trained a copy model."""
    if math.isnan(cfg.max_length_ratio):  # inf stays allowed: it means no ratio filter
        raise SettingsError("data.max_length_ratio=nan is not a number: set a number, e.g. 3.0")
    try:  # also before a sweep's jobs train (rpr_nmt.cli.sweep_settings), not at its BPE alone
        check_bpe_values(cfg.vocab_size, cfg.bpe_character_coverage, cfg.bpe_sample_sentences)
        check_mode(cfg)  # data.held_out_overlap: keep, drop or refuse
    except DataError as e:
        raise SettingsError(str(e)) from None
    if cfg.src_lang == cfg.tgt_lang:  # every pair a copy: a model that learns to copy
        raise SettingsError(
            f"data.src_lang and data.tgt_lang are both '{cfg.src_lang}': set them to the two "
            "languages of the corpus"
        )
    if cfg.max_train_pairs is not None and cfg.max_train_pairs < 1:
        raise SettingsError(
            f"data.max_train_pairs={cfg.max_train_pairs} must be at least 1 (null = all pairs)"
        )


def check_longest_pair_fits(config: TrainJobConfig) -> None:
    """Refuse a length filter that lets through pairs no batch can hold: a pair of
    data.max_tokens_per_sentence tokens (plus EOS / BOS) over train.max_tokens would form a
    batch of its own past the bound, and a 20,000-token pair's attention runs out of memory."""
    longest, budget = config.data.max_tokens_per_sentence, config.train.max_tokens
    if longest + 1 > budget:
        raise SettingsError(
            f"data.max_tokens_per_sentence={longest} lets through pairs longer than a batch "
            f"(train.max_tokens={budget}): lower it to at most {budget - 1} or raise "
            "train.max_tokens"
        )


def check_model_settings(cfg: ModelConfig) -> None:
    """Refuse a model that cannot be built, naming the key, before any data is prepared."""
    if cfg.max_relative_position < 0:
        raise SettingsError(
            f"model.max_relative_position={cfg.max_relative_position}: use k >= 1, or 0 for none"
        )
    for key in ("d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers"):
        if getattr(cfg, key) < 1:
            raise SettingsError(f"model.{key}={getattr(cfg, key)} must be at least 1")
    if cfg.d_model % cfg.n_heads:
        raise SettingsError(
            f"model.d_model={cfg.d_model} is not divisible by model.n_heads={cfg.n_heads}"
        )
    for key in ("dropout", "attention_dropout", "activation_dropout"):
        if getattr(cfg, key) is not None and not 0 <= getattr(cfg, key) < 1:
            raise SettingsError(f"model.{key}={getattr(cfg, key)} must be in [0, 1)")
    problem = position_problem(
        d_head=cfg.d_model // cfg.n_heads, absolute_positions=cfg.absolute_positions,
        sinusoidal=cfg.sinusoidal, max_positions=cfg.max_positions,
        relative_positions=cfg.relative_positions, max_relative_position=cfg.max_relative_position,
        relative_keys=cfg.relative_keys, relative_values=cfg.relative_values,
        share_relative_across_heads=cfg.share_relative_across_heads,
        share_relative_across_layers=cfg.share_relative_across_layers, rope_base=cfg.rope_base,
        rope_dims=cfg.rope_dims, rope_layout=cfg.rope_layout, t5_num_buckets=cfg.t5_num_buckets,
        t5_max_distance=cfg.t5_max_distance, positions_in=cfg.positions_in, new_run=True,
    )  # fmt: skip
    if problem:  # the combinations of position methods that make no sense, named
        raise SettingsError(problem)


def check_job_settings(config: TrainJobConfig) -> None:
    """Every check of a job's settings that needs neither its data nor its device: what a sweep
    checks for each of its jobs before any trains (rpr_nmt.cli.sweep_settings).

    Raises:
        SettingsError: the first setting refused, named in one line.
    """
    check_settings(config.train)
    check_data_settings(config.data)
    check_model_settings(config.model)
    check_longest_pair_fits(config)


def training_precision(precision: str, device: torch.device) -> str:
    """train.precision as the run uses it ("auto" resolved by the hardware), checked before any
    data is prepared: a value that is no precision, or fp16 off CUDA, is a SettingsError."""
    try:
        resolved = resolve_precision(precision, device, key="train.precision")
    except ValueError as error:
        raise SettingsError(str(error)) from None
    autocast_factory(resolved, device)  # refuses fp16 on CPU
    return resolved


def training_arithmetic(arithmetic: int, precision: str) -> int:
    """train.arithmetic as the run computes with it (check_settings has checked the value): 1 in
    fp32, where both arithmetics compute the same numbers (rpr_nmt/model/arithmetic.py)."""
    return 1 if precision == "fp32" else arithmetic


def decode_settings(cfg: DecodeConfig, device: torch.device) -> DecodeConfig:
    """The decode settings of validation BLEU and the final evaluation, checked before any data is
    prepared (a bad one is a SettingsError naming it), with decode.precision resolved."""
    from rpr_nmt.decode import check_decode_config, decoding_precision

    try:
        check_decode_config(cfg)
        return replace(cfg, precision=decoding_precision(cfg.precision, device))
    except ValueError as error:
        raise SettingsError(str(error)) from None


def resumed_precision(
    requested: str,
    resolved: str,
    trained_in: str,
    device: torch.device,
    log: logging.Logger,
    arithmetic: int = 1,
) -> str:
    """The precision a resumed run continues in.

    An explicit train.precision is used as given. "auto" keeps the precision the run trained in
    (its checkpoint's), so that a run moved to another host does not change arithmetic halfway;
    on a host without native bf16 a bf16 run resumes in bf16 with a warning that says so, and how
    to go on in fp32: by train.precision=fp32 for a run of arithmetic 1 (`arithmetic`, the
    checkpoint's), in a new run folder for one of arithmetic 2, whose fp32 would compute in 1.
    """
    if requested != "auto" or trained_in in (resolved, "auto"):
        return resolved
    support = bf16_support(device)
    if trained_in == "bf16" and not support.native:
        fp32 = "pass train.precision=fp32 to continue in fp32"
        if arithmetic != 1:  # fp32 computes in 1: check_resumed_arithmetic would refuse it
            fp32 = (
                f"it trained in arithmetic {arithmetic}, which fp32 does not compute: to train "
                "in fp32, start a new run (hydra.run.dir=...) with train.precision=fp32"
            )
        log.warning(
            "train.precision=auto: this run trained in bf16 and continues in bf16, but this host "
            "computes bf16 slowly (%s); %s",
            support.reason,
            fp32,
        )
    else:
        log.info("train.precision=auto: %s, the precision this run trained in", trained_in)
    return trained_in


def trained_arithmetic(trained: TrainConfig) -> int:
    """The arithmetic a checkpoint's weights trained in: its saved train.arithmetic, 1 in fp32
    (checkpoints from before the setting read as 1)."""
    return training_arithmetic(trained.arithmetic, trained.precision)


def check_resumed_arithmetic(
    trained: TrainConfig, precision: str, arithmetic: int, path: Path
) -> None:
    """Refuse to continue a run in another arithmetic than its checkpoint's (CheckpointError).

    A run of two arithmetics has trained on other numbers halfway, and every report refuses it
    (its sessions record "1+2"); nothing mends it afterwards, so the resume is refused before it
    writes or trains anything. The checkpoint's saved config is what the weights trained with,
    also for checkpoints written before train.arithmetic existed (they read as 1, as they
    trained); sessions.jsonl is missing for those and lists sessions that never saved. A change of
    precision alone passes: fp32 computes the same numbers under either arithmetic.

    Args:
        trained: the checkpoint's train config (its precision and arithmetic).
        precision, arithmetic: what this session asks for, precision as it resumes
            (resumed_precision) and train.arithmetic as given.
        path: the checkpoint, named in the message.
    """
    before = trained_arithmetic(trained)
    now = training_arithmetic(arithmetic, precision)
    if before == now:
        return
    fix = f"train.arithmetic={before}"
    if before != 1 and precision == "fp32":  # fp32 computes in 1 whatever train.arithmetic says
        fix += f" train.precision={trained.precision}"
    raise CheckpointError(
        f"{path} trained in arithmetic {before} so far ({trained.precision}, train.arithmetic="
        f"{trained.arithmetic}), and this session would continue in arithmetic {now} ({precision}, "
        f"train.arithmetic={arithmetic}): no report takes a run of two arithmetics; rerun with "
        f"{fix}, or train into a new run folder (hydra.run.dir=...)"
    )


def seed_everything(seed: int) -> None:
    """Seed torch, Python and (when installed) numpy."""
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """Adam with the paper's betas and epsilon; AdamW (decoupled decay) when weight_decay > 0."""
    betas = (cfg.adam_beta1, cfg.adam_beta2)
    if cfg.weight_decay > 0:
        return torch.optim.AdamW(
            model.parameters(), lr=0.0, betas=betas, eps=cfg.adam_eps, weight_decay=cfg.weight_decay
        )
    return torch.optim.Adam(model.parameters(), lr=0.0, betas=betas, eps=cfg.adam_eps)


def wrap_model(
    model: torch.nn.Module, ctx: DistributedContext, *, compile: bool, scope: str = "layers"
) -> torch.nn.Module:
    """What trains: the model, or its twin with compiled layers (scope "layers"), in
    DistributedDataParallel across ranks, then the whole of it compiled (scope "model").

    Either scope compiles with symbolic batch and lengths: a graph per branch the lengths take
    (attention_kernels' FEW_QUERIES, DIAGONALS_ABOVE) and per guard inductor adds of its own, not
    per batch shape; with static shapes each new shape compiled anew, and past dynamo's limit of 8
    the model ran eager.
    """
    if compile and scope == "layers":
        model = with_compiled_layers(model)
    if ctx.distributed:
        from torch.nn.parallel import DistributedDataParallel

        ids = [ctx.device.index] if ctx.device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids)
    if compile and scope == "model":
        model = torch.compile(model, dynamic=True)
    return model


def with_compiled_layers(model: torch.nn.Module) -> torch.nn.Module:
    """A twin of the Transformer whose encoder and decoder layers run through torch.compile.

    The twin holds the model's own parameters (training it trains the model) and leaves the model
    eager: decoding, checkpoints and the weight average see no compiled code. Every encoder layer
    runs the same code, so one graph serves all six (one more for the decoder's), where compiling
    the whole model traces every layer anew.
    """
    twin = copy.copy(model)  # shares the parameters; its own table of submodules
    twin._modules = dict(model._modules)
    for name in ("encoder", "decoder"):
        stack = copy.copy(getattr(model, name))
        stack._modules = dict(stack._modules)
        stack.layers = torch.nn.ModuleList(
            torch.compile(layer, dynamic=True) for layer in stack.layers
        )
        setattr(twin, name, stack)
    return twin
