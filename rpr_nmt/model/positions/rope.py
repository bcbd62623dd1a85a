"""Rotary position embedding: Su, Lu, Pan, Murtadha, Wen & Liu (2021), "RoFormer", eq. 13-16.

Shape legend: B batch, H heads, T positions (queries, or the new keys), Dh head dim,
P = rope_dims / 2 rotated feature pairs.

Each pair of features (x_a, x_b) of a query or key at absolute position m is rotated by the angle
m theta_i, with one frequency per pair:

    theta_i = base^(-2i / rope_dims),  i = 0 .. P - 1                          (eq. 15, base 10000)
    (x_a, x_b) -> (x_a cos m theta_i - x_b sin m theta_i,
                   x_a sin m theta_i + x_b cos m theta_i)                       (eq. 13-14)

so that the logit of query i and key j depends on positions only through j - i:
(R_i q) . (R_j k) = q . R_(j - i) k  (eq. 16). Features past rope_dims are left as they are.

Layouts of the pairs: "interleaved" pairs features (2i, 2i + 1), as the paper writes it and as
CTranslate2 reads a model by default (rotary_interleave=True); "halves" pairs (i, i + P) (GPT-NeoX,
Hugging Face Llama). Queries are rotated at their absolute positions (q_offset onwards in cached
decoding); each key is rotated once, at its own position, before it enters the decoding cache.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["Rotary", "Rotation"]


class Rotation:
    """cos and sin of m theta_i for the positions of one call, and their application.

    Applied per feature as x * c + partner(x) * s, where partner(x) holds the other feature of each
    pair and (c, s) are (cos, -sin) for the pair's first feature and (cos, sin) for its second: eq.
    13-14's products and sums, rounded the same way (a - b sin = a + b (-sin) exactly), in fewer ops
    than turning the two halves of each pair apart (an eager GPU update waits on its host).
    """

    def __init__(self, cos: Tensor, sin: Tensor, *, interleaved: bool) -> None:
        """Args: cos, sin (T, P) of the angles m theta_i; interleaved: the pairs' layout."""
        self.cos, self.sin, self.interleaved = cos, sin, interleaved
        if interleaved:  # features 2i, 2i + 1
            self.c = torch.stack((cos, cos), dim=-1).flatten(-2)  # (T, 2P)
            self.s = torch.stack((-sin, sin), dim=-1).flatten(-2)  # (T, 2P)
        else:  # features i, i + P
            self.c, self.s = torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)

    def __call__(self, x: Tensor) -> Tensor:
        """x with its first 2P features of every position rotated (eq. 13-14).

        Shapes:
            x: (B, H, T, Dh); returns (B, H, T, Dh), in x's dtype.
        """
        P = self.cos.size(-1)
        head, rest = x[..., : 2 * P], x[..., 2 * P :]
        c, s = self.c.to(x.dtype), self.s.to(x.dtype)  # (T, 2P)
        if self.interleaved:
            partner = head.unflatten(-1, (P, 2)).flip(-1).flatten(-2)  # (B, H, T, 2P): 2i <-> 2i+1
        else:
            partner = head.roll(P, dims=-1)  # (B, H, T, 2P): i <-> i + P
        turned = head * c + partner * s  # (B, H, T, 2P), laid out as x
        if rest.size(-1) > 0:
            return torch.cat((turned, rest), dim=-1)  # contiguous
        # Contiguous, as the pairwise form's cat gave it: x comes from split_heads laid out as
        # (B, T, H, Dh), and AVX2 CPUs round the attention matmuls by the layout they read.
        return turned.contiguous()


class Rotary(nn.Module):
    """RoPE for one self-attention stack: no parameters, one Rotation per call."""

    def __init__(self, *, d_head: int, rope_dims: int | None, base: float, layout: str) -> None:
        """Args:
        d_head: features per head, Dh.
        rope_dims: features rotated per head (even, at most Dh); None = all of them.
        base: the base of the frequencies, 10000 in the paper.
        layout: "interleaved" (pairs 2i, 2i + 1) or "halves" (pairs i, i + P).
        """
        super().__init__()
        dims = d_head if rope_dims is None else rope_dims
        if not (0 < dims <= d_head and dims % 2 == 0):
            raise ValueError(f"model.rope_dims={rope_dims}: use an even number in 2..{d_head}")
        if layout not in ("interleaved", "halves"):
            raise ValueError(f"model.rope_layout={layout!r}: use interleaved or halves")
        self.interleaved = layout == "interleaved"
        self.dims, self.base = dims, base

    def rotation(self, length: int, q_offset: int, device: torch.device) -> Rotation:
        """The rotation of positions q_offset .. q_offset + length - 1 (queries and new keys)."""
        pair = torch.arange(0, self.dims, 2, dtype=torch.float64, device=device)  # 2i, (P,)
        # theta_i in float64, then float32: the same angles whatever dtype the model runs in.
        theta = (self.base ** (-pair / self.dims)).float()  # (P,)
        positions = torch.arange(q_offset, q_offset + length, device=device, dtype=torch.float32)
        angles = positions[:, None] * theta[None, :]  # (T, P)
        return Rotation(torch.cos(angles), torch.sin(angles), interleaved=self.interleaved)

    def extra_repr(self) -> str:
        layout = "interleaved" if self.interleaved else "halves"
        return f"rope_dims={self.dims}, base={self.base}, layout={layout}"
