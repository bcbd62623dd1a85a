"""scripts/bench_rope_rotation.py: its flip-free form is the model's rotation, bit for bit."""

from __future__ import annotations

import torch

from rpr_nmt.model.positions.rope import Rotary

from ..conftest import load_script

bench = load_script("bench_rope_rotation")


def test_the_pair_form_turns_every_pair_as_the_model_does_forward_and_backward():
    rotation = Rotary(d_head=8, rope_dims=None, base=10000.0, layout="interleaved").rotation(
        5, 3, torch.device("cpu")
    )
    torch.manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2, 5, 3, 8).to(dtype).transpose(1, 2)  # (B, H, T, Dh) as split_heads
        grad = torch.randn(2, 3, 5, 8).to(dtype)
        outputs = []
        for form in (rotation, bench.pair_form(rotation)):
            leaf = x.clone().requires_grad_()
            y = form(leaf)
            y.backward(grad)
            outputs.append((y, leaf.grad))
        (y_model, g_model), (y_pair, g_pair) = outputs
        assert torch.equal(y_pair, y_model) and torch.equal(g_pair, g_model)
        assert not torch.equal(y_model, x)  # positions 3.. are turned: the test has teeth
