"""The seam between a relative position method and self-attention: PositionTerms.

Shape legend: H heads, Tq / Tk query / key lengths, L layers of a stack.

Methods differ in where position enters self-attention:

    rope        a rotation of the queries and the new keys       PositionTerms.rotation
    alibi, t5   an additive bias on the logits, (H, Tq, Tk)      PositionTerms.bias
    shaw        tables in the logits and outputs                 the attention's own (attention.py),
                indexed by the table row of every pair           PositionTerms.pairs

A stack asks its RelativeTerms (Shaw: shaw_pairs) once per forward, with the query offset of cached
decoding, and hands every layer's self-attention its PositionTerms; the attention rotates or adds
them the same way whatever the method, so the decoding cache (keys stored rotated) and the fused
kernel (a float mask) need nothing per method. The bias is built once per forward and shared by the
batch, and by the layers where the method shares it (ALiBi's fixed slopes; T5's one table per
stack); Shaw's pair rows are shared by every layer, each indexing its own tables with them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from rpr_nmt.model.attention import ShawPairs
from rpr_nmt.model.positions.alibi import ALiBi
from rpr_nmt.model.positions.rope import Rotary, Rotation
from rpr_nmt.model.positions.t5 import T5Bias

__all__ = ["PositionTerms", "RelativeTerms"]


class PositionTerms(NamedTuple):
    """What a relative method gives one self-attention call; None where it gives nothing.

    Attributes:
        rotation: rotates the queries and the new keys at their absolute positions (RoPE).
        bias: added to the logits, (H, Tq, Tk) for queries from q_offset and keys from 0.
        pairs: Shaw's table row of every (query, key) pair (attention.shaw_pairs).
    """

    rotation: Rotation | None = None
    bias: Tensor | None = None
    pairs: ShawPairs | None = None


class RelativeTerms(nn.Module):
    """The relative method of one stack's self-attention: one of METHODS (not shaw, whose tables
    each attention layer holds, and not none)."""

    METHODS = ("rope", "alibi", "t5")

    def __init__(
        self,
        *,
        method: str,
        n_layers: int,
        n_heads: int,
        d_head: int,
        causal: bool,
        share_across_layers: bool = True,
        rope_base: float = 10000.0,
        rope_dims: int | None = None,
        rope_layout: str = "interleaved",
        t5_num_buckets: int = 32,
        t5_max_distance: int = 128,
    ) -> None:
        """Args:
        method: one of METHODS.
        n_layers: L, the layers served.
        n_heads: H.
        d_head: features per head.
        causal: the decoder's stack (T5's one-directional buckets).
        share_across_layers: t5 only: one bias table for the stack (T5's), else one per layer.
        rope_base, rope_dims, rope_layout: RoPE's options (rope.py).
        t5_num_buckets, t5_max_distance: T5's options (t5.py).
        """
        super().__init__()
        self.method, self.n_layers = method, n_layers
        if method == "rope":
            self.rotary = Rotary(
                d_head=d_head, rope_dims=rope_dims, base=rope_base, layout=rope_layout
            )
        elif method == "alibi":
            self.alibi = ALiBi(n_heads)
        elif method == "t5":
            tables = 1 if share_across_layers else n_layers
            self.t5 = nn.ModuleList(
                T5Bias(
                    n_heads=n_heads,
                    num_buckets=t5_num_buckets,
                    max_distance=t5_max_distance,
                    bidirectional=not causal,
                )
                for _ in range(tables)
            )
        else:
            raise ValueError(f"RelativeTerms serves {', '.join(self.METHODS)}, not {method!r}")

    def forward(
        self, q_len: int, k_len: int, q_offset: int, device: torch.device
    ) -> list[PositionTerms]:
        """Every layer's PositionTerms for queries at q_offset .. q_offset + q_len - 1 and keys at
        0 .. k_len - 1; one object for all layers where the stack shares it."""
        if self.method == "rope":
            shared = PositionTerms(rotation=self.rotary.rotation(q_len, q_offset, device))
        elif self.method == "alibi":
            shared = PositionTerms(bias=self.alibi.bias(q_len, k_len, q_offset, device))
        elif len(self.t5) == 1:
            shared = PositionTerms(bias=self.t5[0].bias(q_len, k_len, q_offset, device))
        else:
            return [PositionTerms(bias=t5.bias(q_len, k_len, q_offset, device)) for t5 in self.t5]
        return [shared] * self.n_layers
