"""Why the matrix products of a training update run slower inside the update than alone: each
product timed where the update calls it, then replayed alone with the same operand layout, hot and
with a cold cache, and with contiguous operands.

    .venv/bin/python scripts/bench_products_in_place.py [--precision bf16] [--variant relative]
        [--arithmetic 2] [--max-tokens 6500] [--threads 2] [--updates 3] [--rounds 3]

scripts/bench_gemm_shapes.py times each product alone on fresh contiguous operands; on the AMX
host of 2026-12-05 those times summed to 136 ms of an update of about 670 ms, while the profiler
charged the products 320 ms inside the update. This script splits that gap. A dispatch mode sees
every aten mm / addmm / bmm the update calls (after autocast's casts, so in the dtype that runs)
and times each call with its operands' shapes and strides (CPU products are synchronous). Each
distinct (op, shapes, strides) is then replayed alone, four ways:

- in place: its median time inside the update;
- same layout, cold: alone, operands with the update's strides, after a buffer larger than the
  caches has been written (as in the update, where the operands come from memory);
- same layout, hot: alone, the same operands called again and again;
- contiguous, hot: alone, on contiguous operands of the same shapes (bench_gemm_shapes.py's way);
- copied, hot: alone, each strided operand copied contiguous, then the product, the copy timed
  (what making the operands contiguous where the update calls the product would cost).

So in place - cold is what the update's context costs beyond memory (the core's state, the
threads), cold - hot what fetching the operands from memory costs, hot - contiguous what the
layout costs. Prints a table by product and the totals per update, median over rounds.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_runner import one_update_runner, update_parser  # noqa: E402

PRODUCTS = {
    torch.ops.aten.mm.default: "mm",
    torch.ops.aten.addmm.default: "addmm",
    torch.ops.aten.bmm.default: "bmm",
}
# (op, dtype, ((shape, stride) of each tensor argument))
Key = tuple[str, torch.dtype, tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]]


class ProductTimer(TorchDispatchMode):
    """Times every mm / addmm / bmm called under it, by operator, dtype, shapes and strides."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: dict[Key, list[float]] = defaultdict(list)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = PRODUCTS.get(func)
        if name is None:
            return func(*args, **kwargs)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        key = (name, tensors[-1].dtype, tuple((tuple(t.shape), t.stride()) for t in tensors))
        start = time.perf_counter()
        out = func(*args, **kwargs)
        self.seconds[key].append(time.perf_counter() - start)
        return out


def operands(key: Key, contiguous: bool) -> list[torch.Tensor]:
    """Random operands of the key's shapes, with its strides unless contiguous."""
    _, dtype, layout = key
    made = []
    for shape, stride in layout:
        if contiguous:
            made.append(torch.randn(shape).to(dtype))
        else:
            t = torch.empty_strided(shape, stride, dtype=dtype)
            t.copy_(torch.randn(shape))
            made.append(t)
    return made


def replay(
    key: Key, contiguous: bool, flush: torch.Tensor | None, calls: int = 7, copy: bool = False
) -> float:
    """Median seconds of the product alone; `flush` (if given) is written before each call; with
    `copy`, each operand that is not contiguous is copied contiguous first, inside the time."""
    fn = {"mm": torch.mm, "addmm": torch.addmm, "bmm": torch.bmm}[key[0]]
    args = operands(key, contiguous)

    def call() -> None:
        fn(*[a.contiguous() for a in args] if copy else args)

    call()
    times = []
    for _ in range(calls):
        if flush is not None:
            flush.add_(1.0)
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def describe(key: Key) -> str:
    """'addmm 6496x256 @ 256x256^T' style: operand shapes, ^T where an operand is transposed, ~
    where it is strided otherwise (a view into a larger tensor)."""
    op, _, layout = key
    shown = layout[1:] if op == "addmm" else layout
    parts = []
    for shape, stride in shown:
        transposed = len(shape) >= 2 and stride[-1] != 1 and stride[-2] == 1
        contiguous = torch.empty(shape).stride() == stride
        mark = "^T" if transposed else "" if contiguous else "~"
        parts.append("x".join(map(str, shape)) + mark)
    return f"{op} {' @ '.join(parts)}"


def main() -> None:
    parser = update_parser(
        __doc__.split("\n")[0], variant="relative", arithmetic=2, rounds=3,
        updates_help="updates timed in place per round",
    )  # fmt: skip
    parser.add_argument("--flush-mib", type=int, default=256, help="written before a cold call")
    args, runner, batch = one_update_runner(parser)
    flush = torch.zeros(args.flush_mib * 2**18)  # float32: 4 bytes each
    runner.run([batch])  # warm-up
    ways = ("in place", "same layout, cold", "same layout, hot", "contiguous, hot", "copied, hot")
    per_call: dict[Key, dict[str, list[float]]] = {}
    totals: dict[str, list[float]] = {w: [] for w in ways}
    updates: list[float] = []
    for r in range(args.rounds):
        timer = ProductTimer()
        with timer:
            runner.run([batch] * args.updates)
        updates.append(statistics.median(runner.update_seconds))
        calls = {k: len(v) // args.updates for k, v in timer.seconds.items()}
        round_total = dict.fromkeys(ways, 0.0)
        for key, times in timer.seconds.items():
            row = per_call.setdefault(key, {w: [] for w in ways})
            row["in place"].append(statistics.median(times))
            row["same layout, cold"].append(replay(key, False, flush))
            row["same layout, hot"].append(replay(key, False, None))
            row["contiguous, hot"].append(replay(key, True, None))
            row["copied, hot"].append(replay(key, False, None, copy=True))
            for w in ways:
                round_total[w] += calls[key] * row[w][-1]
        for w in ways:
            totals[w].append(round_total[w])
        print(
            f"  round {r + 1}: update {updates[-1] * 1e3:,.0f} ms (under the timer); products "
            + ", ".join(f"{w} {round_total[w] * 1e3:,.0f} ms" for w in ways),
            flush=True,
        )
    print(f"\n{args.model}, {args.variant}, {args.precision} (arithmetic {args.arithmetic}), "
          f"{torch.get_num_threads()} threads, {sum(calls.values())} products per update; "
          f"median over {args.rounds} rounds, ms per update\n")  # fmt: skip
    print("| product | calls | " + " | ".join(ways) + " |")
    print("|---|---|" + "---|" * len(ways))

    def total(key: Key, way: str) -> float:
        return calls[key] * statistics.median(per_call[key][way]) * 1e3

    for key in sorted(per_call, key=lambda k: -total(k, "in place")):
        print(f"| {describe(key)} | {calls[key]} | "
              + " | ".join(f"{total(key, w):.1f}" for w in ways) + " |")  # fmt: skip
    med = {w: statistics.median(totals[w]) * 1e3 for w in ways}
    print(f"| all products | {sum(calls.values())} | "
          + " | ".join(f"{med[w]:.1f}" for w in ways) + " |")  # fmt: skip
    print(
        f"\nOf an update of {statistics.median(updates) * 1e3:,.0f} ms: the products take "
        f"{med['in place']:,.0f} ms in place. Against contiguous hot operands "
        f"({med['contiguous, hot']:,.0f} ms), the layout costs "
        f"{med['same layout, hot'] - med['contiguous, hot']:+,.0f} ms, operands from memory "
        f"{med['same layout, cold'] - med['same layout, hot']:+,.0f} ms, and the update's context "
        f"beyond that {med['in place'] - med['same layout, cold']:+,.0f} ms."
    )
    paying = {
        key: total(key, "same layout, hot") - total(key, "copied, hot")
        for key in per_call
        if total(key, "copied, hot") < total(key, "same layout, hot")
    }
    print(
        f"Copying the strided operands contiguous first (copy timed) pays for {len(paying)} of "
        f"{len(per_call)} products, saving {sum(paying.values()):.1f} ms per update (hot): "
        + (
            ", ".join(
                f"{describe(k)} {v:.1f} ms"
                for k, v in sorted(paying.items(), key=lambda kv: -kv[1])[:5]
            )
            or "none"
        )
        + "."
    )


if __name__ == "__main__":
    main()
