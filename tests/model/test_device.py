"""resolve_device: auto, cpu, cuda and cuda:N, on a machine with and without GPUs."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.model import resolve_device


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def test_without_cuda_auto_is_cpu_and_cuda_is_refused(no_gpu):
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("auto", local_rank=1) == torch.device("cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    for name in ("cuda", "cuda:0"):
        with pytest.raises(ValueError, match=f"device '{name}' asks for CUDA.*use auto or cpu"):
            resolve_device(name)


def test_with_gpus_cuda_is_the_local_rank_and_cuda_n_is_gpu_n(two_gpus):
    assert resolve_device("auto") == torch.device("cuda", 0)
    assert resolve_device("auto", local_rank=1) == torch.device("cuda", 1)
    assert resolve_device("cuda", local_rank=1) == torch.device("cuda", 1)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    assert resolve_device("cuda:0", local_rank=1) == torch.device("cuda", 0)
    assert resolve_device("cpu", local_rank=1) == torch.device("cpu")
    with pytest.raises(ValueError, match="CUDA device 2 does not exist, 2 are visible"):
        resolve_device("cuda:2")
    with pytest.raises(ValueError, match="CUDA device 3 does not exist"):
        resolve_device("cuda", local_rank=3)


@pytest.mark.parametrize("name", ["gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", ""])
def test_unknown_names_are_refused(name):
    with pytest.raises(ValueError, match="is not a device; use auto, cpu, cuda or cuda:N"):
        resolve_device(name)
