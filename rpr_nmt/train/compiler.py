"""What train.compile needs of the host: on a CPU, torch.compile's inductor backend builds C++.

A missing compiler would otherwise surface at the first update, after the data was prepared, as
inductor's own exception in a long traceback; the trainer asks first (check_compiler).
"""

from __future__ import annotations

import torch

from rpr_nmt.train.errors import SettingsError


def check_compiler(compile: bool, device: torch.device) -> None:
    """Refuse train.compile=true on a CPU without a C++ compiler that inductor can run.

    Raises:
        SettingsError: one line naming the compilers tried and the way out.
    """
    if not compile or device.type != "cpu":
        return  # CUDA builds its kernels with Triton, which torch brings along
    from torch._inductor import config, exc
    from torch._inductor.cpp_builder import get_cpp_compiler

    try:
        get_cpp_compiler()
    except exc.InvalidCxxCompiler:
        tried = config.cpp.cxx if isinstance(config.cpp.cxx, (list, tuple)) else (config.cpp.cxx,)
        names = ", ".join(str(c) for c in tried if c) or "none"
        raise SettingsError(
            f"train.compile=true on the CPU needs a C++ compiler for torch.compile (inductor "
            f"tried: {names}; $CXX names another): install one, e.g. g++, or set "
            "train.compile=false"
        ) from None
