"""Benchmark training throughput of position methods against the sinusoid, fp32 and bf16.

    .venv/bin/python scripts/bench_train.py [--rounds 5] [--steps 4] [--max-tokens 6500]
        [--precisions fp32 bf16] [--model transformer_small] [--device cpu] [--threads 2]
        [--variants relative absolute rope alibi t5 learned none] [--data multi30k_en_de]
        [--json PATH] [--profile] [--compile [layers|model]] [--by-query] [--arithmetic 1 2]

Each variant is a positions= group over the model preset (relative: relative_k16, Shaw k = 16 with
a^K + a^V, no sinusoid; absolute: the sinusoid alone; the others by their own names; the default
is relative and absolute). All train on the same batches of --data, a data= preset (Multi30k
En-De by default; data root $RPR_NMT_DATA, else ../shared/data), with the trainer's own update
step (Adam, label-smoothed loss, clipping), in interleaved rounds (A B C ... then ... C B A), so
that drift on a shared machine hits all alike.
Throughput counts non-padding source + target tokens per second of training updates. Peak memory
is each variant's own: 3 updates in a fresh process (the resident set's high-water mark on CPU).
Prints the host first (CPU capability, threads, the fp32 and bf16 matmul ceilings measured now),
then one Markdown table, a row per precision and variant: median tokens/s with the share of the
precision's matmul ceiling it reaches (training work per token counted by torch's FlopCounterMode
on one update: matmuls and attention, padding included; on the CPU the ceiling is measured again
after every round, a quarter of a second, and the share is the median of the per-round shares, so
that a host whose speed moves from minute to minute is compared with itself), the median of the
per-round time ratios variant / absolute (the sinusoid) with their range, and peak memory. --json
PATH writes the same figures as data, each row named as the reports name its setting
(rpr_nmt.report.labels), with the host, date and command: rpr-nmt-report adds them to a results
folder's table when the folder holds them as speed.json (the speed of each method measured in one
sitting, not in the sweep).
--compile wraps every variant's model as train.compile=true does (torch.compile, symbolic shapes;
each encoder and decoder layer, or with --compile model the whole model, as train.compile_scope)
and warms it up on every batch of the sitting first, so that no round times a compilation; each
variant's warm-up time is printed as it ends. After the rounds, one line per precision gives each
variant's median and fastest time per update over all rounds and the median of its per-update time
ratios to the baseline on the same batch: on a machine that stalls now and then (the GPU sittings),
these move least. --no-memory skips the peak-memory processes (with --compile, each compiles again).
--by-query computes Shaw's terms as the paper does (attention_kernels.ByQuery: matmuls batched over
the queries, no gather or scatter-add over the batch) on the benchmark's device, where gather and
scatter_add take them by default: the figures that decide attention_kernels.BY_QUERY_DEVICES.
--arithmetic 1 2 times each variant in each train.arithmetic (rpr_nmt/model/arithmetic.py) in the
same rounds, a twin named "VARIANT a2" beside it; each twin's ratios are to the baseline in its own
arithmetic ("absolute a2"), so that a method's cost over the sinusoid reads the same in either.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import date
from pathlib import Path
from typing import Any

import torch

from rpr_nmt.config import TrainJobConfig
from rpr_nmt.model import attention_kernels, resolve_device
from rpr_nmt.precision import PRECISIONS, host_summary, matmul_ceilings, matmul_gflops
from rpr_nmt.report.labels import method_label
from rpr_nmt.train.monitor import peak_memory_mb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runner import (  # noqa: E402
    BASELINE,
    CEILING_DTYPES,
    VARIANTS,
    Runner,
    fixed_batches,
    load_config,
)


def runner_name(variant: str, arithmetic: int) -> str:
    """A variant's name in the rounds and the table: "rope", or "rope a2" in arithmetic 2."""
    return variant if arithmetic == 1 else f"{variant} a{arithmetic}"


def bench_precision(
    configs, batches, vocab_size, pad_id, precision, device, rounds, steps, profile=False,
    compile=None, arithmetics=(1,),
):  # fmt: skip
    """Interleaved rounds of every variant (in each arithmetic) for one precision; returns a row
    per variant and arithmetic."""
    runners = {
        runner_name(v, a): Runner(c, vocab_size, pad_id, precision, device, compile, a)
        for v, c in configs.items()
        for a in arithmetics
    }
    which = {runner_name(v, a): (v, a) for v in configs for a in arithmetics}
    base = {v: runner_name(BASELINE, a) for v, (_, a) in which.items()}  # same arithmetic
    for variant, runner in runners.items():  # warm-up: allocator, kernels (compiled: every shape)
        start = time.perf_counter()
        runner.run(batches if compile else batches[:2])
        print(f"  {precision} warm-up {variant}: {time.perf_counter() - start:.1f} s", flush=True)
    work = {v: runners[v].flops_per_token(batches[0]) for v in runners}
    speed: dict[str, list[float]] = {v: [] for v in runners}
    ratios: dict[str, list[float]] = {v: [] for v in runners}
    updates: dict[str, list[float]] = {v: [] for v in runners}  # seconds per update
    shares: dict[str, list[float]] = {v: [] for v in runners}  # of the ceiling after each round
    dtype = CEILING_DTYPES.get(precision) if torch.device(device).type == "cpu" else None
    for r in range(rounds):
        chunk = [batches[(r * steps + i) % len(batches)] for i in range(steps)]
        order = list(runners) if r % 2 == 0 else list(reversed(runners))
        for variant in order:
            tokens, seconds = runners[variant].run(chunk)
            speed[variant].append(tokens / seconds)
        for variant in runners:  # time variant / time baseline, on the same batches
            ratios[variant].append(speed[base[variant]][-1] / speed[variant][-1])
        ceiling = ""
        if dtype is not None:  # the host's speed now, beside the round it times
            gflops = matmul_gflops(dtype, seconds=0.25)
            for variant in runners:
                shares[variant].append(speed[variant][-1] * work[variant] / (gflops * 1e9))
            ceiling = f" (ceiling {gflops:,.0f} GFLOP/s)"
        print(
            f"  {precision} round {r + 1}{ceiling}: "
            + ", ".join(f"{v} {speed[v][-1]:,.0f} tok/s ({ratios[v][-1]:.3f})" for v in runners),
            flush=True,
        )
        for variant in runners:
            updates[variant] += runners[variant].update_seconds
        if torch.device(device).type == "cuda":
            print(
                "    ms per update: "
                + "; ".join(
                    f"{v} " + " ".join(f"{t * 1e3:.0f}" for t in runners[v].update_seconds)
                    for v in runners
                ),
                flush=True,
            )
    if updates[BASELINE]:  # a stalled update (the machine's, not the model's) moves these least
        print(f"  {precision} per update over all rounds, median (fastest) ms; median ratio to "
              f"{BASELINE} (in the same arithmetic) on the same batch: " + "; ".join(
                  f"{v} {statistics.median(t) * 1e3:.1f} ({min(t) * 1e3:.1f}) "
                  f"{statistics.median(a / b for a, b in zip(t, updates[base[v]])):.3f}"
                  for v, t in updates.items()), flush=True)  # fmt: skip
    if torch.device(device).type == "cuda":  # cudaFree + retry when the cache runs out: a stall
        stats = torch.cuda.memory_stats()
        print(
            f"  {precision}: allocator retries {stats.get('num_alloc_retries', 0)}, reserved "
            f"{stats.get('reserved_bytes.all.peak', 0) / 2**30:.1f} GiB at peak",
            flush=True,
        )
    if profile:
        profile_updates(runners, batches[:steps], precision)
    return [
        {
            "precision": precision, "variant": which[v][0], "arithmetic": which[v][1], "name": v,
            "speed": statistics.median(speed[v]),
            "ratio": statistics.median(ratios[v]), "range": (min(ratios[v]), max(ratios[v])),
            "work": work[v], "share": statistics.median(shares[v]) if shares[v] else None,
        }
        for v in runners
    ]  # fmt: skip


def profile_updates(runners: dict[str, Runner], batches: list[Any], precision: str) -> None:
    """Where each variant's update time goes: torch.profiler over the given updates, the time the
    host spent dispatching (self CPU time of every op) against the time the device computed (self
    device time of every kernel), per update; then the baseline's costliest ops on the host.
    Host time includes what an op waits for the device (a copy to the host), so read it beside the
    table: an update whose dispatch alone exceeds its device time is bound by the host. On a GPU,
    each variant's costliest kernels follow (under --compile, inductor's fused kernels by name),
    so that what a method adds on the device can be read kernel by kernel."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if any(r.ctx.device.type == "cuda" for r in runners.values()):
        activities.append(ProfilerActivity.CUDA)
    print(f"  {precision} profile, {len(batches)} updates per variant (ms per update):", flush=True)
    for variant, runner in runners.items():
        with profile(activities=activities) as prof:
            _, seconds = runner.run(batches)
        events = prof.key_averages()
        host = sum(e.self_cpu_time_total for e in events) / 1e3 / len(batches)
        # Kernels only: an op's self device time is its kernels' time again (the profiler's own
        # "Self CUDA time total" counts kernels alone; the second H100 sitting summed both).
        kernels = [e for e in events if e.device_type != DeviceType.CPU]
        kernels = [e for e in kernels if not e.is_user_annotation]
        device = sum(e.self_device_time_total for e in kernels) / 1e3 / len(batches)
        print(
            f"    {variant}: wall {seconds * 1e3 / len(batches):.1f}, host ops {host:.1f}, "
            f"device kernels {device:.1f}",
            flush=True,
        )
        if variant == BASELINE:
            table = events.table(
                sort_by="self_cpu_time_total", row_limit=10, max_name_column_width=40
            )
            print(table, flush=True)
        if kernels:  # where each variant's device time goes, kernel by kernel (fused ones included)
            print(f"    {variant}: costliest kernels", flush=True)
            print(
                events.table(
                    sort_by="self_device_time_total", row_limit=15, max_name_column_width=60
                ),
                flush=True,
            )


def peak_in_fresh_process(
    args: argparse.Namespace, variant: str, precision: str, arithmetic: int = 1
) -> float:
    """Peak memory (MiB) of 3 updates of one variant in a process of its own."""
    command = [
        sys.executable, __file__, "--peak-of", variant, precision, "--model", args.model,
        "--max-tokens", str(args.max_tokens), "--device", args.device, "--data", args.data,
        "--threads", str(torch.get_num_threads()), "--arithmetic", str(arithmetic),
        *(["--compile", args.compile] if args.compile else []),
        *(["--by-query"] if args.by_query else []),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["peak"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="transformer_small")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4, help="updates per variant per round")
    parser.add_argument("--max-tokens", type=int, default=6500)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--variants", nargs="+", default=["relative", BASELINE], choices=VARIANTS)
    parser.add_argument("--data", default="multi30k_en_de", help="a data= preset (configs/data)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON to PATH")
    parser.add_argument(
        "--profile", action="store_true",
        help="after the rounds, profile one round of each variant: host vs device time per update",
    )  # fmt: skip
    parser.add_argument(
        "--compile", nargs="?", const="layers", choices=["layers", "model"],
        help="torch.compile every variant as train.compile=true does, its layers (the default) "
        "or the whole model (warmed up on every batch)",
    )  # fmt: skip
    parser.add_argument(
        "--no-memory", action="store_true",
        help="skip the peak-memory processes (with --compile each compiles the model again)",
    )  # fmt: skip
    parser.add_argument(
        "--by-query", action="store_true",
        help="Shaw's terms as the paper computes them (attention_kernels.ByQuery) on --device",
    )  # fmt: skip
    parser.add_argument(
        "--arithmetic", nargs="+", type=int, default=[1], choices=[1, 2],
        help="time each variant in each of these train.arithmetic values, side by side",
    )  # fmt: skip
    parser.add_argument(
        "--peak-of", nargs=2, metavar=("VARIANT", "PRECISION"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    for name in ("rounds", "steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: time at least one")
    if unknown := [p for p in args.precisions if p not in PRECISIONS or p == "auto"]:
        parser.error(f"--precisions {' '.join(unknown)}: use fp32, bf16 or fp16 (CUDA)")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    if args.by_query:
        attention_kernels.BY_QUERY_DEVICES = (device.type,)
    if args.peak_of:
        variant, precision = args.peak_of
        config = load_config(args.model, args.max_tokens, variant, args.data)
        batches, vocab_size, pad_id = fixed_batches(config, 3)
        arithmetic = args.arithmetic[0]
        Runner(config, vocab_size, pad_id, precision, device, args.compile, arithmetic).run(batches)
        print(json.dumps({"peak": peak_memory_mb(device)}))
        return
    variants = list(dict.fromkeys([*args.variants, BASELINE]))  # the baseline always runs
    configs = {v: load_config(args.model, args.max_tokens, v, args.data) for v in variants}
    ceilings = matmul_ceilings()
    print(host_summary(ceilings), flush=True)
    config = configs[BASELINE]
    batches, vocab_size, pad_id = fixed_batches(config, max(args.rounds * args.steps, 2))
    per_batch = statistics.mean(b.n_src_tokens + b.n_tgt_tokens for b in batches)
    print(
        f"{args.model} on {args.data}, {device}, {torch.get_num_threads()} threads, "
        f"max_tokens {args.max_tokens} ({per_batch:,.0f} non-pad src+tgt tokens per batch), "
        f"{args.rounds} rounds x {args.steps} updates, "
        f"{f'compiled (torch.compile, {args.compile}), ' if args.compile else ''}"
        f"{'Shaw by query (ByQuery), ' if args.by_query else ''}MALLOC_MMAP_MAX_="
        f"{os.environ.get('MALLOC_MMAP_MAX_', 'unset')}",
        flush=True,
    )
    rows = [
        row
        for p in args.precisions
        for row in bench_precision(
            configs,
            batches,
            vocab_size,
            pad_id,
            p,
            device,
            args.rounds,
            args.steps,
            args.profile,
            args.compile,
            sorted(set(args.arithmetic)),
        )
    ]
    for row in rows:
        row["memory"] = None
        if not args.no_memory:
            row["memory"] = peak_in_fresh_process(
                args, row["variant"], row["precision"], row["arithmetic"]
            )
    print(f"\n{date.today()} | {platform.machine()} | torch {torch.__version__}")
    print(f"{host_summary(ceilings)}\n")
    print(
        "| precision | positions | src+tgt tok/s (ceiling share) | MFLOP per token | "
        f"time ratio to {BASELINE} (range) | peak memory |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        low, high = row["range"]
        share = "" if row["share"] is None else f" ({row['share']:.0%})"
        print(
            f"| {row['precision']} | {row['name']} | {row['speed']:,.0f}{share} | "
            f"{row['work'] / 1e6:.1f} | {row['ratio']:.3f} ({low:.3f}-{high:.3f}) | "
            + ("not measured |" if row["memory"] is None else f"{row['memory']:,.0f} MiB |")
        )
    if args.json:
        write_json(args.json, rows, configs, ceilings, host_summary(ceilings), args.compile)


def write_json(
    path: Path,
    rows: list[dict[str, Any]],
    configs: dict[str, TrainJobConfig],
    ceilings: dict[str, float],
    host: str,
    compiled: str | None,
) -> None:
    """The sitting's figures as data: one record per precision and variant, named by its label;
    compiled: what of the variants ran under torch.compile (--compile: layers or model), or None."""
    records = [
        {
            "label": method_label(asdict(configs[row["variant"]].model)),
            "positions": VARIANTS[row["variant"]],
            "precision": row["precision"],
            "arithmetic": row["arithmetic"],
            "tokens_per_sec": round(row["speed"], 1),
            "time_ratio_to_sinusoid": round(row["ratio"], 4),
            "time_ratio_range": [round(x, 4) for x in row["range"]],
            "mflop_per_token": round(row["work"] / 1e6, 2),
            "ceiling_share": None if row["share"] is None else round(row["share"], 4),
            "peak_memory_mib": None if row["memory"] is None else round(row["memory"], 1),
        }
        for row in rows
    ]
    sitting = {
        "command": "python " + " ".join(["scripts/bench_train.py", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": host,
        "ceilings_gflops": {k: round(v, 1) for k, v in ceilings.items()},
        "torch": torch.__version__,
        "compiled": compiled,
        "rows": records,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sitting, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
