"""oneDNN's primitive cache, held small for training on a CPU.

On a CPU with native bf16, torch runs bf16 matrix products through oneDNN, which builds a
"primitive" (a compiled kernel and its descriptors) for each shape and keeps the last 1,024 in a
cache. Batches of news-length sentences come in hundreds of shapes, so that cache turns over
every few updates, and each primitive it keeps is a small long-lived allocation in the middle of
the C heap, between the large short-lived activations. glibc's heap then cannot reuse its freed
space and grows for the whole run: 11 GiB resident over 2,200 updates with 1-1.6 GiB in use, on
the news corpus (results/tune_wmt_news_en_de/README.md, "Memory"). A cache of 128 primitives still
holds the shapes one update reuses (three layers, forward and backward) and slows the heap's growth:
a process training updates 1,023-2,200 peaked at 5.5 GiB, against 9-11 GiB for whole runs at 1,024.
The cache changes no number a run computes: a primitive built again is the same kernel.

oneDNN reads its capacity once, when it builds its first primitive (the bf16 probe that chooses
the precision builds one), from ONEDNN_PRIMITIVE_CACHE_CAPACITY (or DNNL_PRIMITIVE_CACHE_CAPACITY).
rpr-nmt-train sets it before composing its config, unless the user has set either. Decoding keeps
oneDNN's default: its shapes are few and its process short (beam 4 on 600 news sentences peaked at
0.97 GiB with either capacity, results/tune_wmt_news_en_de/memory/README.md).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

# Primitives kept; oneDNN's own default is 1,024 (ONEDNN_DEFAULT below).
CAPACITY = 128
ONEDNN_DEFAULT = 1024
ENV_NAMES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY")


def limit_primitive_cache(
    env: MutableMapping[str, str] = os.environ, capacity: int = CAPACITY
) -> None:
    """Set ONEDNN_PRIMITIVE_CACHE_CAPACITY to `capacity` unless either variable is set already (the
    user's value stands). Takes effect only before the process builds its first oneDNN primitive."""
    if not any(name in env for name in ENV_NAMES):
        env[ENV_NAMES[0]] = str(capacity)


def primitive_cache_capacity(env: MutableMapping[str, str] = os.environ) -> int | str:
    """The capacity oneDNN reads from `env`: the first of ENV_NAMES set (ONEDNN_ before DNNL_, as
    oneDNN looks), else its default; the raw text where it is not an integer."""
    for name in ENV_NAMES:
        if name in env:
            text = env[name]
            return int(text) if text.strip().lstrip("-").isdigit() else text
    return ONEDNN_DEFAULT
