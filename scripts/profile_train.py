"""Where a training update spends its time: torch.profiler over the trainer's step, by kind of work.

    .venv/bin/python scripts/profile_train.py [--precision fp32] [--variants relative absolute]
        [--arithmetic 1] [--steps 4] [--max-tokens 6500] [--model transformer_small] [--threads 2]
        [--top 15]

Each variant (a positions= group, as in scripts/bench_train.py) trains the same Multi30k En-De
batches with the same update step as bench_train.py; after two warm-up updates, --steps updates run
under torch.profiler. Every operator's self time (time in the operator itself, not in what it
calls) is put in one kind of work:

    matmuls        mm, addmm, bmm, baddbmm (the linear layers, the output layer, Shaw's thin terms)
    SDPA           the fused attention kernel and its backward (methods whose attention has no bias)
    softmax        softmax and its backward outside SDPA (our attention path)
    loss           the label-smoothed loss's blocks (log-sum-exp, exp, its float32 blocks)
    layer norm     layer norm forward and backward
    dropout        the random bits of our dropout, torch's Bernoulli draws (attention dropout)
    optimizer      everything under Optimizer.step (Adam), and the gradient norm and clipping
    dtype copies   copy_, to, _to_copy outside the loss (autocast's casts, dropout masks to float)
    elementwise    add, mul, div, gelu/relu, and the like
    indexing       embedding, gather, index_select, scatter and their backwards (position gathers)
    other          the rest, named

Prints the host, then per variant the share of the profiled time in each kind and the top operators
by self time, then (with two variants or more) each kind's time per update against the first
variant's: the difference is what the variant's position method costs, and where. Times are of the
profiled run, and the profiler slows memory-bound operators several times over (the loss's blocks
show at 13% of an fp32 update under it, 3.4% timed without it: docs/performance.md): take speed from
bench_train.py, read a memory-bound kind as an upper bound, and profile on an idle machine.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runner import VARIANTS, Runner, fixed_batches, load_config  # noqa: E402

from rpr_nmt.model import resolve_device  # noqa: E402
from rpr_nmt.precision import host_summary, matmul_ceilings  # noqa: E402

# Kind of work -> operator names (without "aten::"); checked in this order, first match wins.
KINDS: dict[str, tuple[str, ...]] = {
    "matmuls": ("mm", "addmm", "bmm", "baddbmm"),
    "SDPA": ("_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_flash_attention_for_cpu_backward"),
    "softmax": ("_softmax", "_softmax_backward_data"),
    "layer norm": ("native_layer_norm", "native_layer_norm_backward"),
    "dropout": ("random_", "bernoulli_"),
    "optimizer": ("linalg_vector_norm", "_foreach_norm", "_foreach_mul_"),  # + Optimizer.step
    "dtype copies": ("copy_", "to", "_to_copy"),
    "elementwise": ("add", "add_", "mul", "mul_", "div", "div_", "sub", "sub_", "relu", "gelu",
                    "threshold_backward", "gelu_backward", "neg", "sqrt", "rsqrt", "pow", "where",
                    "clamp", "fill_", "zero_", "masked_fill", "masked_fill_", "sum", "mean",
                    "addcmul_", "addcdiv_", "lerp_", "cat", "stack", "rsub"),
    "indexing": ("embedding", "embedding_dense_backward", "embedding_backward", "gather",
                 "index_select", "index_add_", "scatter", "scatter_add_", "index", "index_put_",
                 "_index_put_impl_", "gather_backward", "scatter_add"),
}  # fmt: skip
# Profiler scopes that take every non-matmul operator under them, first the stronger.
SCOPES = {
    "optimizer": "Optimizer.step",  # torch.optim's own profiler scope
    "loss": "_SmoothedCrossEntropy",  # rpr_nmt/train/loss.py's autograd function
}


def kind_of(name: str, scope: str) -> str:
    """The kind of work of an operator (module docstring); `scope` is "loss" or "optimizer" when
    it runs under one, else ""."""
    op = name.removeprefix("aten::")
    if scope and op not in KINDS["matmuls"]:
        return scope
    for kind, ops in KINDS.items():
        if op in ops:
            return kind
    return "other"


def scope_of(event) -> str:
    """ "optimizer" or "loss" when `event` runs under that profiler scope (the optimizer's when
    under both), else ""."""
    scopes, parent = set(), event.cpu_parent
    while parent is not None:
        scopes |= {scope for scope, name in SCOPES.items() if name in parent.name}
        parent = parent.cpu_parent
    return next((scope for scope in SCOPES if scope in scopes), "")


def profile_variant(runner: Runner, batches: list, steps: int) -> tuple[dict, dict, float]:
    """Self time in microseconds by kind and by operator over `steps` updates, and the wall time."""
    runner.run(batches[:2])  # warm-up outside the profile
    chunk = batches[2 : 2 + steps]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        _, seconds = runner.run(chunk)
    by_kind: dict[str, float] = defaultdict(float)
    by_op: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if not event.name.startswith("aten::") or event.self_cpu_time_total <= 0:
            continue
        kind = kind_of(event.name, scope_of(event))
        by_kind[kind] += event.self_cpu_time_total
        by_op[f"{event.name} ({kind})"] += event.self_cpu_time_total
    return by_kind, by_op, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="transformer_small")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--variants", nargs="+", default=["relative", "absolute"], choices=VARIANTS)
    parser.add_argument("--steps", type=int, default=4, help="profiled updates per variant")
    parser.add_argument("--max-tokens", type=int, default=6500)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--top", type=int, default=15, help="operators listed per variant")
    parser.add_argument(
        "--arithmetic", type=int, default=1, choices=(1, 2), help="train.arithmetic"
    )
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: profile at least one update")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device("cpu")
    print(host_summary(matmul_ceilings()), flush=True)

    configs = {v: load_config(args.model, args.max_tokens, v) for v in args.variants}
    first = configs[args.variants[0]]
    batches, vocab_size, pad_id = fixed_batches(first, 2 + args.steps)
    print(
        f"{args.model}, {args.precision} (arithmetic {args.arithmetic}), "
        f"{torch.get_num_threads()} threads, max_tokens "
        f"{args.max_tokens}, {args.steps} profiled updates per variant\n"
    )
    kinds_of: dict[str, dict[str, float]] = {}
    for variant in args.variants:
        runner = Runner(
            configs[variant], vocab_size, pad_id, args.precision, device, arithmetic=args.arithmetic
        )
        by_kind, by_op, seconds = profile_variant(runner, batches, args.steps)
        kinds_of[variant] = by_kind
        total = sum(by_kind.values())
        print(f"## {variant}: {seconds / args.steps * 1e3:,.0f} ms per update (profiled)\n")
        print("| kind | ms per update | share |\n|---|---|---|")
        for kind, us in sorted(by_kind.items(), key=lambda kv: -kv[1]):
            print(f"| {kind} | {us / args.steps / 1e3:,.1f} | {us / total:.1%} |")
        print(f"\nTop {args.top} operators by self time:\n")
        print("| operator (kind) | ms per update | share |\n|---|---|---|")
        for op, us in sorted(by_op.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"| {op} | {us / args.steps / 1e3:,.1f} | {us / total:.1%} |")
        print()
    if len(args.variants) > 1:
        base = args.variants[0]
        kinds = sorted({k for by_kind in kinds_of.values() for k in by_kind})
        print(f"## ms per update by kind, each variant against {base}\n")
        print("| kind | " + " | ".join(args.variants) + " |")
        print("|---|" + "---|" * len(args.variants))
        for kind in kinds:
            cells = [f"{kinds_of[v].get(kind, 0.0) / args.steps / 1e3:,.1f}" for v in args.variants]
            print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
