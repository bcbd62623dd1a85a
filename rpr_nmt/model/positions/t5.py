"""T5's bucketed relative position bias: Raffel et al. (2020), "Exploring the Limits of Transfer
Learning with a Unified Text-to-Text Transformer", sec. 2.1.

Shape legend: H heads, Tq / Tk query / key lengths, U buckets (t5_num_buckets).

Each head learns one scalar per bucket of the offset j - i; the scalar is added to the logit:

    e_ij = q_i . k_j / sqrt(Dh) + b_h[bucket(j - i)]

The paper uses 32 such scalars per head, for ranges of offsets that widen logarithmically up to
an offset of 128, beyond which all offsets share one; the scalars are shared by all layers of a
stack, each head having its own. Buckets (as in its reference code, mesh-tensorflow):

    encoder (bidirectional): U / 2 buckets for j - i <= 0, U / 2 more for j - i > 0, each side
        bucketing n = |j - i| over u = U / 2 buckets;
    decoder (unidirectional): all u = U buckets for n = max(i - j, 0), the keys a query sees;
    within a side: n < u / 2 has its own bucket n (exact); larger n gets
        u / 2 + floor(log(n / (u / 2)) / log(max_distance / (u / 2)) * (u - u / 2)),
        at most u - 1, so that every n >= max_distance shares the last bucket.

Unlike T5, whose logits are not scaled, the content term here keeps the Transformer's 1 / sqrt(Dh);
the bias is added unscaled. Offsets count from absolute positions (q_offset in cached decoding).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from rpr_nmt.model.attention_kernels import Diagonals, diagonals_apply

__all__ = ["T5Bias", "t5_bucket"]


def t5_bucket(
    offset: Tensor, *, bidirectional: bool, num_buckets: int, max_distance: int
) -> Tensor:
    """The bucket of every offset j - i (module docstring).

    Args:
        offset: j - i, key position minus query position (integers).
        bidirectional: the encoder's buckets (both signs) or the decoder's (j <= i only).
        num_buckets: U, all buckets together.
        max_distance: offsets from here on share the last bucket of their side.

    Returns:
        LongTensor of offset's shape, values in [0, U).
    """
    u = num_buckets
    bucket = torch.zeros_like(offset)
    if bidirectional:
        u //= 2
        bucket = bucket + (offset > 0).long() * u  # keys after the query: the upper half
        n = offset.abs()
    else:
        n = (-offset).clamp(min=0)  # i - j for the keys a causal query sees; 0 for the others
    exact = u // 2
    # The log-spaced buckets, in float32 as the reference implementations compute them.
    far = n.clamp(min=1).float() / exact
    log_bucket = exact + (torch.log(far) / math.log(max_distance / exact) * (u - exact)).long()
    log_bucket = log_bucket.clamp(max=u - 1)
    return bucket + torch.where(n < exact, n, log_bucket)


class T5Bias(nn.Module):
    """One learned scalar per head and bucket: the bias of one stack (or one layer)."""

    def __init__(
        self, *, n_heads: int, num_buckets: int, max_distance: int, bidirectional: bool
    ) -> None:
        """Args:
        n_heads: H.
        num_buckets: U, 32 in T5.
        max_distance: offsets from here on share a bucket, 128 in T5.
        bidirectional: True in the encoder, False in the (causal) decoder.
        """
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bidirectional = bidirectional
        # N(0, 1 / U)-sized scalars: small next to the content logits at the start.
        self.weight = nn.Parameter(torch.randn(num_buckets, n_heads) * num_buckets**-0.5)  # (U, H)

    def bias(self, q_len: int, k_len: int, q_offset: int, device: torch.device) -> Tensor:
        """b_h[bucket(j - i)], queries at q_offset .. q_offset + q_len - 1, keys at 0 .. k_len - 1.

        Returns:
            Bias (H, Tq, Tk) in the weight's dtype, shared by every row of the batch.
        """
        # The bias depends on j - i alone. On CUDA, for long sequences, it is built per diagonal
        # and spread over the pairs by a view (attention_kernels.Diagonals): weight[bucket] over all
        # Tq x Tk pairs accumulates Tq x Tk gradients into U rows, which CUDA serialises (1,474x
        # plain attention's time at n = 2048 on an H100); per diagonal it accumulates Tq + Tk - 1.
        diagonals = Diagonals(q_len, k_len) if diagonals_apply(device, q_len) else None
        if diagonals is not None:
            offset = torch.arange(diagonals.length, device=device) - (q_len - 1 + q_offset)  # (L,)
        else:
            query_pos = torch.arange(q_offset, q_offset + q_len, device=device)  # (Tq,)
            offset = torch.arange(k_len, device=device)[None, :] - query_pos[:, None]  # (Tq, Tk)
        bucket = t5_bucket(
            offset,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # (L,) or (Tq, Tk)
        if diagonals is not None:
            per_diagonal = self.weight[bucket].t()  # (H, L)
            return diagonals.spread(per_diagonal[:, None].expand(-1, q_len, -1))  # (H, Tq, Tk)
        return self.weight[bucket].permute(2, 0, 1)  # (Tq, Tk, H) -> (H, Tq, Tk)

    def extra_repr(self) -> str:
        side = "bidirectional" if self.bidirectional else "unidirectional"
        return f"num_buckets={self.num_buckets}, max_distance={self.max_distance}, {side}"
