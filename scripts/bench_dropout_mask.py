"""The dropout masks' random words alone: drawn as the model draws them (rpr_nmt/model/dropout.py,
one 64-bit word per four elements from torch's default generator, whose Mersenne Twister runs on
one thread), and split over threads, each part drawn by a generator seeded from the default one.

    .venv/bin/python scripts/bench_dropout_mask.py [--rounds 15] [--threads 2]
        [--elements 1600000 6400000] [--draws-only] [--compiled] [--numpy]

The split form is deterministic (its seeds come from the default generator, so torch.manual_seed
and a checkpoint's RNG state cover it) but draws another stream than the model's: a model trained
with it would train to other numbers. It answers how much of a bf16 update's `random_` (10% in the
profile of docs/performance.md) drawing on both cores could take. Prints, per size, the median time
of each form over interleaved rounds and the median of per-round ratios split / model.

Each mask ends in a comparison that torch runs on its OpenMP threads, and those threads spin-wait
for the next parallel op after it (as in a training update, where one follows another): the
spinning thread holds the core that the second part would be drawn on. Run with
OMP_WAIT_POLICY=PASSIVE to see what the split gains when nothing spins, or with --draws-only to time
the random words alone, without the comparison. --compiled adds a third form, rand_mask through
torch.compile (inductor's own CPU random numbers, drawn inside its generated loop), its compile time
printed first. --numpy adds the words drawn by NumPy's SFC64 (one generator per mask, seeded by a
draw of torch's default generator), as train.arithmetic=2 draws them
(rpr_nmt/model/dropout.py's numpy_words).
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from rpr_nmt.model.dropout import dropout_mask, keep_mask, numpy_words, words_for
from rpr_nmt.precision import host_summary, matmul_ceilings


def model_draws(numel: int) -> torch.Tensor:
    """The random words of dropout_mask alone: one int64 per four elements, one generator."""
    return torch.empty(words_for(numel), dtype=torch.int64).random_(-(2**63), None)


def split_draws(numel: int, pool: ThreadPoolExecutor, n_parts: int) -> torch.Tensor:
    """The words of split_mask alone: n_parts parts drawn at once on `pool`'s threads, each by a
    torch.Generator seeded from the default generator."""
    bits = torch.empty(words_for(numel), dtype=torch.int64)
    parts = bits.tensor_split(n_parts)
    seeds = torch.randint(0, 2**62, (len(parts),)).tolist()

    def fill(i: int) -> None:  # torch releases the GIL inside random_, so the parts run at once
        parts[i].random_(-(2**63), None, generator=torch.Generator().manual_seed(seeds[i]))

    list(pool.map(fill, range(len(parts))))
    return bits


def numpy_draws(numel: int) -> torch.Tensor:
    """The words of a mask as arithmetic 2 draws them (dropout.numpy_words: NumPy's SFC64)."""
    return numpy_words(words_for(numel))


def numpy_mask(shape: tuple[int, ...], p: float) -> torch.Tensor:
    """dropout_mask's contract, its words from numpy_draws."""
    return keep_mask(numpy_draws(torch.Size(shape).numel()), shape, p)


def split_mask(
    shape: tuple[int, ...], p: float, pool: ThreadPoolExecutor, n_parts: int
) -> torch.Tensor:
    """dropout_mask's contract (True = keep, p rounded to a multiple of 2^-16), its words drawn in
    n_parts parts on `pool`'s threads, each by a torch.Generator seeded from the default one."""
    return keep_mask(split_draws(torch.Size(shape).numel(), pool, n_parts), shape, p)


def rand_mask(x: torch.Tensor, p: float) -> torch.Tensor:
    """A mask from uniform floats, True (keep) with probability 1 - p: what --compiled compiles."""
    return torch.rand_like(x, dtype=torch.float32) >= p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--elements", type=int, nargs="+", default=[1_600_000, 6_400_000],
        help="mask sizes: an update of transformer_small on 12,081 tokens draws 23 masks, 65.6M "
        "elements (17 of 1.5-1.7M, d 256; 6 of 6.2-6.7M, d_ff 1024)",
    )  # fmt: skip
    parser.add_argument("--draws-only", action="store_true", help="time the random words alone")
    parser.add_argument("--compiled", action="store_true", help="also time rand_mask compiled")
    parser.add_argument("--numpy", action="store_true", help="also time NumPy's SFC64 words")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: time at least one round")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(host_summary(matmul_ceilings()), flush=True)
    threads = torch.get_num_threads()
    pool = ThreadPoolExecutor(threads)
    cpu = torch.device("cpu")
    compiled = torch.compile(rand_mask, dynamic=True)
    inputs = {n: torch.empty(n, dtype=torch.bfloat16) for n in args.elements}
    for n in args.elements if args.compiled else ():  # compiled before any round times it
        start = time.perf_counter()
        compiled(inputs[n], 0.1)
        print(f"compiled at {n:,} elements in {time.perf_counter() - start:.1f} s", flush=True)
    head = "| elements | model's mask, ms | split over threads, ms | split / model, median ratio |"
    for form in ("numpy", "compiled"):
        if getattr(args, form):
            head += f" {form}, ms | {form} / model, median ratio |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for n in args.elements:
        if args.draws_only:
            forms = {
                "model": lambda n=n: model_draws(n),
                "split": lambda n=n: split_draws(n, pool, threads),
            }
        else:
            forms = {
                "model": lambda n=n: dropout_mask((n,), 0.1, cpu),
                "split": lambda n=n: split_mask((n,), 0.1, pool, threads),
            }
        if args.numpy:
            draws, mask = (lambda n=n: numpy_draws(n)), (lambda n=n: numpy_mask((n,), 0.1))
            forms["numpy"] = draws if args.draws_only else mask
        if args.compiled:
            forms["compiled"] = lambda x=inputs[n]: compiled(x, 0.1)
        times: dict[str, list[float]] = {name: [] for name in forms}
        for r in range(args.rounds):
            for name in forms if r % 2 == 0 else reversed(forms):
                start = time.perf_counter()
                forms[name]()
                times[name].append(time.perf_counter() - start)
        cells = [f"{n:,}", f"{statistics.median(times['model']) * 1e3:.2f}"]
        for form in [f for f in forms if f != "model"]:
            ratios = [t / m for t, m in zip(times[form], times["model"])]
            median = statistics.median(times[form])
            cells += [f"{median * 1e3:.2f}", f"{statistics.median(ratios):.3f}"]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
