"""What an eager update costs its host, per position method: ops dispatched and host time.

    .venv/bin/python scripts/bench_dispatch.py [--variants relative absolute] [--layers 6]
        [--batch 4] [--src-len 20] [--tgt-len 18] [--rounds 9] [--updates 50] [--threads 1]
        [--device cpu] [--precision fp32] [--by-query]

On a GPU an eager update of transformer_base waits on its host (docs/performance.md, "On a GPU":
host dispatch 78 ms against 57.5 ms of kernels), so what a method adds there is mostly ops to
dispatch. This script measures that on the CPU, where the arithmetic can be made negligible: a
model of tiny widths (transformer_tiny with 4 heads, --layers encoder and decoder layers) on a few
short random sentences (one source and one target padded), in training mode (dropout on). For each
variant (a positions= group, as in bench_train.py) it prints the aten ops that one forward +
label-smoothed loss + backward dispatches (counted by a TorchDispatchMode) and the median host time
of such an update over interleaved rounds, with the ratio to the sinusoid (absolute) in the same
rounds. CPU dispatch is not CUDA's (CUDA adds a kernel launch to most ops; CPU dropout and the
sinusoid's SDPA decompose into more ops than on CUDA): read the ratios as a proxy, the counts as
exact. With --device cuda the same tiny updates measure the GPU's own dispatch and launches (each
round ends synchronised; at these widths the kernels wait on the host, not the other way round), and
--precision bf16 runs them under the trainer's autocast, as the GPU trains. --by-query computes
Shaw's terms as the paper does (attention_kernels.ByQuery) on the device, as in bench_train.py.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runner import BASELINE, VARIANTS  # noqa: E402

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config  # noqa: E402
from rpr_nmt.model import attention_kernels, build_model, resolve_device  # noqa: E402
from rpr_nmt.precision import host_summary, matmul_ceilings  # noqa: E402
from rpr_nmt.train.loss import label_smoothed_loss  # noqa: E402
from rpr_nmt.train.step import autocast_factory  # noqa: E402

VOCAB, PAD = 100, 0


class CountOps(TorchDispatchMode):
    """Counts every aten op dispatched inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def build(variant: str, layers: int) -> torch.nn.Module:
    """transformer_tiny with 4 heads and `layers` layers per stack, the variant's positions."""
    overrides = [
        "model=transformer_tiny", f"positions={VARIANTS[variant]}", "model.n_heads=4",
        f"model.n_encoder_layers={layers}", f"model.n_decoder_layers={layers}",
    ]  # fmt: skip
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        config = to_job_config(compose("train", overrides=overrides))
    torch.manual_seed(1)
    return build_model(config.model, vocab_size=VOCAB, pad_id=PAD).train()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", nargs="+", default=["relative", BASELINE], choices=VARIANTS)
    parser.add_argument("--layers", type=int, default=6, help="layers per stack")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--src-len", type=int, default=20)
    parser.add_argument("--tgt-len", type=int, default=18)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--updates", type=int, default=50, help="updates timed per round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--by-query", action="store_true", help="Shaw's terms by ByQuery")
    args = parser.parse_args()
    for name in ("rounds", "updates"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: time at least one")
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    if args.by_query:
        attention_kernels.BY_QUERY_DEVICES = (device.type,)
    autocast = autocast_factory(args.precision, device)
    variants = list(dict.fromkeys([*args.variants, BASELINE]))

    g = torch.Generator().manual_seed(0)
    src = torch.randint(1, VOCAB, (args.batch, args.src_len), generator=g)
    tgt = torch.randint(1, VOCAB, (args.batch, args.tgt_len + 1), generator=g)
    src[-1, -3:] = PAD
    tgt[0, -4:] = PAD
    src, tgt_in, tgt_out = (t.to(device) for t in (src, tgt[:, :-1], tgt[:, 1:]))
    models = {v: build(v, args.layers).to(device) for v in variants}

    def update(model: torch.nn.Module) -> None:
        with autocast():
            logits = model(src, tgt_in)  # (B, T, V)
        loss, _ = label_smoothed_loss(logits, tgt_out, epsilon=0.1, pad_id=PAD)
        loss.backward()

    ops = {}
    for variant, model in models.items():
        for _ in range(20):  # warm-up
            update(model)
        with CountOps() as counter:
            update(model)
        ops[variant] = sum(counter.ops.values())
    ms: dict[str, list[float]] = {v: [] for v in variants}

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for r in range(args.rounds):
        for variant in variants if r % 2 == 0 else variants[::-1]:
            synchronize()
            start = time.perf_counter()
            for _ in range(args.updates):
                update(models[variant])
            synchronize()
            ms[variant].append((time.perf_counter() - start) / args.updates * 1e3)

    print(host_summary(matmul_ceilings()))
    if device.type == "cuda":
        print(f"device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print(
        f"transformer_tiny, 4 heads, {args.layers} + {args.layers} layers; batch {args.batch}, "
        f"source {args.src_len}, target {args.tgt_len}; forward + loss + backward, training mode; "
        f"{args.precision} on {device.type}; {args.rounds} rounds x {args.updates} updates"
        f"{'; Shaw by query (ByQuery)' if args.by_query else ''}"
    )
    print("\n| positions | aten ops per update | vs absolute | ms per update (median) | "
          "time ratio to absolute (median, range) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for variant in variants:
        ratios = [a / b for a, b in zip(ms[variant], ms[BASELINE])]
        print(
            f"| {variant} | {ops[variant]:,} | {ops[variant] - ops[BASELINE]:+,} | "
            f"{statistics.median(ms[variant]):.2f} | {statistics.median(ratios):.3f} "
            f"({min(ratios):.3f}-{max(ratios):.3f}) |"
        )


if __name__ == "__main__":
    main()
