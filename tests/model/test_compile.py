"""torch.compile of the Transformer as train.compile=true wraps it (symbolic shapes, inductor on the
CPU): what is compiled for the first batch serves batches of every shape, with the eager model's
outputs and gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import attention_kernels, build_model

VOCAB, PAD = 23, 0
TINY = dict(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0,
            attention_dropout=0.0, max_relative_position=0, pre_norm=True)  # fmt: skip
METHODS = {
    "shaw": dict(max_relative_position=3),
    "sinusoid": dict(sinusoidal=True, relative_positions="none"),
    "learned": dict(absolute_positions="learned", relative_positions="none", max_positions=40),
    "rope": dict(relative_positions="rope"),
    "alibi": dict(relative_positions="alibi"),
    "t5": dict(relative_positions="t5", t5_num_buckets=8, t5_max_distance=6),
    "none": dict(absolute_positions="none", relative_positions="none"),
}  # fmt: skip
# Both lengths above FEW_QUERIES (attention_kernels), so that every batch takes the same branches.
SHAPES = [(3, 11, 13), (2, 15, 10), (4, 12, 12)]  # (B, S, T): S < T, S > T, S = T


def inductor_counting_graphs(graphs: list[torch.fx.GraphModule]):
    """The inductor backend, noting each graph it is handed (a recompile adds one)."""
    inductor = torch._dynamo.lookup_backend("inductor")

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        graphs.append(gm)
        return inductor(gm, example_inputs)

    return backend


def batch(b: int, s: int, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(b * 100 + s)
    src = torch.randint(4, VOCAB, (b, s))
    src[0, -2:] = PAD  # a padded row: the padding mask is traced too
    return src, torch.randint(4, VOCAB, (b, t))


def forward_backward(module: nn.Module, weights: nn.Module, *inputs) -> tuple[torch.Tensor, dict]:
    weights.zero_grad()
    out = module(*inputs)  # logits (B, T, V), or the encoder's memory (B, S, D)
    out.float().square().mean().backward()
    return out.detach(), {n: p.grad.clone() for n, p in weights.named_parameters()}


def check_compiled_matches_eager(name: str, part: str = "model") -> None:
    """part: "model" (source and target in, logits out) or "encoder" (its stack alone: fewer
    kernels for inductor to compile, the same self-attention with the method's terms)."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(**{**TINY, **METHODS[name]}), vocab_size=VOCAB, pad_id=PAD)
    module = model if part == "model" else model.encoder
    graphs: list[torch.fx.GraphModule] = []
    compiled = torch.compile(module, dynamic=True, backend=inductor_counting_graphs(graphs))
    first_batch_graphs = None
    for shape in SHAPES:
        src, tgt = batch(*shape)
        inputs = (src, tgt) if part == "model" else (src, src.eq(PAD))
        want, want_grads = forward_backward(module, module, *inputs)
        got, got_grads = forward_backward(compiled, module, *inputs)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        for param, grad in want_grads.items():
            torch.testing.assert_close(got_grads[param], grad, rtol=1e-4, atol=1e-5, msg=param)
        first_batch_graphs = first_batch_graphs or len(graphs)  # dynamo may trace it twice
    assert len(graphs) == first_batch_graphs, f"{name}: recompiled for a new batch shape"


@pytest.mark.slow  # 39 s with a cold inductor cache; -m slow compiles every method, Shaw included
def test_compiled_shaw_serves_every_batch_shape_without_recompiling():
    """Shaw's clipped table window broke inductor with symbolic lengths (torch 2.13: "Exponent
    must be non-negative"); compiled, the whole table computes the same terms. The encoder alone
    here (on an AVX2 host inductor's kernels for the whole model took 96-131 s to compile, a
    sixth of make test); the whole model with -m slow below."""
    check_compiled_matches_eager("shaw", part="encoder")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_compiles_once_for_every_batch_shape(name):
    check_compiled_matches_eager(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["shaw", "t5"])
def test_compiled_terms_per_diagonal_match_eager(name, monkeypatch):
    """CUDA's per-diagonal form (long sequences), forced on the CPU. Shaw's reads how many
    diagonals share each edge row from a host tensor: a graph break in each attention, but the
    same values and still no recompile."""
    monkeypatch.setattr(attention_kernels, "DIAGONAL_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(attention_kernels, "DIAGONALS_ABOVE", 1)
    check_compiled_matches_eager(name)


def test_training_dropout_traces_without_graph_breaks():
    """In training mode the CPU's dropout masks (dropout_mask's int64 draw) broke the graph at every
    dropout; traced, the model uses F.dropout, which inductor fuses: one graph for the forward."""
    torch.manual_seed(0)
    config = ModelConfig(**{**TINY, **METHODS["shaw"], "dropout": 0.1, "attention_dropout": 0.1})
    model = build_model(config, vocab_size=VOCAB, pad_id=PAD).train()
    explanation = torch._dynamo.explain(model)(*batch(*SHAPES[0]))
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
