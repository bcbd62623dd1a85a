"""The products with the relative tables' rows (attention_kernels.dot_rows / mix_rows): by matmul
on CUDA, by einsum elsewhere. Run on the CPU by adding it to MATMUL_DEVICES: the same values,
forward and backward, with fewer dispatched ops; the CPU itself keeps einsum's arithmetic."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rpr_nmt.model import attention_kernels, relative_attention
from rpr_nmt.model.attention_kernels import dot_rows, mix_rows

B, H, TQ, TK, DH, K = 2, 3, 7, 9, 4, 3
R = 2 * K + 1


class CountOps(TorchDispatchMode):
    """Counts every aten op dispatched inside it (what an eager update's host dispatches)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def inputs(per_head: bool, dtype=torch.float64) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(7 if per_head else 8)
    table = (H, R, DH) if per_head else (R, DH)
    shapes = [(B, H, TQ, DH), (B, H, TK, DH), (B, H, TK, DH), table, table]
    return [torch.randn(s, generator=g, dtype=dtype) for s in shapes]


def attention_and_grads(leaves: list[torch.Tensor]) -> list[torch.Tensor]:
    q, k, v, wk, wv = (t.clone().requires_grad_() for t in leaves)
    padding = torch.zeros(B, TK, dtype=torch.bool)
    padding[1, -2:] = True
    z = relative_attention(
        q, k, v, rel_keys=wk, rel_values=wv, max_relative_position=K, key_padding_mask=padding
    )  # (B, H, TQ, DH)
    (z * torch.linspace(-1, 1, z.numel(), dtype=z.dtype).view_as(z)).sum().backward()
    return [z.detach(), q.grad, k.grad, v.grad, wk.grad, wv.grad]


def matmul_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on (the test's end undoes it) the CPU takes CUDA's matmul form."""
    monkeypatch.setattr(
        attention_kernels, "MATMUL_DEVICES", (*attention_kernels.MATMUL_DEVICES, "cpu")
    )


@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
def test_the_cpu_keeps_einsums_arithmetic_bit_for_bit(per_head):
    """The published CPU sweeps trained with einsum: the CPU must compute exactly that."""
    q, _, _, table, _ = inputs(per_head, dtype=torch.float32)
    weights = torch.softmax(torch.randn(B, H, TQ, R), dim=-1)
    heads = "h" if per_head else ""
    assert torch.equal(dot_rows(q, table), torch.einsum(f"bhqd,{heads}rd->bhqr", q, table))
    assert torch.equal(
        mix_rows(weights, table), torch.einsum(f"bhqr,{heads}rd->bhqd", weights, table)
    )


@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
def test_relative_attention_by_matmul_equals_by_einsum_forward_and_backward(per_head, monkeypatch):
    leaves = inputs(per_head)
    by_einsum = attention_and_grads(leaves)
    matmul_on_the_cpu(monkeypatch)
    by_matmul = attention_and_grads(leaves)
    for name, got, want in zip(["z", "q", "k", "v", "w^K", "w^V"], by_matmul, by_einsum):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, msg=name)


@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
def test_matmul_dispatches_fewer_ops_than_einsum(per_head, monkeypatch):
    """What the matmul form is for: fewer ops for an eager update's host to dispatch."""
    leaves = inputs(per_head)

    def counted() -> int:
        with CountOps() as counter:
            attention_and_grads(leaves)
        return sum(counter.ops.values())

    by_einsum = counted()
    matmul_on_the_cpu(monkeypatch)
    by_matmul = counted()
    assert by_matmul < by_einsum - 20, (by_matmul, by_einsum)
