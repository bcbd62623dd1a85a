"""scripts/bench_gemm_shapes.py: every matrix product of an update, by shape and count."""

from __future__ import annotations

import torch

from ..conftest import load_script

shapes = load_script("bench_gemm_shapes")


def test_the_multiplied_operands_of_each_op_and_their_work():
    assert shapes.operands("aten::mm", [[6, 4], [4, 5]]) == ("mm", (6, 4), (4, 5))
    # addmm's first input is the bias, not an operand of the product
    bias_first = [[5], [6, 4], [4, 5], [], []]
    assert shapes.operands("aten::addmm", bias_first) == ("addmm", (6, 4), (4, 5))
    assert shapes.operands("aten::bmm", [[3, 6, 4], [3, 4, 5]]) == ("bmm", (3, 6, 4), (3, 4, 5))
    assert shapes.operands("aten::mm", [[], [4, 5]]) is None  # a scalar: nothing to time
    assert shapes.flops(("mm", (6, 4), (4, 5))) == 2 * 6 * 4 * 5
    assert shapes.flops(("bmm", (3, 6, 4), (3, 4, 5))) == 2 * 3 * 6 * 4 * 5


class _TwoLayers:
    """Two linear layers trained one update per batch: what update_products needs of a Runner."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 8, bias=False))

    def run(self, batches: list[torch.Tensor]) -> tuple[int, float]:
        for x in batches:
            self.net(x).square().sum().backward()
        return sum(x.shape[0] for x in batches), 1.0


def test_an_update_lists_its_forward_and_backward_products_once_each():
    calls = shapes.update_products(_TwoLayers(), torch.randn(64, 16))
    # forward: addmm for the biased layer, mm for the other; backward: each weight's gradient
    # (input^T @ grad) and the gradient flowing into the second layer's input (grad @ W)
    assert calls[("addmm", (64, 16), (16, 32))] == 1
    assert calls[("mm", (64, 32), (32, 8))] == 1
    assert calls[("mm", (8, 64), (64, 32))] == 1  # second weight's gradient
    assert calls[("mm", (64, 8), (8, 32))] == 1  # into the second layer's input
    assert calls[("mm", (32, 64), (64, 16))] == 1  # first weight's gradient
    assert sum(calls.values()) == 5  # the first layer's input needs no gradient
