"""Precision by the hardware: whether a device computes bf16 natively, and what "auto" means.

bf16 autocast is rpr-nmt's fast path where the hardware computes bf16 fast (CUDA GPUs from Ampere
on, CPUs with AMX, some with AVX512-BF16): there it is 2-5x faster than fp32. Elsewhere it is
slower: emulated on an AVX2-only CPU, where a bf16 matmul runs about 100x slower than an fp32 one,
and half fp32's speed on one AVX512-BF16 host without AMX (docs/performance.md, "Host classes").
So `train.precision` and `decode.precision` take "auto": bf16 where the device computes it natively
and at least as fast as fp32, fp32 elsewhere.

On CPU the decision reads torch's CPU capabilities: AMX-BF16 settles it. Elsewhere a matmul probe of
a fraction of a second decides (bf16 counts as native when it is at least as fast as fp32): on a
CPU with AVX512-BF16 but no AMX, whose bf16 matmuls ran 5x fp32's speed on one host and half of it
on another, on another architecture or an older torch, and where ATEN_CPU_CAPABILITY or
ONEDNN_MAX_CPU_ISA hold the kernels below the CPU's level.
"""

from __future__ import annotations

import functools
import logging
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "PRECISIONS",
    "Bf16Support",
    "bf16_support",
    "cpu_kind",
    "host_summary",
    "matmul_ceilings",
    "matmul_gflops",
    "resolve_precision",
]

PRECISIONS = ("auto", "fp32", "bf16", "fp16")

log = logging.getLogger("rpr_nmt")


@dataclass(frozen=True)
class Bf16Support:
    """Whether a device computes bf16 natively, and why we think so.

    Attributes:
        native: bf16 is computed natively and at least as fast as fp32 here; "auto" resolves
            to bf16.
        reason: what decided it, for the log (e.g. "CPU with AVX512-BF16").
        slowdown: bf16 matmul time over fp32's from the probe, when the probe ran; None otherwise.
    """

    native: bool
    reason: str
    slowdown: float | None = None


def matmul_gflops(
    dtype: torch.dtype,
    *,
    size: int = 1024,
    seconds: float = 1.0,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Measured GFLOP/s of a (size x size) @ (size x size) matmul on CPU at the current threads,
    over `seconds` of `clock`.

    The benchmark scripts print it for fp32 and bf16 as the host's ceilings; the probe of
    `bf16_support` uses a short version of it, on one thread in that thread's CPU time.
    """
    a = torch.randn(size, size).to(dtype)
    b = torch.randn(size, size).to(dtype)
    a @ b  # warm-up: first-call set-up is not the host's speed
    n, start = 0, clock()
    while True:
        a @ b
        n += 1
        elapsed = clock() - start
        if elapsed >= seconds:
            return 2 * size**3 * n / elapsed / 1e9


def probe_bf16_slowdown(size: int = 256, seconds: float = 0.05) -> float:
    """bf16 matmul time over fp32 matmul time on this CPU, from about 2 x `seconds` of matmuls
    (size x size) on one thread, timed in its own CPU time: beside other busy processes, wall time
    on two threads put this host's ratio anywhere from 0.5 to 2.6, one thread's CPU time at 1.7-2.0.

    Where bf16 is emulated a single bf16 matmul of this size takes tens of milliseconds, so the
    probe stays short on exactly the hosts where it matters.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fp32 = matmul_gflops(torch.float32, size=size, seconds=seconds, clock=time.thread_time)
        bf16 = matmul_gflops(torch.bfloat16, size=size, seconds=seconds, clock=time.thread_time)
    finally:
        torch.set_num_threads(threads)
    return fp32 / bf16


def _cpu_capabilities() -> Mapping[str, Any]:
    """torch.cpu.get_capabilities() (torch >= 2.9), or {} where this torch lacks it."""
    query = getattr(torch.cpu, "get_capabilities", None)
    return query() if query is not None else {}


def _kernel_limits() -> list[str]:
    """What holds torch's CPU kernels below the CPU's own level, e.g. ["ATEN_CPU_CAPABILITY=avx2"].

    ATEN_CPU_CAPABILITY picks torch's vectorised kernels (get_cpu_capability reports its choice) and
    ONEDNN_MAX_CPU_ISA (or DNNL_MAX_CPU_ISA) caps oneDNN, which runs bf16 matmuls: under either, a
    CPU with AVX512-BF16 may compute bf16 as slowly as an AVX2 one, so its flags do not decide.
    """
    env = os.environ
    limits = [f"{name}={env[name]}" for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
              if env.get(name, "").upper() not in ("", "ALL")]  # fmt: skip
    if env.get("ATEN_CPU_CAPABILITY") and torch.backends.cpu.get_cpu_capability() != "AVX512":
        limits.append(f"ATEN_CPU_CAPABILITY={env['ATEN_CPU_CAPABILITY']}")
    return limits


def cpu_kind() -> str:
    """What decides this CPU's bf16 speed, from its flags alone (no timing): "AMX-BF16",
    "AVX512-BF16" (native or not, _cpu_bf16_support decides by timing), else torch's kernel
    level, e.g. "AVX2"."""
    caps = _cpu_capabilities()
    if caps.get("amx_bf16"):
        return "AMX-BF16"
    if caps.get("avx512_bf16"):
        return "AVX512-BF16"
    return torch.backends.cpu.get_cpu_capability()


@functools.cache
def _cpu_bf16_support() -> Bf16Support:
    caps, limits = _cpu_capabilities(), _kernel_limits()
    if caps.get("amx_bf16") and not limits:
        return Bf16Support(True, "CPU with AMX-BF16")
    if caps.get("avx512_bf16") and not limits:
        # Without AMX, oneDNN's AVX512-BF16 matmuls ran 5x fp32's speed on one host (AMD EPYC) and
        # half of it on another (Intel Xeon, 2026-11-28): the median of three probes decides.
        slowdown = statistics.median(probe_bf16_slowdown(512, 0.03) for _ in range(3))
        if slowdown <= 1.0:
            return Bf16Support(True, "CPU with AVX512-BF16", slowdown)
        return Bf16Support(
            False, f"CPU with AVX512-BF16 but no AMX, bf16 matmuls {slowdown:.1f}x fp32's time",
            slowdown,
        )  # fmt: skip
    slowdown = probe_bf16_slowdown()
    level = torch.backends.cpu.get_cpu_capability()
    held = f", kernels held by {' '.join(limits)}" if limits else ""
    if slowdown <= 1.0:
        speed = f"{level} CPU, bf16 matmuls {1 / slowdown:.1f}x as fast as fp32{held}"
        return Bf16Support(True, speed, slowdown)
    return Bf16Support(False, f"{level} CPU without native bf16{held}", slowdown)


def bf16_support(device: torch.device) -> Bf16Support:
    """Whether `device` computes bf16 natively (decided once per process for the CPU)."""
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return Bf16Support(True, f"CUDA {torch.cuda.get_device_name(device)}")
        return Bf16Support(False, f"CUDA {torch.cuda.get_device_name(device)} without bf16")
    if device.type == "cpu":
        return _cpu_bf16_support()
    return Bf16Support(False, f"{device.type}: bf16 support unknown")


def resolve_precision(
    precision: str,
    device: torch.device,
    *,
    key: str,
    support: Callable[[torch.device], Bf16Support] = bf16_support,
) -> str:
    """The precision a run uses: "auto" resolved by the hardware, any other value as given.

    An explicit "bf16" on a device without native bf16 still runs, after one warning that says
    how much slower it is there and how to switch.

    Args:
        precision: the setting ("auto", "fp32", "bf16" or "fp16").
        device: where the run computes.
        key: the setting's name for messages, e.g. "train.precision".
        support: the hardware query (tests pass their own).

    Returns:
        "fp32", "bf16" or "fp16".

    Raises:
        ValueError: a value that is not a precision, naming the key.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"{key}={precision!r} is not a precision; use one of {PRECISIONS}")
    if precision == "auto":
        found = support(device)
        resolved = "bf16" if found.native else "fp32"
        log.info("%s=auto: %s (%s)", key, resolved, found.reason)
        return resolved
    if precision == "bf16" and device.type == "cpu":
        found = support(device)
        if not found.native:
            # A CPU is found not native by the probe alone, so its slowdown is measured already.
            measured = f"{found.slowdown:.0f}x" if found.slowdown else "much"
            article = "an" if found.reason[:1].upper() in "AEIOU" else "a"  # an AVX2 CPU
            log.warning(
                "%s=bf16 on %s %s: bf16 matmuls run %s slower than fp32 here; "
                "use %s=auto (fp32 on this CPU) or %s=fp32",
                key, article, found.reason, measured, key, key,
            )  # fmt: skip
    return precision


def matmul_ceilings(*, seconds: float = 1.0) -> dict[str, float]:
    """GFLOP/s of a 1024 x 1024 matmul in fp32 and in bf16 on CPU, measured now for `seconds`
    each: the ceilings a benchmark's figures are a share of."""
    return {
        "fp32": matmul_gflops(torch.float32, seconds=seconds),
        "bf16": matmul_gflops(torch.bfloat16, seconds=seconds),
    }


def host_summary(ceilings: Mapping[str, float]) -> str:
    """One line for a benchmark's header: CPU capability, torch threads, the matmul ceilings
    (matmul_ceilings). A native-bf16 CPU shows bf16 several times above fp32, an AVX2 one about
    100x below."""
    return (
        f"host: {torch.backends.cpu.get_cpu_capability()} CPU ({_cpu_bf16_support().reason}), "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}; matmul ceilings 1024^3: "
        f"fp32 {ceilings['fp32']:.0f} GFLOP/s, bf16 {ceilings['bf16']:.1f} GFLOP/s"
    )
