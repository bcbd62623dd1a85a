"""Arithmetic 2 (rpr_nmt/model/arithmetic.py) against 1: shared inputs cast once, NumPy's masks.

What it must keep: the same forward values under autocast, the same numbers in fp32 (masks and
gradients too), masks decided by torch's seed at the same rate; what it may change: the bf16
gradient sums and, under CPU autocast, which elements the masks drop.
"""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import RelativeMultiheadAttention, RelativePositions, build_model
from rpr_nmt.model.arithmetic import casts_shared_inputs, current, numpy_masks, use_arithmetic
from rpr_nmt.model.dropout import dropout_mask

CPU = torch.device("cpu")


def bf16():
    return torch.autocast(device_type="cpu", dtype=torch.bfloat16)


def tiny_model(**overrides) -> torch.nn.Module:
    cfg = ModelConfig(d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2,
                      max_relative_position=4, **overrides)  # fmt: skip
    torch.manual_seed(0)
    return build_model(cfg, vocab_size=50, pad_id=0)


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randint(1, 50, (3, 9), generator=g), torch.randint(1, 50, (3, 7), generator=g)


def test_the_arithmetic_is_scoped_and_checked():
    assert current() == 1
    with use_arithmetic(2):
        assert current() == 2
        assert not numpy_masks()  # autocast is off
        assert casts_shared_inputs(torch.ones(2)) is None
        with bf16():
            assert numpy_masks()
            assert casts_shared_inputs(torch.ones(2)) == torch.bfloat16
            assert casts_shared_inputs(torch.ones(2, dtype=torch.bfloat16)) is None
    assert current() == 1
    with bf16():
        assert not numpy_masks() and casts_shared_inputs(torch.ones(2)) is None
    with pytest.raises(ValueError, match="arithmetic must be one of"):
        with use_arithmetic(3):
            pass


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_casting_once_keeps_the_forward_values_and_rounds_only_the_gradient(cross):
    torch.manual_seed(0)
    attn = RelativeMultiheadAttention(32, 4, relative=RelativePositions(k=0 if cross else 4))
    x = torch.randn(2, 6, 32)
    memory = torch.randn(2, 5, 32) if cross else None
    outputs, grads = {}, {}
    for arithmetic in (1, 2):
        leaf = (memory if cross else x).clone().requires_grad_()
        shared = (
            leaf * 1.0
        )  # not a leaf, as a layer norm's output is: autocast caches leaves' casts
        with use_arithmetic(arithmetic), bf16():
            out, _ = attn(x, shared) if cross else attn(shared)
        out.float().square().sum().backward()
        outputs[arithmetic], grads[arithmetic] = out.detach(), leaf.grad
    assert outputs[2].dtype == torch.bfloat16
    assert torch.equal(outputs[1], outputs[2])
    assert grads[2].dtype == torch.float32
    assert not torch.equal(grads[1], grads[2])  # the input was cast once: one bf16 sum
    # k and v (and q) gradients summed in bf16 before the cast: rounding, not another gradient.
    torch.testing.assert_close(grads[2], grads[1], rtol=0.03, atol=0.03 * grads[1].abs().max())


def test_the_whole_model_gives_the_same_logits_under_either_arithmetic():
    model = tiny_model().eval()
    src, tgt = batch()
    logits = {}
    for arithmetic in (1, 2):
        with torch.no_grad(), use_arithmetic(arithmetic), bf16():
            logits[arithmetic] = model(src, tgt)
    assert torch.equal(logits[1], logits[2])


def test_fp32_training_is_the_same_under_either_arithmetic():
    """Masks, losses and gradients to the last bit: arithmetic 2 acts under autocast only."""
    src, tgt = batch()
    results = []
    for arithmetic in (1, 2):
        model = tiny_model(dropout=0.3, attention_dropout=0.2).train()
        torch.manual_seed(5)
        with use_arithmetic(arithmetic):
            loss = model(src, tgt).float().logsumexp(-1).mean()
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (loss1, grads1), (loss2, grads2) = results
    assert torch.equal(loss1, loss2)
    assert all(torch.equal(a, b) for a, b in zip(grads1, grads2, strict=True))


def test_numpy_masks_follow_torchs_seed_at_the_same_rate():
    def mask(arithmetic: int, seed: int, autocast: bool = True) -> torch.Tensor:
        torch.manual_seed(seed)
        with (
            use_arithmetic(arithmetic),
            bf16() if autocast else torch.autocast("cpu", enabled=False),
        ):
            return dropout_mask((1000, 1000), 0.1, CPU)

    assert torch.equal(mask(2, 7), mask(2, 7))  # torch's seed decides them
    assert not torch.equal(mask(2, 7), mask(2, 8))
    assert not torch.equal(mask(2, 7), mask(1, 7))  # another stream than torch's words
    assert torch.equal(mask(1, 7), mask(1, 7, autocast=False))  # arithmetic 1: torch's, as before
    assert torch.equal(mask(2, 7, autocast=False), mask(1, 7, autocast=False))  # fp32: as before
    lanes = mask(2, 3).flatten().view(-1, 4).float()  # 250k samples per 16-bit lane
    assert torch.allclose(1.0 - lanes.mean(dim=0), torch.full((4,), 0.1), atol=0.005)
    # A draw moves torch's generator on, so the next mask is another one.
    torch.manual_seed(9)
    with use_arithmetic(2), bf16():
        first, second = (dropout_mask((64, 64), 0.5, CPU) for _ in range(2))
    assert not torch.equal(first, second)
