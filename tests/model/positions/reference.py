"""A naive self-attention written per (batch, head, i, j) in float64, for the position methods'
tests: the method enters as a rotation of q_i and k_j by position, or as a term added to e_ij."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import torch

from rpr_nmt.model.multihead import RelativeMultiheadAttention

Rotate = Callable[[torch.Tensor, int], torch.Tensor]  # (vector (Dh,), absolute position) -> vector
Bias = Callable[[int, int, int], torch.Tensor]  # (head, query position, key position) -> scalar


def naive_self_attention(
    attn: RelativeMultiheadAttention,
    x: torch.Tensor,
    *,
    causal: bool,
    padding: torch.Tensor | None = None,
    rotate: Rotate | None = None,
    bias: Bias | None = None,
) -> torch.Tensor:
    """softmax_j(rot(q_i, i) . rot(k_j, j) / sqrt(Dh) + bias(h, i, j)) v_j over the visible keys,
    one (b, h, i) at a time, then the output projection. x: (B, T, D); returns (B, T, D)."""
    B, T, D = x.shape
    H, Dh = attn.n_heads, attn.d_head

    def heads(proj: torch.nn.Linear) -> torch.Tensor:
        return proj(x).view(B, T, H, Dh)  # (B, T, H, Dh)

    q, k, v = heads(attn.q_proj), heads(attn.k_proj), heads(attn.v_proj)
    rows = []
    for b, i in itertools.product(range(B), range(T)):
        per_head = []
        for h in range(H):
            qi = q[b, i, h] if rotate is None else rotate(q[b, i, h], i)
            logits, visible = [], []
            for j in range(T):
                kj = k[b, j, h] if rotate is None else rotate(k[b, j, h], j)
                e = qi @ kj / math.sqrt(Dh)
                if bias is not None:
                    e = e + bias(h, i, j)
                logits.append(e)
                hidden = (causal and j > i) or (padding is not None and bool(padding[b, j]))
                visible.append(not hidden)
            logits = torch.stack(logits).masked_fill(~torch.tensor(visible), float("-inf"))
            alpha = torch.softmax(logits, dim=0)  # (T,)
            per_head.append(sum(alpha[j] * v[b, j, h] for j in range(T)))
        rows.append(torch.cat(per_head))  # (D,)
    return attn.out_proj(torch.stack(rows).view(B, T, D))


def check_against_naive(
    attn: RelativeMultiheadAttention,
    terms_of: Callable[[int], object],
    *,
    length: int,
    causal: bool,
    padded: bool,
    rotate: Rotate | None = None,
    bias: Bias | None = None,
    extra_params: tuple[torch.Tensor, ...] = (),
    atol: float = 1e-10,
) -> None:
    """The module's output and gradients (input, projections, extra_params) against the naive
    loop's, in float64. terms_of(T) builds the module's PositionTerms for T positions."""
    torch.manual_seed(0)
    attn = attn.double().eval()
    x = torch.randn(2, length, attn.n_heads * attn.d_head, dtype=torch.float64, requires_grad=True)
    padding = None
    if padded:
        padding = torch.zeros(2, length, dtype=torch.bool)
        padding[1, length - 2 :] = True
    weights = torch.randn(2, length, attn.n_heads * attn.d_head, dtype=torch.float64)
    params = [x, attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, *extra_params]

    out, _ = attn(x, key_padding_mask=padding, terms=terms_of(length))
    got = torch.autograd.grad((out * weights).sum(), params)
    want_out = naive_self_attention(
        attn, x, causal=causal, padding=padding, rotate=rotate, bias=bias
    )
    want = torch.autograd.grad((want_out * weights).sum(), params)
    torch.testing.assert_close(out, want_out, rtol=0, atol=atol)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=atol)
