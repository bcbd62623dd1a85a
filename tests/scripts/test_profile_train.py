"""scripts/profile_train.py: each operator's self time put in the kind of work that spent it."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.train.loss import label_smoothed_loss

from ..conftest import load_script

profile = load_script("profile_train")


def test_operators_fall_in_their_kind_and_scopes_take_what_is_not_a_matmul():
    assert profile.kind_of("aten::mm", "") == "matmuls"
    assert profile.kind_of("aten::native_layer_norm_backward", "") == "layer norm"
    assert profile.kind_of("aten::random_", "") == "dropout"
    assert profile.kind_of("aten::linalg_vector_norm", "") == "optimizer"
    assert profile.kind_of("aten::some_new_op", "") == "other"
    # Under the loss or the optimizer, everything but a matmul is theirs.
    assert profile.kind_of("aten::exp_", "loss") == "loss"
    assert profile.kind_of("aten::lerp_", "optimizer") == "optimizer"
    assert profile.kind_of("aten::mm", "loss") == "matmuls"


class _TinyRunner:
    """A linear output layer, the trainer's loss and Adam: all profile_variant needs of one."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(16, 50)
        self.optimizer = torch.optim.Adam(self.layer.parameters())

    def run(self, batches: list[torch.Tensor]) -> tuple[int, float]:
        for x in batches:
            target = torch.arange(x.shape[0]) % 50
            loss, _ = label_smoothed_loss(self.layer(x), target, epsilon=0.1, pad_id=0)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
        return sum(x.shape[0] for x in batches), 1.0


def test_a_profiled_update_charges_the_loss_and_the_optimizer_to_their_kinds():
    batches = [torch.randn(64, 16) for _ in range(4)]
    by_kind, by_op, seconds = profile.profile_variant(_TinyRunner(), batches, steps=2)
    assert seconds == 1.0
    assert by_kind["loss"] > 0 and by_kind["optimizer"] > 0 and by_kind["matmuls"] > 0
    # the loss's exp and log-sum-exp, and Adam's updates, are not left as elementwise work
    exps = [op for op in by_op if op.split(" ")[0] in ("aten::exp", "aten::exp_")]
    assert exps and all(op.endswith("(loss)") for op in exps)
    adam = [op for op in by_op if op.split(" ")[0] in ("aten::lerp_", "aten::addcdiv_")]
    assert adam and all(op.endswith("(optimizer)") for op in adam)
    assert sum(by_op.values()) == pytest.approx(sum(by_kind.values()))
