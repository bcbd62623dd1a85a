"""Precision by the hardware: the bf16 decision (the hardware queries replaced) and "auto"."""

from __future__ import annotations

import logging

import pytest
import torch

from rpr_nmt import precision
from rpr_nmt.precision import Bf16Support, bf16_support, resolve_precision

CPU = torch.device("cpu")
NATIVE = Bf16Support(True, "CPU with AVX512-BF16")
EMULATED = Bf16Support(False, "AVX2 CPU without native bf16", slowdown=130.0)


@pytest.fixture
def cpu_decision(monkeypatch):
    """Decide bf16 support from the given capabilities and probe result, afresh for the test."""

    def decide(caps: dict, slowdown: float, limits: tuple[str, ...] = ()) -> Bf16Support:
        probes = []
        monkeypatch.setattr(precision, "_cpu_capabilities", lambda: caps)
        monkeypatch.setattr(precision, "_kernel_limits", lambda: list(limits))
        monkeypatch.setattr(
            precision, "probe_bf16_slowdown", lambda *args: probes.append(1) or slowdown
        )
        precision._cpu_bf16_support.cache_clear()
        try:
            found = bf16_support(CPU)
        finally:
            precision._cpu_bf16_support.cache_clear()
        return found, len(probes)

    return decide


def test_amx_decides_without_a_probe(cpu_decision):
    found, probes = cpu_decision({"avx2": True, "avx512_bf16": True, "amx_bf16": True}, 130.0)
    assert found.native and probes == 0 and found.reason == "CPU with AMX-BF16"


def test_avx512_bf16_without_amx_is_native_only_where_the_probes_find_it_fast(cpu_decision):
    """An AMD EPYC ran bf16 matmuls at 5x fp32's speed; an Intel Xeon without AMX (2026-11-28)
    at half of it, where bf16 training was 0.75x fp32's: the median of three probes decides."""
    found, probes = cpu_decision({"avx2": True, "avx512_bf16": True}, slowdown=0.2)
    assert found.native and found.slowdown == 0.2 and probes == 3
    assert found.reason == "CPU with AVX512-BF16"
    found, probes = cpu_decision({"avx2": True, "avx512_bf16": True}, slowdown=1.8)
    assert not found.native and found.slowdown == 1.8 and probes == 3
    assert found.reason == "CPU with AVX512-BF16 but no AMX, bf16 matmuls 1.8x fp32's time"


def test_flags_do_not_decide_where_the_kernels_are_held_below_them(cpu_decision):
    # e.g. ONEDNN_MAX_CPU_ISA=AVX2 on an AVX512-BF16 CPU: bf16 matmuls as slow as on AVX2
    found, probes = cpu_decision({"avx512_bf16": True}, 40.0, limits=("ONEDNN_MAX_CPU_ISA=AVX2",))
    assert not found.native and probes == 1
    assert "ONEDNN_MAX_CPU_ISA=AVX2" in found.reason and "without native bf16" in found.reason


def test_kernel_limits_read_the_dispatch_settings(monkeypatch):
    for name in ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert precision._kernel_limits() == []
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "ALL")  # oneDNN's default: no cap
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx512")  # and torch at its best
    assert precision._kernel_limits() == []
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "avx2")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert precision._kernel_limits() == ["DNNL_MAX_CPU_ISA=avx2", "ATEN_CPU_CAPABILITY=avx2"]


def test_without_the_flags_the_probe_decides(cpu_decision):
    found, probes = cpu_decision({"avx2": True, "avx512_bf16": False}, slowdown=130.0)
    assert not found.native and found.slowdown == 130.0 and probes == 1
    found, _ = cpu_decision({}, slowdown=0.8)  # e.g. an ARM CPU computing bf16 faster than fp32
    assert found.native
    found, _ = cpu_decision({}, slowdown=1.0)  # as fast counts as native
    assert found.native


def test_auto_is_bf16_where_native_and_fp32_elsewhere():
    assert resolve_precision("auto", CPU, key="train.precision", support=lambda d: NATIVE) == "bf16"
    assert resolve_precision("auto", CPU, key="train.precision", support=lambda d: EMULATED) == (
        "fp32"
    )


def test_explicit_values_are_kept(caplog):
    for value in ("fp32", "bf16", "fp16"):
        assert resolve_precision(value, CPU, key="k", support=lambda d: NATIVE) == value
    assert not caplog.records


def test_explicit_bf16_without_native_bf16_runs_after_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="rpr_nmt"):
        got = resolve_precision("bf16", CPU, key="decode.precision", support=lambda d: EMULATED)
    assert got == "bf16"
    (record,) = caplog.records
    message = record.getMessage()
    assert "130x slower" in message and "decode.precision=auto" in message
    assert "decode.precision=fp32" in message


def test_a_value_that_is_no_precision_names_the_key():
    with pytest.raises(ValueError, match=r"train.precision='bf17' is not a precision"):
        resolve_precision("bf17", CPU, key="train.precision", support=lambda d: NATIVE)
