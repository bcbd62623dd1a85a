"""RoPE against Su et al.'s rotation (eq. 13-16), written per feature pair in float64."""

from __future__ import annotations

import math

import pytest
import torch

from rpr_nmt.model.multihead import RelativeMultiheadAttention
from rpr_nmt.model.positions import PositionTerms, Rotary

from .reference import check_against_naive

D_HEAD = 8


def paper_rotation(x: torch.Tensor, m: int, *, dims: int, base: float, interleaved: bool):
    """Eq. 13-15 for one vector x (Dh,) at position m: pair p turned by m * base^(-2p / dims)."""
    out = x.clone()
    for p in range(dims // 2):
        a, b = (2 * p, 2 * p + 1) if interleaved else (p, p + dims // 2)
        angle = m * base ** (-2 * p / dims)
        out[a] = x[a] * math.cos(angle) - x[b] * math.sin(angle)
        out[b] = x[a] * math.sin(angle) + x[b] * math.cos(angle)
    return out


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
@pytest.mark.parametrize("dims", [None, 4])
def test_rotation_is_the_papers_per_pair_rotation(layout, dims):
    rotary = Rotary(d_head=D_HEAD, rope_dims=dims, base=100.0, layout=layout)
    x = torch.randn(2, 3, 5, D_HEAD, dtype=torch.float64)
    got = rotary.rotation(5, 7, torch.device("cpu"))(x)  # positions 7 .. 11
    n = D_HEAD if dims is None else dims
    for b, h, t in [(0, 0, 0), (1, 2, 4), (0, 1, 3)]:
        want = paper_rotation(
            x[b, h, t], 7 + t, dims=n, base=100.0, interleaved=layout == "interleaved"
        )
        torch.testing.assert_close(got[b, h, t], want, rtol=0, atol=1e-6)
    if dims is not None:  # features past rope_dims pass through
        assert torch.equal(got[..., dims:], x[..., dims:])


def test_logits_depend_only_on_the_offset():
    """(R_i q) . (R_j k) = q . R_(j - i) k (eq. 16): shifting both positions changes nothing."""
    rotary = Rotary(d_head=D_HEAD, rope_dims=None, base=10000.0, layout="interleaved")
    q, k = (
        torch.randn(1, 1, 1, D_HEAD, dtype=torch.float64),
        torch.randn(1, 1, 1, D_HEAD, dtype=torch.float64),
    )

    def logit(i: int, j: int) -> float:
        cpu = torch.device("cpu")
        return float((rotary.rotation(1, i, cpu)(q) * rotary.rotation(1, j, cpu)(k)).sum())

    assert logit(3, 5) == pytest.approx(logit(40, 42), abs=1e-5)
    assert logit(3, 5) != pytest.approx(logit(3, 6), abs=1e-3)


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
@pytest.mark.parametrize("causal,padded", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("length", [5, 10])  # 10 > FEW_QUERIES: PyTorch's fused kernel
def test_attention_matches_naive_loop_forward_and_backward(layout, causal, padded, length):
    torch.manual_seed(1)
    attn = RelativeMultiheadAttention(2 * D_HEAD, 2, causal=causal)
    rotary = Rotary(d_head=D_HEAD, rope_dims=6, base=100.0, layout=layout)

    def rotate(x, m):
        return paper_rotation(x, m, dims=6, base=100.0, interleaved=layout == "interleaved")

    def terms_of(length):
        return PositionTerms(rotation=rotary.rotation(length, 0, torch.device("cpu")))

    # The angles are float32 (the same on every device and dtype): agreement to 1e-6.
    check_against_naive(
        attn, terms_of, length=length, causal=causal, padded=padded, rotate=rotate, atol=1e-6
    )


def test_refuses_odd_or_too_many_dims_and_unknown_layouts():
    with pytest.raises(ValueError, match="model.rope_dims=5"):
        Rotary(d_head=8, rope_dims=5, base=10000.0, layout="interleaved")
    with pytest.raises(ValueError, match="model.rope_dims=10"):
        Rotary(d_head=8, rope_dims=10, base=10000.0, layout="interleaved")
    with pytest.raises(ValueError, match="model.rope_layout='neox'"):
        Rotary(d_head=8, rope_dims=None, base=10000.0, layout="neox")


def pairwise_rotation(rotation, x: torch.Tensor) -> torch.Tensor:
    """The rotation as the code before it turned each feature at once: the two halves of each
    pair apart, (a cos - b sin, a sin + b cos), stacked or concatenated back."""
    rotated = 2 * rotation.cos.size(-1)
    head, rest = x[..., :rotated], x[..., rotated:]
    cos, sin = rotation.cos.to(x.dtype), rotation.sin.to(x.dtype)
    if rotation.interleaved:
        a, b = head[..., 0::2], head[..., 1::2]
        turned = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    else:
        a, b = head.chunk(2, dim=-1)
        turned = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return turned if rest.size(-1) == 0 else torch.cat((turned, rest), dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["interleaved", "halves"])
@pytest.mark.parametrize("dims", [None, 6])
@pytest.mark.parametrize("split_heads", [False, True])
def test_rotation_per_feature_is_the_pairwise_rotation_bit_for_bit(
    layout, dims, dtype, split_heads
):
    """The published RoPE runs trained with the pairwise form: forward and backward equal it, and
    so does the output's memory layout, which AVX2 CPUs' matmuls round by, for queries and keys as
    split_heads gives them ((B, T, H, Dh) in memory, viewed as (B, H, T, Dh))."""
    rotary = Rotary(d_head=D_HEAD, rope_dims=dims, base=10000.0, layout=layout)
    rotation = rotary.rotation(9, 3, torch.device("cpu"))
    x = torch.randn(2, 9, 3, D_HEAD).to(dtype)  # (B, T, H, Dh)
    x = x if split_heads else x.transpose(1, 2).contiguous()  # (B, H, T, Dh) contiguous
    out_grad = torch.randn(2, 3, 9, D_HEAD).to(dtype)
    results = []
    for rotate in (rotation, lambda t: pairwise_rotation(rotation, t)):
        leaf = x.clone().requires_grad_()
        y = rotate(leaf.transpose(1, 2) if split_heads else leaf)
        y.backward(out_grad)
        results.append((y.detach(), leaf.grad))
    assert results[0][0].dtype == dtype
    assert results[0][0].equal(results[1][0]) and results[0][1].equal(results[1][1])
    assert results[0][0].stride() == results[1][0].stride()
    assert results[0][1].stride() == results[1][1].stride()
