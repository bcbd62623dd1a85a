"""scripts/bench_products_in_place.py: each product of an update timed where it is called, with
the layout it is called in, and replayed alone in that layout."""

from __future__ import annotations

import torch

from ..conftest import load_script

in_place = load_script("bench_products_in_place")


def test_the_timer_sees_each_product_with_its_operands_layout():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 8, bias=False))
    x = torch.randn(64, 16)
    with in_place.ProductTimer() as timer:
        net(x).square().sum().backward()
    f32 = torch.float32
    # forward: addmm(bias, x, W1^T), mm(h, W2^T); the weights enter as transposed views
    addmm = ("addmm", f32, (((32,), (1,)), ((64, 16), (16, 1)), ((16, 32), (1, 16))))
    assert len(timer.seconds[addmm]) == 1
    assert in_place.describe(addmm) == "addmm 64x16 @ 16x32^T"
    forward = ("mm", f32, (((64, 32), (32, 1)), ((32, 8), (1, 32))))
    assert in_place.describe(forward) == "mm 64x32 @ 32x8^T"
    assert len(timer.seconds[forward]) == 1
    # backward: two weight gradients and the gradient into the second layer's input
    assert sum(len(v) for v in timer.seconds.values()) == 5
    assert all(t >= 0 for v in timer.seconds.values() for t in v)


def test_a_replayed_product_keeps_the_layout_unless_asked_for_contiguous_operands():
    key = ("bmm", torch.bfloat16, (((3, 6, 4), (24, 1, 6)), ((3, 4, 5), (20, 5, 1))))
    strided = in_place.operands(key, contiguous=False)
    assert [t.stride() for t in strided] == [(24, 1, 6), (20, 5, 1)]
    assert all(t.dtype == torch.bfloat16 for t in strided)
    dense = in_place.operands(key, contiguous=True)
    assert [t.shape for t in dense] == [(3, 6, 4), (3, 4, 5)] and dense[0].is_contiguous()
    assert in_place.describe(key) == "bmm 3x6x4^T @ 3x4x5"
    sliced = ("mm", torch.float32, (((6, 4), (8, 1)), ((4, 5), (5, 1))))  # every other row
    assert in_place.describe(sliced) == "mm 6x4~ @ 4x5"
    assert in_place.replay(sliced, contiguous=False, flush=torch.zeros(16), calls=3) > 0


def test_a_replay_with_copies_makes_each_strided_operand_contiguous_first(monkeypatch):
    seen = []
    monkeypatch.setattr(
        torch, "mm", lambda a, b: seen.append((a.is_contiguous(), b.is_contiguous()))
    )
    key = ("mm", torch.float32, (((6, 4), (1, 6)), ((4, 5), (5, 1))))  # the first transposed
    in_place.replay(key, contiguous=False, flush=None, calls=2, copy=True)
    assert seen and all(pair == (True, True) for pair in seen)
    seen.clear()
    in_place.replay(key, contiguous=False, flush=None, calls=2)
    assert seen and all(pair == (False, True) for pair in seen)
