"""resolve_device: the device name of a config (train.device, decode.device) as a torch.device."""

from __future__ import annotations

import re

import torch

__all__ = ["resolve_device"]


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """Map "auto", "cpu", "cuda" or "cuda:N" to a torch device.

    "auto" is cuda when CUDA is available, else cpu. "cuda" (and "auto" on a GPU machine) is GPU
    `local_rank`, the process's GPU under torchrun; "cuda:N" is GPU N for every process. Nothing is
    changed: the caller makes the device current (torch.cuda.set_device) where it needs to.

    Args:
        name: the device setting.
        local_rank: this process's rank on its machine (LOCAL_RANK); 0 without torchrun.

    Raises:
        ValueError: an unknown name, a GPU asked for without CUDA, or a GPU that does not exist.
    """
    if name != "auto" and name not in ("cpu", "cuda") and not re.fullmatch(r"cuda:\d+", name):
        raise ValueError(f"device {name!r} is not a device; use auto, cpu, cuda or cuda:N")
    if name == "cpu" or (name == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asks for CUDA, which is not available; use auto or cpu")
    index = int(name[len("cuda:") :]) if name.startswith("cuda:") else local_rank
    if index >= torch.cuda.device_count():
        raise ValueError(
            f"device {name!r}: CUDA device {index} does not exist, "
            f"{torch.cuda.device_count()} are visible"
        )
    return torch.device("cuda", index)
