"""train.compile=true on the CPU: the compiled model trains as the eager one does, and a twin with
compiled layers (train.compile_scope=layers) trains the model's own weights and leaves it eager."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import build_model
from rpr_nmt.train import train
from rpr_nmt.train.setup import with_compiled_layers
from tests.model.test_compile import METHODS, PAD, SHAPES, TINY, VOCAB, batch, forward_backward

from .conftest import compose_config, train_curve

QUIET = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.precision=fp32",
         "train.max_steps=8", "train.log_every=1", "model.dropout=0.0",
         "model.attention_dropout=0.0")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("scope", ["layers", "model"])
@pytest.mark.parametrize("positions", ["relative", "rope", "t5"])
def test_compiled_training_follows_the_eager_losses(corpus, cache_dir, tmp_path, positions, scope):
    """Batches of many shapes (the corpus's length buckets) through one compiled model: without
    dropout, whose random stream inductor draws otherwise, the losses are the eager run's."""
    settings = (*QUIET, f"positions={positions}", "model=transformer_tiny")
    eager = train(compose_config(corpus, cache_dir, *settings), tmp_path / "eager")
    compiled = train(
        compose_config(corpus, cache_dir, *settings, "train.compile=true",
                       f"train.compile_scope={scope}"),
        tmp_path / "compiled",
    )  # fmt: skip
    assert compiled["steps"] == eager["steps"] == 8
    want, got = train_curve(tmp_path / "eager"), train_curve(tmp_path / "compiled")
    assert [step for step, _ in got] == [step for step, _ in want] == list(range(1, 9))
    assert [loss for _, loss in got] == pytest.approx([loss for _, loss in want], rel=1e-4)


def check_compiled_layers(name: str) -> None:
    """Two layers of each kind, three batch shapes: the twin's outputs and the model's gradients
    are eager's, two graphs serve every layer and shape, and the model itself stays eager."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch.manual_seed(0)
    config = ModelConfig(**{**TINY, **METHODS[name], "n_encoder_layers": 2, "n_decoder_layers": 2})
    model = build_model(config, vocab_size=VOCAB, pad_id=PAD)
    keys = list(model.state_dict())
    twin = with_compiled_layers(model)
    for shape in SHAPES:
        src, tgt = batch(*shape)
        want, want_grads = forward_backward(model, model, src, tgt)
        got, got_grads = forward_backward(twin, model, src, tgt)  # the model's .grad
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        for param, grad in want_grads.items():
            torch.testing.assert_close(got_grads[param], grad, rtol=1e-4, atol=1e-5, msg=param)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2  # encoder's, decoder's
    assert list(model.state_dict()) == keys  # no _orig_mod in the model's checkpoint keys
    assert all(type(layer).__name__ == "EncoderLayer" for layer in model.encoder.layers)


# Slow: make test's tests/model/test_compile.py compares compiled Shaw with eager.
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_compiles_its_layers_once(name):
    check_compiled_layers(name)
