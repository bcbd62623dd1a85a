"""How fast the CPU runs the matrix products of one training update, shape by shape, against the
1024^3 matmul that the benchmarks call the ceiling.

    .venv/bin/python scripts/bench_gemm_shapes.py [--precision bf16] [--variant absolute]
        [--max-tokens 6500] [--model transformer_small] [--threads 2] [--rounds 5]

One update of the trainer's step (bench_train.py's Runner, the same Multi30k En-De batch) runs
under torch.profiler with its input shapes recorded; every mm, addmm and bmm it calls is listed by
shape with how often the update calls it. Each distinct shape is then timed alone in the
precision's dtype, in rounds that also time the 1024^3 product and whole updates, so that a host
whose speed moves is compared with itself round by round. Prints, per shape, its calls and GFLOP
per update, GFLOP/s alone and as a share of the 1024^3 product's in the same round (median over
rounds); then the bound that follows: an update made of its matrix products alone, each at its own
speed, reaches this share of the 1024^3 ceiling, and no change outside the products can take an
update above it. Last, the update against that real-shape ceiling: the time its products take
alone over the time of the whole update (the median of --updates updates, timed in the same
round), so the share of the update that is matrix products at their own speed, and the rest, what
everything else costs (scripts/profile_train.py says what that is).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runner import CEILING_DTYPES, Runner, one_update_runner, update_parser  # noqa: E402

from rpr_nmt.precision import matmul_gflops  # noqa: E402

OPS = ("aten::mm", "aten::addmm", "aten::bmm")
Shape = tuple[str, tuple[int, ...], tuple[int, ...]]  # op, first operand, second operand


def operands(name: str, shapes: list[list[int]]) -> Shape | None:
    """The two multiplied operands of a recorded mm / addmm / bmm call (addmm: after the bias)."""
    a, b = (shapes[1], shapes[2]) if name == "aten::addmm" else (shapes[0], shapes[1])
    if not a or not b:
        return None
    return name.removeprefix("aten::"), tuple(a), tuple(b)


def flops(shape: Shape) -> int:
    """2 M K N (times the batch of a bmm)."""
    _, a, b = shape
    batch = a[0] if len(a) == 3 else 1
    return 2 * batch * a[-2] * a[-1] * b[-1]


def update_products(runner: Runner, batch) -> Counter[Shape]:
    """Every matrix product of one update of `batch`, by shape, with its number of calls."""
    runner.run([batch])  # warm-up outside the profile
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        runner.run([batch])
    calls: Counter[Shape] = Counter()
    for event in prof.events():
        if event.name in OPS:
            shape = operands(event.name, event.input_shapes)
            if shape is not None:
                calls[shape] += 1
    return calls


def seconds_per_call(shape: Shape, dtype: torch.dtype, budget: float = 0.1) -> float:
    """Median time of the product alone, over about `budget` seconds of calls."""
    op, a_shape, b_shape = shape
    a, b = torch.randn(a_shape).to(dtype), torch.randn(b_shape).to(dtype)
    fn = torch.bmm if op == "bmm" else torch.mm
    fn(a, b)
    times: list[float] = []
    spent = 0.0
    while spent < budget or len(times) < 3:
        start = time.perf_counter()
        fn(a, b)
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return statistics.median(times)


def main() -> None:
    parser = update_parser(
        __doc__.split("\n")[0], variant="absolute", arithmetic=1, rounds=5,
        updates_help="whole updates timed per round",
    )  # fmt: skip
    args, runner, batch = one_update_runner(parser)
    calls = update_products(runner, batch)
    dtype = CEILING_DTYPES[args.precision]
    work = sum(n * flops(s) for s, n in calls.items())
    rates: dict[Shape, list[float]] = {s: [] for s in calls}  # GFLOP/s alone, per round
    shares: dict[Shape, list[float]] = {s: [] for s in calls}  # of the 1024^3 product's
    bounds: list[float] = []  # the update's products at their own speeds, share of 1024^3
    in_update: list[float] = []  # the products' time alone over the whole update's, per round
    for r in range(args.rounds):
        ceiling = matmul_gflops(dtype, seconds=0.1)  # the 1024^3 product, now
        seconds = 0.0
        for shape in calls:
            t = seconds_per_call(shape, dtype)
            rates[shape].append(flops(shape) / t / 1e9)
            shares[shape].append(rates[shape][-1] / ceiling)
            seconds += calls[shape] * t
        bounds.append(work / seconds / 1e9 / ceiling)
        runner.run([batch] * args.updates)
        update = statistics.median(runner.update_seconds)
        in_update.append(seconds / update)
        print(f"  round {r + 1}: 1024^3 {ceiling:,.0f} GFLOP/s, the update's products alone "
              f"{work / seconds / 1e9:,.0f} GFLOP/s ({bounds[-1]:.0%}); {seconds * 1e3:,.0f} ms "
              f"of products alone in an update of {update * 1e3:,.0f} ms ({in_update[-1]:.0%})",
              flush=True)  # fmt: skip
    tokens = batch.n_src_tokens + batch.n_tgt_tokens
    print(
        f"\n{args.model}, {args.variant}, {args.precision}, {torch.get_num_threads()} threads, "
        f"one update of {tokens:,} non-pad src+tgt tokens: {sum(calls.values())} products, "
        f"{work / 1e9:,.1f} GFLOP ({work / tokens / 1e6:.1f} MFLOP per token); "
        f"{args.rounds} rounds\n"
    )
    print("| op | operands | calls | GFLOP per update | GFLOP/s alone | share of 1024^3 |")
    print("|---|---|---|---|---|---|")
    for shape, n in sorted(calls.items(), key=lambda kv: -kv[1] * flops(kv[0])):
        op, a, b = shape
        print(
            f"| {op} | {'x'.join(map(str, a))} @ {'x'.join(map(str, b))} | {n} | "
            f"{n * flops(shape) / 1e9:.2f} | {statistics.median(rates[shape]):,.0f} | "
            f"{statistics.median(shares[shape]):.0%} |"
        )
    print(
        f"\nAn update of these products alone, each at its own speed: "
        f"{statistics.median(bounds):.0%} of the 1024^3 ceiling (median over rounds; "
        f"{min(bounds):.0%}-{max(bounds):.0%}). Nothing outside the products can take the update "
        "above it."
    )
    share = statistics.median(in_update)
    print(
        f"The update against that real-shape ceiling: its products alone take {share:.0%} of its "
        f"time (median over rounds; {min(in_update):.0%}-{max(in_update):.0%}); the other "
        f"{1 - share:.0%} is everything else: the products' own slowdown inside the update and "
        "the work around them (scripts/profile_train.py)."
    )


if __name__ == "__main__":
    main()
