"""RoPE's rotation alone, forward and backward, in bf16 at a training batch's shape: the form the
model uses (rpr_nmt/model/positions/rope.py), a form without the flip that gives the same values,
and the model's form compiled into one fused loop (rounded once, so not the same values).

    .venv/bin/python scripts/bench_rope_rotation.py [--rounds 15] [--threads 2]
        [--shape 464 4 14 64]

Prints whether each form equals the model's, bit for bit, forward and backward, then the median
time per rotation and the median of per-round ratios to the model's form (interleaved rounds of
about 0.3 s per form). The default shape is a transformer_small batch of Multi30k En-De (6,500
tokens: 464 sentences of 14, 4 heads of 64), laid out as the model's split_heads hands it over;
an update rotates queries and keys in each of the 6 self-attention layers, 12 rotations.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from rpr_nmt.model.positions.rope import Rotary, Rotation
from rpr_nmt.precision import host_summary, matmul_ceilings


def pair_form(rotation: Rotation) -> Callable[[torch.Tensor], torch.Tensor]:
    """The interleaved rotation without the flip: each pair's two features turned apart, the same
    products and sums as Rotation, in the same order (x * c + partner * s)."""

    def rotate(x: torch.Tensor) -> torch.Tensor:
        P = rotation.cos.size(-1)
        cos, sin = rotation.cos.to(x.dtype), rotation.sin.to(x.dtype)
        minus_sin = (-rotation.sin).to(x.dtype)
        pairs = x.unflatten(-1, (P, 2))  # (B, H, T, P, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        first, second = a * cos + b * minus_sin, b * cos + a * sin  # (B, H, T, P) each
        return torch.stack((first, second), dim=-1).flatten(-2)

    return rotate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--shape", type=int, nargs=4, default=[464, 4, 14, 64], metavar="N")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: time at least one round")
    if args.threads:
        torch.set_num_threads(args.threads)
    print(host_summary(matmul_ceilings()), flush=True)
    B, H, T, Dh = args.shape
    rotation = Rotary(d_head=Dh, rope_dims=None, base=10000.0, layout="interleaved").rotation(
        T, 0, torch.device("cpu")
    )
    forms = {"model": rotation, "pair": pair_form(rotation), "compiled": torch.compile(rotation)}
    torch.manual_seed(0)
    # as split_heads hands it over: a (B, T, H, Dh) projection seen as (B, H, T, Dh)
    x = torch.randn(B, T, H, Dh).to(torch.bfloat16).transpose(1, 2)
    grad = torch.randn(B, H, T, Dh).to(torch.bfloat16)

    def step(form: Callable) -> tuple[torch.Tensor, torch.Tensor]:
        leaf = x.clone().requires_grad_()
        y = form(leaf)
        y.backward(grad)
        return y, leaf.grad

    y_model, g_model = step(forms["model"])
    for name in ("pair", "compiled"):
        y, g = step(forms[name])
        diff = (y.float() - y_model.float()).abs().max().item()
        print(f"{name} equals the model's form: forward {torch.equal(y, y_model)}, backward "
              f"{torch.equal(g, g_model)} (largest forward difference {diff:g})")  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in forms}
    for r in range(args.rounds):
        for name in forms if r % 2 == 0 else reversed(forms):
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < 0.3:
                step(forms[name])
                n += 1
            times[name].append((time.perf_counter() - start) / n)
    print(f"\nbf16, ({B}, {H}, {T}, {Dh}), {torch.get_num_threads()} threads, {args.rounds} rounds")
    for name, t in times.items():
        ratio = statistics.median(a / b for a, b in zip(t, times["model"]))
        print(f"{name}: {statistics.median(t) * 1e3:.2f} ms per rotation, forward + backward; "
              f"{ratio:.3f} x the model's form")  # fmt: skip


if __name__ == "__main__":
    main()
