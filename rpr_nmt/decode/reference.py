"""Uncached decoding: recompute the whole target prefix at every step.

The slow reference that tests compare cached decoding against, and that the benchmark times. It
wraps a model with `encode` / `decode_step` / `forward` and itself offers `encode` /
`decode_step`, so beam search and greedy search run on it unchanged.

Legend: A sentences, R decoder rows (G per sentence: the beams), S source length, t prefix length,
V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn


@dataclass
class _Source:
    """Per-sentence source ids and, unless re-encoding, the encoder output computed once."""

    src: Tensor  # (A, S)
    encoder_out: Any  # EncoderOutput or None

    def index_select(self, index: Tensor) -> _Source:
        enc = None if self.encoder_out is None else self.encoder_out.index_select(index)
        return _Source(self.src.index_select(0, index), enc)


@dataclass
class _Prefix:
    """The target prefix fed so far (BOS included), in place of a key/value cache."""

    tokens: Tensor  # (R, t)

    @property
    def length(self) -> int:
        return self.tokens.size(1)

    def index_select(self, index: Tensor, memory_index: Tensor | None = None) -> _Prefix:
        # A prefix holds no encoder memory: _Source follows the sentences.
        return _Prefix(self.tokens.index_select(0, index))


class UncachedModel:
    """Decode without a key/value cache.

    Args:
        model: the Transformer to wrap.
        reencode: True runs the full `model(src, prefix)` each step (encoder included: an
            independent check of the cached path); False encodes once and runs
            `decode_step(prefix, encoder_out, None)` each step (what "no decoder cache" costs).
    """

    def __init__(self, model: nn.Module, *, reencode: bool = False) -> None:
        self.model = model
        self.reencode = reencode

    def encode(self, src: Tensor) -> _Source:
        return _Source(src, None if self.reencode else self.model.encode(src))

    def decode_step(
        self, tgt: Tensor, encoder_out: _Source, cache: _Prefix | None
    ) -> tuple[Tensor, _Prefix]:
        """Logits of the Tnew newest positions, recomputed from the start of the prefix.

        Shapes:
            tgt (R, Tnew) -> logits (R, Tnew, V)
        """
        prefix = tgt if cache is None else torch.cat([cache.tokens, tgt], dim=1)  # (R, t)
        if self.reencode:
            groups = prefix.size(0) // encoder_out.src.size(0)  # G rows per sentence
            src = encoder_out.src.repeat_interleave(groups, dim=0)  # (R, S)
            logits = self.model(src, prefix)  # (R, t, V)
        else:
            logits, _ = self.model.decode_step(prefix, encoder_out.encoder_out, None)  # (R, t, V)
        return logits[:, -tgt.size(1) :], _Prefix(prefix)
