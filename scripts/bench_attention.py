"""Benchmark relative attention: forward + backward time and peak memory.

Part 1, the attention core over n = 32 .. 2048 (H = 8, Dh = 64, k = 16, one table shared across
heads, about 4096 tokens per batch: B = max(1, 4096 // n)):
    none          plain attention (scaled_dot_product_attention)
    aK            a^K only: gather q . w^K^T
    aK+aV         a^K and a^V: gather, and bucket-sum alpha then multiply by w^V
    materialised  the paper's section 3.3 method: (n, n, Dh) tensors of gathered table rows
                  (defined only in attention_steps.py, as the baseline)
Part 2, every position method's self-attention over the same n (encoder: bidirectional, no
padding), each as the model runs it, the method's own term built inside the step:
    plain         the sinusoid, learned table and none: position never enters attention (SDPA)
    rope          queries and keys rotated (positions/rope.py), then SDPA
    alibi         a fixed bias (H, n, n) as SDPA's float mask
    t5            a learned bias (H, n, n) on relative_attention's own path (the model's choice)
    t5 via SDPA   the same bias as SDPA's float mask with gradients (the alternative measured)
    shaw          k = 16, a^K + a^V, per-head tables (part 1's aK+aV with the model's tables)
    ... by gather / ... per diagonal   on CUDA only: t5 and shaw in each of their two forms at every
                  n, gather / scatter-add (the CPU's) and attention_kernels.Diagonals, where the
                  model takes the second only above DIAGONALS_ABOVE queries
    shaw by query on CUDA only, up to n = BY_QUERY_MAX_N: attention_kernels.ByQuery, the paper's
                  form (its (H, n, n, Dh) rows of pairs outgrow memory beyond)
Part 3, a whole encoder layer (D 512, 8 heads, d_ff 2048, dropout 0.1, pre-norm, about 4096 tokens
per batch: B = 4096 // n) at each n of --layer-n (default 64), without relative terms and with them
(k = 16, a^K + a^V, per-head tables) in each form of Shaw's terms, by gather, per diagonal and by
query, and with T5's bias by gather and per diagonal (built in each step, as a stack builds it once
per forward for all its layers: one layer is a stack of one), on any device; the model's own
choice at that n is named below the table. Timed in interleaved rounds (A B C D, D C B A, ...); the
figure is the median of per-round time ratios (the host is shared and drifts). On CUDA, --layer-n
64,128,192,256 times DIAGONALS_ABOVE inside a layer.

Peak memory: on CUDA, torch.cuda.max_memory_allocated above the memory held before the call. On CPU,
each (method, n) runs once in a fresh subprocess: the growth of the process's peak resident set
(VmHWM, reset through /proc/self/clear_refs) over its resident set before the call, so it counts
every byte the forward + backward touched, including allocator overhead (glibc, default settings).

Usage:
    python scripts/bench_attention.py [--device cpu|cuda] [--dtype float32|bfloat16] [--quick]
        [--skip-core] [--skip-positions] [--skip-layer] [--layer-n 64,128,256]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rpr_nmt.model import attention_kernels  # noqa: E402
from rpr_nmt.model.layers import EncoderLayer  # noqa: E402
from rpr_nmt.model.multihead import RelativePositions  # noqa: E402
from rpr_nmt.model.positions.t5 import T5Bias  # noqa: E402
from rpr_nmt.model.positions.terms import PositionTerms  # noqa: E402
from rpr_nmt.precision import host_summary, matmul_ceilings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_steps import (  # noqa: E402
    BY_FORM,
    BY_QUERY_MAX_N,
    DH,
    FORMS,
    METHODS,
    POSITION_METHODS,
    TOKENS,
    H,
    K,
    PositionStep,
    core_inputs,
    core_step,
    form_the_model_takes,
    relative_form,
)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, repeats=1):
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    sync(device)
    return (time.perf_counter() - start) / repeats


def _proc_kib(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def measure_peak_here(method, n, device, dtype):
    """Peak extra bytes of one forward + backward, measured in this process."""
    warm_leaves, warm_grad = core_inputs(8, device, dtype)
    step = (
        (lambda x, g: core_step(method, x, g))
        if method in METHODS
        else PositionStep(method, device, dtype)
    )
    step(warm_leaves, warm_grad)  # one-time library set-up is not the method's memory
    leaves, grad = core_inputs(n, device, dtype)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        step(leaves, grad)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - before
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current resident set
    before = _proc_kib("VmRSS")
    step(leaves, grad)
    return (_proc_kib("VmHWM") - before) * 1024


def measure_peak(method, n, args):
    if args.device == "cuda":
        return measure_peak_here(method, n, torch.device("cuda"), getattr(torch, args.dtype))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    cmd = [sys.executable, __file__, "--peak-of", method, str(n), "--dtype", args.dtype]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["peak"]


def bench_sizes(args, device, dtype, *, baseline, methods_at, steps_for, alternate) -> None:
    """One table row per n and method: median time over interleaved rounds, then each method's
    peak in a fresh process (measure_peak), both against `baseline`'s.

    Args:
        baseline: the method the x and extra-peak columns divide by.
        methods_at: n -> the methods timed at that n.
        steps_for: the methods -> {method: step(leaves, grad)}, one forward + backward.
        alternate: reverse the order every other round (A B C, C B A, ...).
    """
    print(f"| n | B | method | time ms | x {baseline} | peak MiB | extra peak over {baseline} MiB",
          "|")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for n in [2**p for p in range(5, args.max_n.bit_length()) if 2**p <= args.max_n]:
        leaves, grad = core_inputs(n, device, dtype)
        methods = methods_at(n)
        steps = steps_for(methods)
        times = {m: [] for m in methods}
        for m in methods:  # warm-up
            steps[m](leaves, grad)
        repeats = max(1, 256 // n) if not args.quick else 1
        for r in range(args.rounds):
            order = methods[::-1] if alternate and r % 2 else methods
            for m in order:
                step = lambda s=steps[m], x=leaves, g=grad: s(x, g)  # noqa: E731
                times[m].append(timed(step, device, repeats))
        leaves = grad = steps = None  # free them before the memory runs
        peaks = {m: measure_peak(m, n, args) for m in methods}
        base_t, base_p = statistics.median(times[baseline]), peaks[baseline]
        for m in methods:
            t = statistics.median(times[m])
            row = [n, max(1, TOKENS // n), m, f"{t * 1e3:.2f}", f"{t / base_t:.2f}"]
            row += [f"{peaks[m] / 2**20:.0f}", f"{(peaks[m] - base_p) / 2**20:+.0f}"]
            print("| " + " | ".join(map(str, row)) + " |", flush=True)


def bench_core(args, device, dtype):
    print(
        f"\n## Attention core, forward + backward (H {H}, Dh {DH}, k {K}, ~{TOKENS} tokens/batch)"
    )
    bench_sizes(
        args, device, dtype, baseline="none", alternate=False,
        methods_at=lambda n: [
            m for m in METHODS if m != "materialised" or n <= args.max_materialised_n
        ],
        steps_for=lambda methods: {
            m: (lambda x, g, m=m: core_step(m, x, g)) for m in methods
        },
    )  # fmt: skip


def by_form(n: int) -> list[str]:
    """Part 2's methods in a form of their terms at n (CUDA): FORMS' first two, shaw by query."""
    return BY_FORM + (["shaw by query"] if n <= BY_QUERY_MAX_N else [])


def bench_positions(args, device, dtype):
    print(
        f"\n## Every position method's self-attention, forward + backward (H {H}, Dh {DH}, "
        f"~{TOKENS} tokens/batch, bidirectional, the method's term built in each step)"
    )
    bench_sizes(
        args, device, dtype, baseline="plain", alternate=True,
        methods_at=lambda n: POSITION_METHODS + (by_form(n) if device.type == "cuda" else []),
        steps_for=lambda methods: {m: PositionStep(m, device, dtype) for m in methods},
    )  # fmt: skip


def bench_layer(args, device, dtype):
    for n in args.layer_n:
        bench_layer_at(n, args, device, dtype)


def bench_layer_at(n: int, args, device, dtype):
    torch.manual_seed(0)
    B = max(1, TOKENS // n)
    sizes = dict(d_model=512, n_heads=8, d_ff=2048, dropout=0.1, attention_dropout=0.1)
    relative = EncoderLayer(**sizes, relative=RelativePositions(k=K))
    plain = EncoderLayer(**sizes, relative=RelativePositions(k=0))
    layers = {"none": plain}
    for form in FORMS:  # the same layer with its terms in each form
        layers["aK+aV" + form] = relative
    for form in FORMS[:2]:  # the plain layer with T5's bias, built in each form
        layers["t5" + form] = plain
    t5 = T5Bias(n_heads=8, num_buckets=32, max_distance=128, bidirectional=True)
    for module in [*layers.values(), t5]:
        module.to(device, dtype).train()
    x = torch.randn(B, n, 512, device=device, dtype=dtype)

    def step(name):
        with relative_form(name):
            terms = PositionTerms(bias=t5.bias(n, n, 0, device)) if name.startswith("t5") else None
            layers[name](x, terms=terms).square().mean().backward()
        for p in [*layers[name].parameters(), *t5.parameters()]:
            p.grad = None

    for name in layers:
        step(name)
    rounds = 5 if args.quick else args.layer_rounds
    times = {name: [] for name in layers}
    for r in range(rounds):
        order = list(layers) if r % 2 == 0 else list(reversed(layers))  # A B, B A, ...
        for name in order:
            times[name].append(timed(lambda name=name: step(name), device, repeats=3))
    print(f"\n## Encoder layer (D 512, 8 heads, d_ff 2048, B {B}, n {n}), forward + backward")
    print(f"interleaved rounds: {rounds} (3 steps each)")
    print("| layer | median ms |")
    print("|---|---|")
    for name in layers:
        print(f"| {name} | {statistics.median(times[name]) * 1e3:.1f} |")
    t5_form = "per diagonal" if attention_kernels.diagonals_apply(device, n) else "by gather"
    shaw_form = form_the_model_takes(device, n)
    print(f"the model takes Shaw's terms {shaw_form}, T5's bias {t5_form} here")
    for name in [name for name in layers if name != "none"]:
        ratios = [a / b for a, b in zip(times[name], times["none"])]
        quartiles = statistics.quantiles(ratios, n=4)
        print(
            f"median per-round ratio {name} / none: {statistics.median(ratios):.3f} "
            f"(quartiles {quartiles[0]:.3f} .. {quartiles[2]:.3f})"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--quick", action="store_true", help="n <= 512, few rounds")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per n")
    parser.add_argument("--layer-rounds", type=int, default=21)
    parser.add_argument(
        "--layer-n", type=lambda s: [int(n) for n in s.split(",")], default=[64],
        help="part 3's sequence lengths, comma-separated (B = 4096 // n)",
    )  # fmt: skip
    parser.add_argument("--max-n", type=int, default=2048)
    parser.add_argument("--max-materialised-n", type=int, default=2048)
    parser.add_argument("--skip-core", action="store_true")
    parser.add_argument("--skip-positions", action="store_true")
    parser.add_argument("--skip-layer", action="store_true")
    parser.add_argument("--peak-of", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    for option, rounds in (("--rounds", args.rounds), ("--layer-rounds", args.layer_rounds)):
        if rounds < 1:
            parser.error(f"{option} {rounds}: time at least one round")
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    if args.peak_of:
        peak = measure_peak_here(args.peak_of[0], int(args.peak_of[1]), device, dtype)
        print(json.dumps({"peak": peak}))
        return
    if args.quick:
        args.max_n, args.rounds = min(args.max_n, 512), 2
    print(f"torch {torch.__version__}, device {device}, dtype {args.dtype}, "
          f"threads {torch.get_num_threads()}, {time.strftime('%Y-%m-%d %H:%M')}")  # fmt: skip
    print(host_summary(matmul_ceilings()), flush=True)
    if not args.skip_core:
        bench_core(args, device, dtype)
    if not args.skip_positions:
        bench_positions(args, device, dtype)
    if not args.skip_layer:
        bench_layer(args, device, dtype)


if __name__ == "__main__":
    main()
