"""What the training benchmarks share: the variants they time, the fixed batches every variant
trains on, and one variant's model and optimizer trained by the trainer's own update step.

scripts/bench_train.py, profile_train.py, bench_gemm_shapes.py, bench_products_in_place.py and
bench_dispatch.py import these, so that each measures the same update on the same batches.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir
from hydra.errors import MissingConfigException

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.config import TrainJobConfig
from rpr_nmt.data import BatchIterator, prepare_data
from rpr_nmt.model import build_model, resolve_device
from rpr_nmt.precision import host_summary, matmul_ceilings
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.setup import wrap_model
from rpr_nmt.train.step import autocast_factory, train_step

REPO = Path(__file__).resolve().parent.parent
# Variant name -> its positions= group (configs/positions/).
VARIANTS = {
    "relative": "relative_k16", "absolute": "absolute", "rope": "rope", "alibi": "alibi",
    "t5": "t5", "learned": "learned", "none": "none",
}  # fmt: skip
BASELINE = "absolute"
# The matmul ceiling each precision's share is taken of (CPU only; fp16 has none measured).
CEILING_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def data_root() -> Path:
    """$RPR_NMT_DATA, else the shared corpora beside the checkout."""
    env = os.environ.get("RPR_NMT_DATA")
    if env:
        return Path(env)
    for candidate in (REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if (candidate / "multi30k").is_dir():
            return candidate
    print("Multi30k not found: set RPR_NMT_DATA to the folder holding multi30k/", file=sys.stderr)
    raise SystemExit(2)


def load_config(
    model: str, max_tokens: int, variant: str = BASELINE, data: str = "multi30k_en_de"
) -> TrainJobConfig:
    """The composed job config: the data= preset, the model preset with the variant's
    positions, the default recipe."""
    os.environ.setdefault("RPR_NMT_DATA", str(data_root()))
    overrides = [
        f"data={data}", f"model={model}", f"positions={VARIANTS[variant]}",
        f"train.max_tokens={max_tokens}",
    ]  # fmt: skip
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        try:
            cfg = compose("train", overrides=overrides)
        except MissingConfigException as e:
            options = ", ".join(o for o in sorted(e.options or []) if not o.endswith("_schema"))
            print(f"no preset {e.missing_cfg_file!r}: one of {options}", file=sys.stderr)
            raise SystemExit(2) from None
    return to_job_config(cfg)


def fixed_batches(config: TrainJobConfig, n: int) -> tuple[list[Any], int, int]:
    """The first n shuffled training batches (the same for every variant), vocab size, pad id."""
    data = prepare_data(config.data, splits=["train"], log=lambda _: None)
    tok = data.tokenizer
    iterator = BatchIterator(
        data.splits["train"], max_tokens=config.train.max_tokens, pad_id=tok.pad_id,
        bos_id=tok.bos_id, eos_id=tok.eos_id, shuffle=True, seed=1,
    )  # fmt: skip
    stream = iter(iterator)
    return [next(stream) for _ in range(n)], tok.vocab_size, tok.pad_id


class Runner:
    """One model variant with its optimizer, trained on the fixed batches."""

    def __init__(
        self, config, vocab_size, pad_id, precision, device, compile=None, arithmetic: int = 1
    ) -> None:
        torch.manual_seed(1)
        self.model = build_model(config.model, vocab_size=vocab_size, pad_id=pad_id).to(device)
        train = config.train
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=1e-4, betas=(train.adam_beta1, train.adam_beta2),
            eps=train.adam_eps,
        )  # fmt: skip
        self.ctx = DistributedContext(device=device)
        self.forward_model = wrap_model(  # what trains; compile: None or the scope
            self.model, self.ctx, compile=compile is not None, scope=compile or "layers"
        )
        self.autocast = autocast_factory(precision, device, arithmetic)  # train.arithmetic
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        self.pad_id = pad_id
        self.update_seconds: list[float] = []  # of the last run

    def flops_per_token(self, batch: Any) -> float:
        """FLOP of one update per non-padding source + target token (torch's FlopCounterMode, on
        the eager model: the counter does not see into compiled graphs)."""
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            tokens, _ = self.run([batch], eager=True)
        return counter.get_total_flops() / tokens

    def run(self, batches: list[Any], eager: bool = False) -> tuple[int, float]:
        """Train one update per batch (with the uncompiled model if eager); returns (src + tgt
        tokens, seconds). Each update ends synchronised (on CUDA), and self.update_seconds keeps
        their times (is the spread in a few updates or in all?)."""
        model = self.model if eager else self.forward_model
        tokens = 0
        cuda = self.ctx.device.type == "cuda"
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        sync()
        start = time.perf_counter()
        ends = [start]
        for batch in batches:
            result = train_step(
                model, self.optimizer, [batch], ctx=self.ctx, autocast=self.autocast,
                scaler=self.scaler, pad_id=self.pad_id, label_smoothing=0.1, clip_norm=1.0,
            )  # fmt: skip
            tokens += result.n_src_tokens + result.n_tgt_tokens
            sync()
            ends.append(time.perf_counter())
        sync()
        self.update_seconds = [b - a for a, b in zip(ends, ends[1:])]
        return tokens, time.perf_counter() - start


def update_parser(
    description: str, *, variant: str, arithmetic: int, rounds: int, updates_help: str
) -> argparse.ArgumentParser:
    """The options of a benchmark of one update in rounds (bench_gemm_shapes.py,
    bench_products_in_place.py): the model, precision, variant, arithmetic, batch size, threads,
    rounds and updates per round, with the script's defaults; add its own, then call
    one_update_runner."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="transformer_small")
    parser.add_argument("--precision", default="bf16", choices=list(CEILING_DTYPES))
    parser.add_argument("--variant", default=variant, choices=VARIANTS)
    parser.add_argument("--arithmetic", type=int, default=arithmetic, choices=(1, 2))
    parser.add_argument("--max-tokens", type=int, default=6500)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--updates", type=int, default=3, help=updates_help)
    return parser


def one_update_runner(parser: argparse.ArgumentParser) -> tuple[argparse.Namespace, Runner, Any]:
    """Parse update_parser's options (a count that times nothing is refused, exit 2), set the
    threads, print the host, and build the variant's Runner with the first fixed batch:
    (options, runner, batch)."""
    args = parser.parse_args()
    if args.rounds < 1 or args.updates < 1:
        parser.error(f"--rounds {args.rounds} --updates {args.updates}: time at least one of each")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(host_summary(matmul_ceilings()), flush=True)
    config = load_config(args.model, args.max_tokens, args.variant)
    batches, vocab_size, pad_id = fixed_batches(config, 1)
    runner = Runner(
        config, vocab_size, pad_id, args.precision, resolve_device("cpu"),
        arithmetic=args.arithmetic,
    )  # fmt: skip
    return args, runner, batches[0]
