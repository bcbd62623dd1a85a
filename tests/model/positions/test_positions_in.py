"""model.positions_in: the position methods in one stack only. The other stack sees no word order
of its own; the stack that has them behaves as in a model with them in both; cached decoding
still equals the full forward."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import build_model

from .test_methods import METHODS, PAD, TINY, VOCAB, batch

SETTINGS = {
    "shaw": dict(max_relative_position=4),
    "sinusoid": dict(max_relative_position=0, sinusoidal=True),
    **{name: dict(max_relative_position=0, **fields) for name, fields in METHODS.items()},
}
SETTINGS.pop("none")  # nothing to place: refused (test_setting.py)


def tiny(name: str, positions_in: str, **extra) -> torch.nn.Module:
    fields = {**TINY, "pre_norm": True, "dropout": 0.0, "attention_dropout": 0.0, **extra}
    torch.manual_seed(0)
    cfg = ModelConfig(**{**fields, **SETTINGS[name], "positions_in": positions_in})
    return build_model(cfg, vocab_size=VOCAB, pad_id=PAD).eval()


def encoder_sees_order(model: torch.nn.Module) -> bool:
    """Whether swapping the first two source words changes the memory of the words after them."""
    src, _ = batch()
    swapped = src[:, [1, 0, *range(2, src.size(1))]]
    with torch.no_grad():
        a, b = model.encode(src).memory, model.encode(swapped).memory
    return not torch.allclose(a[0, 2:], b[0, 2:], atol=1e-6)


def decoder_sees_order(model: torch.nn.Module) -> bool:
    """Whether swapping the first two target words changes the logits at the positions after them.

    One causal layer without positions sees only which words came before, not in what order; a
    second one would see order in the states below it (the state at position 0 has seen one word,
    at position 1 two): the implicit positions of causal attention, which the position probe reads
    (docs/results_positions.md)."""
    src, tgt = batch()
    swapped = tgt[:, [1, 0, *range(2, tgt.size(1))]]
    with torch.no_grad():
        a, b = model(src, tgt), model(src, swapped)
    return not torch.allclose(a[:, 2:], b[:, 2:], atol=1e-6)


@pytest.mark.parametrize("name", sorted(SETTINGS))
@pytest.mark.parametrize("positions_in", ["both", "encoder", "decoder"])
def test_only_the_stacks_named_see_word_order(name, positions_in):
    model = tiny(name, positions_in, n_decoder_layers=1)
    assert encoder_sees_order(model) == (positions_in in ("both", "encoder"))
    assert decoder_sees_order(model) == (positions_in in ("both", "decoder"))


@pytest.mark.parametrize("name", ["shaw", "sinusoid", "rope", "t5", "learned"])
@pytest.mark.parametrize("positions_in", ["encoder", "decoder"])
def test_the_stack_with_positions_is_the_one_of_the_model_with_them_in_both(name, positions_in):
    """Its parameters are those of that stack in the full model (the other stack has none of the
    method's), and with them loaded it computes the same states."""
    both, one = tiny(name, "both"), tiny(name, positions_in)
    stack = positions_in
    params_both = {k for k in both.state_dict() if k.startswith(stack + ".")}
    params_one = {k for k in one.state_dict() if k.startswith(stack + ".")}
    assert params_one == params_both
    other = "decoder" if stack == "encoder" else "encoder"
    missing = {k for k in both.state_dict() if k.startswith(other + ".")} - set(one.state_dict())
    assert bool(missing) == (name in ("shaw", "t5", "learned"))  # learned only where it is used
    assert set(one.state_dict()) <= set(both.state_dict())
    one.load_state_dict({k: v for k, v in both.state_dict().items() if k in one.state_dict()})
    src, tgt = batch()
    with torch.no_grad():
        if stack == "encoder":
            torch.testing.assert_close(one.encode(src).memory, both.encode(src).memory)
        else:  # the same memory into both decoders: the decoders agree
            memory = one.encode(src)
            torch.testing.assert_close(
                one.decode_step(tgt, memory)[0], both.decode_step(tgt, memory)[0]
            )


@pytest.mark.parametrize("name", ["shaw", "rope", "alibi", "t5", "learned", "sinusoid_rope"])
@pytest.mark.parametrize("positions_in", ["encoder", "decoder"])
def test_cached_decoding_equals_the_full_forward(name, positions_in):
    model = tiny(name, positions_in)
    src, tgt = batch()
    with torch.no_grad():
        full = model(src, tgt)
        enc, cache, steps = model.encode(src), None, []
        for t in range(tgt.size(1)):
            logits, cache = model.decode_step(tgt[:, t : t + 1], enc, cache)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)
