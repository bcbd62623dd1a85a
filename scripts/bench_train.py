"""Benchmark training throughput: relative vs absolute positions, fp32 and bf16, in one process.

    .venv/bin/python scripts/bench_train.py [--rounds 5] [--steps 4] [--max-tokens 6500]
        [--precisions fp32 bf16] [--model transformer_small] [--device cpu] [--threads 2]

Relative: k = 16, a^K + a^V, no sinusoid (the paper's proposal). Absolute: k = 0 with the
sinusoidal encoding (Vaswani et al.). Both train on the same Multi30k En-De batches (data root
$RPR_NMT_DATA, else ../shared/data) with the trainer's own update step (Adam, label-smoothed loss,
clipping), in interleaved rounds (A B A B ...), so that drift on a shared machine hits both alike.
Throughput counts non-padding source + target tokens per second of training updates.
Prints the host first (CPU capability, threads, the fp32 and bf16 matmul ceilings measured now),
then one Markdown table: median tokens/s of each variant with the share of the precision's matmul
ceiling it reaches (training work per token counted by torch's FlopCounterMode on one update:
matmuls and attention, padding included), the median of the per-round ratios relative /
absolute, and peak memory.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.config import TrainJobConfig
from rpr_nmt.data import BatchIterator, prepare_data
from rpr_nmt.model import build_model, resolve_device
from rpr_nmt.precision import host_summary, matmul_ceilings
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.monitor import peak_memory_mb
from rpr_nmt.train.step import autocast_factory, train_step

REPO = Path(__file__).resolve().parent.parent
VARIANTS = {
    "relative": dict(max_relative_position=16, relative_keys=True, relative_values=True),
    "absolute": dict(max_relative_position=0, sinusoidal=True),
}


def data_root() -> Path:
    """$RPR_NMT_DATA, else the shared corpora beside the checkout."""
    env = os.environ.get("RPR_NMT_DATA")
    if env:
        return Path(env)
    for candidate in (REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if (candidate / "multi30k").is_dir():
            return candidate
    raise SystemExit("Multi30k not found: set RPR_NMT_DATA to the folder holding multi30k/")


def load_config(model: str, max_tokens: int) -> TrainJobConfig:
    """The composed job config: Multi30k En-De, the given model preset, the default recipe."""
    os.environ.setdefault("RPR_NMT_DATA", str(data_root()))
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        cfg = compose(
            "train",
            overrides=["data=multi30k_en_de", f"model={model}", f"train.max_tokens={max_tokens}"],
        )
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

    def __init__(self, config, variant, vocab_size, pad_id, precision, device) -> None:
        torch.manual_seed(1)
        model_cfg = replace(config.model, **VARIANTS[variant])
        self.model = build_model(model_cfg, vocab_size=vocab_size, pad_id=pad_id).to(device)
        train = config.train
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=1e-4, betas=(train.adam_beta1, train.adam_beta2),
            eps=train.adam_eps,
        )  # fmt: skip
        self.ctx = DistributedContext(device=device)
        self.autocast = autocast_factory(precision, device)
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
        self.pad_id = pad_id

    def flops_per_token(self, batch: Any) -> float:
        """FLOP of one update per non-padding source + target token (torch's FlopCounterMode)."""
        from torch.utils.flop_counter import FlopCounterMode

        with FlopCounterMode(display=False) as counter:
            tokens, _ = self.run([batch])
        return counter.get_total_flops() / tokens

    def run(self, batches: list[Any]) -> tuple[int, float]:
        """Train one update per batch; returns (src + tgt tokens, seconds)."""
        tokens = 0
        sync = torch.cuda.synchronize if self.ctx.device.type == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        for batch in batches:
            result = train_step(
                self.model, self.optimizer, [batch], ctx=self.ctx, autocast=self.autocast,
                scaler=self.scaler, pad_id=self.pad_id, label_smoothing=0.1, clip_norm=1.0,
            )  # fmt: skip
            tokens += result.n_src_tokens + result.n_tgt_tokens
        sync()
        return tokens, time.perf_counter() - start


def bench_precision(config, batches, vocab_size, pad_id, precision, device, rounds, steps):
    """Interleaved rounds for one precision; returns the table row."""
    runners = {v: Runner(config, v, vocab_size, pad_id, precision, device) for v in VARIANTS}
    for runner in runners.values():  # warm-up: allocator, kernels
        runner.run(batches[:2])
    work = {v: runners[v].flops_per_token(batches[0]) for v in VARIANTS}
    speed: dict[str, list[float]] = {v: [] for v in VARIANTS}
    ratios = []
    for r in range(rounds):
        chunk = [batches[(r * steps + i) % len(batches)] for i in range(steps)]
        order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
        for variant in order:
            tokens, seconds = runners[variant].run(chunk)
            speed[variant].append(tokens / seconds)
        ratios.append(speed["absolute"][-1] / speed["relative"][-1])  # time relative / absolute
        print(
            f"  {precision} round {r + 1}: relative {speed['relative'][-1]:,.0f} tok/s, "
            f"absolute {speed['absolute'][-1]:,.0f} tok/s, time ratio {ratios[-1]:.3f}",
            flush=True,
        )
    return {
        "precision": precision,
        "relative": statistics.median(speed["relative"]),
        "absolute": statistics.median(speed["absolute"]),
        "ratio": statistics.median(ratios),
        "ratio_range": (min(ratios), max(ratios)),
        "memory": peak_memory_mb(device),
        "work": work,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="transformer_small")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="updates per variant per round")
    parser.add_argument("--max-tokens", type=int, default=6500)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ceilings = matmul_ceilings()
    print(host_summary(ceilings), flush=True)
    device = resolve_device(args.device)
    config = load_config(args.model, args.max_tokens)
    batches, vocab_size, pad_id = fixed_batches(config, max(args.rounds * args.steps, 2))
    per_batch = statistics.mean(b.n_src_tokens + b.n_tgt_tokens for b in batches)
    print(
        f"{args.model} on Multi30k En-De, {device}, {torch.get_num_threads()} threads, "
        f"max_tokens {args.max_tokens} ({per_batch:,.0f} non-pad src+tgt tokens per batch), "
        f"{args.rounds} rounds x {args.steps} updates, MALLOC_MMAP_MAX_="
        f"{os.environ.get('MALLOC_MMAP_MAX_', 'unset')}",
        flush=True,
    )
    rows = [
        bench_precision(config, batches, vocab_size, pad_id, p, device, args.rounds, args.steps)
        for p in args.precisions
    ]
    print(f"\n{date.today()} | {platform.machine()} | torch {torch.__version__}\n")
    work = rows[0]["work"]
    print(
        f"training work per src+tgt token: relative {work['relative'] / 1e6:.1f} MFLOP, "
        f"absolute {work['absolute'] / 1e6:.1f} MFLOP; {host_summary(ceilings)}\n"
    )
    print(
        "| precision | relative tok/s (ceiling share) | absolute tok/s (ceiling share) | "
        "time ratio rel/abs (range) | peak mem |"
    )
    print("|---|---|---|---|---|")
    for row in rows:
        low, high = row["ratio_range"]
        ceiling = ceilings.get(row["precision"]) if device.type == "cpu" else None
        cells = []
        for variant in VARIANTS:
            share = ""
            if ceiling:
                share = f" ({row[variant] * row['work'][variant] / (ceiling * 1e9):.0%})"
            cells.append(f"{row[variant]:,.0f}{share}")
        print(
            f"| {row['precision']} | {cells[0]} | {cells[1]} | "
            f"{row['ratio']:.3f} ({low:.3f}-{high:.3f}) | {row['memory']:,.0f} MiB |"
        )


if __name__ == "__main__":
    main()
