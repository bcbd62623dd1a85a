"""The products with the relative tables' rows (attention_kernels.dot_rows / mix_rows): einsum's
arithmetic bit for bit (the published sweeps trained with einsum), forward and backward, with fewer
dispatched ops than einsum and no more memory kept for the backward."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.model import attention_kernels, relative_attention

from ..conftest import load_script

B, H, TQ, TK, DH, K = 5, 3, 7, 9, 4, 3
R = 2 * K + 1


def einsum_dot_rows(q: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    heads = "h" if table.dim() == 3 else ""
    return torch.einsum(f"bhqd,{heads}rd->bhqr", q, table)


def einsum_mix_rows(weights: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    heads = "h" if table.dim() == 3 else ""
    return torch.einsum(f"bhqr,{heads}rd->bhqd", weights, table)


CountOps = load_script("bench_dispatch").CountOps  # counts every aten op dispatched inside it


def inputs(per_head: bool) -> list[torch.Tensor]:
    """q, k, v in the model's layout (heads split from (B, T, D) by a transposed view), w^K, w^V."""
    g = torch.Generator().manual_seed(7 if per_head else 8)
    heads = [torch.randn(B, t, H, DH, generator=g).transpose(1, 2) for t in (TQ, TK, TK)]
    table = (H, R, DH) if per_head else (R, DH)
    return [*heads, torch.randn(table, generator=g), torch.randn(table, generator=g)]


def attention_and_grads(leaves: list[torch.Tensor], *, bf16: bool = False) -> list[torch.Tensor]:
    q, k, v, wk, wv = (t.detach().clone().requires_grad_() for t in leaves)
    padding = torch.zeros(B, TK, dtype=torch.bool)
    padding[1, -2:] = True
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        z = relative_attention(
            q, k, v, rel_keys=wk, rel_values=wv, max_relative_position=K, key_padding_mask=padding
        )  # (B, H, TQ, DH)
    (z.float() * torch.linspace(-1, 1, z.numel()).view_as(z)).sum().backward()
    return [z.detach(), q.grad, k.grad, v.grad, wk.grad, wv.grad]


def by_einsum(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on (the test's end undoes it) the attention takes the products by einsum."""
    monkeypatch.setattr(attention_kernels, "dot_rows", einsum_dot_rows)
    monkeypatch.setattr(attention_kernels, "mix_rows", einsum_mix_rows)


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
def test_relative_attention_computes_einsums_values_bit_for_bit(per_head, bf16, monkeypatch):
    leaves = inputs(per_head)
    got = attention_and_grads(leaves, bf16=bf16)
    by_einsum(monkeypatch)
    want = attention_and_grads(leaves, bf16=bf16)
    for name, a, b in zip(["z", "q", "k", "v", "w^K", "w^V"], got, want):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
def test_the_products_dispatch_fewer_ops_than_einsum(per_head, monkeypatch):
    """What writing the bmm out is for: fewer ops for an eager update's host to dispatch."""
    leaves = inputs(per_head)

    def counted() -> int:
        with CountOps() as counter:
            attention_and_grads(leaves)
        return sum(counter.ops.values())

    ours = counted()
    by_einsum(monkeypatch)
    assert ours < counted() - 20


@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
def test_no_more_memory_is_kept_for_the_backward_than_by_einsum(per_head, monkeypatch):
    """A broadcasting matmul (q @ table) kept a copy of the per-head tables for every sentence."""
    leaves = inputs(per_head)

    def kept_bytes() -> int:
        total = 0

        def pack(t: torch.Tensor) -> torch.Tensor:
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            attention_and_grads(leaves)
        return total

    ours = kept_bytes()
    by_einsum(monkeypatch)
    assert ours <= kept_bytes()
