"""An ensemble of independently trained models, decoded as one StepDecoder.

Legend: M members, B decoder rows, Tnew new positions, V vocabulary (shared by the members).

Each step scores the next token by the log of the mean of the members' probabilities
(fairseq's EnsembleModel, Sockeye's default "linear" ensemble):

    log p(y | ...) = logsumexp_m log p_m(y | ...) - log M

Every member keeps its own encoder output and decoding cache, so members may differ in size and
position method; only the vocabulary must be the same. The returned scores are already
log-probabilities: the search's log-softmax leaves them unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn


@dataclass
class EnsembleState:
    """One object per member (its encoder output, or its cache), selected together."""

    members: list[Any]

    def index_select(self, *index: Tensor | None) -> EnsembleState:
        """Each member's `index_select(*index)`: rows of encoder outputs, or (rows, kept
        sentences) of caches."""
        return EnsembleState([m.index_select(*index) for m in self.members])


class Ensemble:
    """Models decoded together; satisfies rpr_nmt.decode.beam.StepDecoder, and offers what
    translate() reads of a model (eval, parameters, recast), so it decodes wherever one does.

    Args:
        members: encoder-decoders with `encode` and cached `decode_step`, one vocabulary (any
            object with those two methods, e.g. a scripted toy model in the tests).
    """

    def __init__(self, members: Sequence[Any]) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members = list(members)

    def eval(self) -> Ensemble:
        """Every member in eval mode (no dropout)."""
        for member in self.members:
            member.eval()
        return self

    def parameters(self) -> Iterator[nn.Parameter]:
        """The members' parameters, one member after the other (their device is the decoding's)."""
        for member in self.members:
            yield from member.parameters()

    def encode(self, src: Tensor) -> EnsembleState:
        """Every member's encoding of the source.

        Shapes:
            src (B, S)
        """
        return EnsembleState([member.encode(src) for member in self.members])

    def decode_step(
        self, tgt: Tensor, encoder_out: EnsembleState, cache: EnsembleState | None = None
    ) -> tuple[Tensor, EnsembleState]:
        """Log of the mean of the members' next-token probabilities, in float32.

        Shapes:
            tgt (B, Tnew) -> (B, Tnew, V)
        """
        caches = [None] * len(self.members) if cache is None else cache.members
        lprobs, new_caches = [], []
        for member, memory, member_cache in zip(self.members, encoder_out.members, caches):
            logits, member_cache = member.decode_step(tgt, memory, member_cache)  # (B, Tnew, V)
            lprobs.append(torch.log_softmax(logits.float(), dim=-1))
            new_caches.append(member_cache)
        sizes = [lp.size(-1) for lp in lprobs]
        if len(set(sizes)) > 1:
            raise ValueError(
                f"ensemble members have vocabularies of {sizes} tokens: they must share one BPE "
                "model"
            )
        stacked = torch.stack(lprobs)  # (M, B, Tnew, V)
        mean = torch.logsumexp(stacked, dim=0) - math.log(len(self.members))  # (B, Tnew, V)
        return mean, EnsembleState(new_caches)

    def recast(self, dtype: torch.dtype, *, attention_dtype: torch.dtype | None) -> Ensemble:
        """The ensemble of every member's recast copy (see Transformer.recast)."""
        return Ensemble([m.recast(dtype, attention_dtype=attention_dtype) for m in self.members])
