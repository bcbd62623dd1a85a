"""Every position method on CUDA (pytest -m gpu on a GPU machine): forward and backward against
the CPU in float32, cached decoding against the full forward, a bf16 forward near float32, and the
layers compiled as train.compile=true compiles them (triton) against eager.

Without CUDA every test here is skipped with the reason. TF32 stays off (tests/gpu/test_cuda.py),
so CUDA and CPU compute the same float32 arithmetic up to summation order; sequences are longer
than FEW_QUERIES, so that the encoder and the decoder's training forward take the fused kernel
wherever the method allows it (every method but Shaw's and T5's).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import attention_kernels, build_model
from rpr_nmt.model.attention import shaw_pairs
from rpr_nmt.model.attention_kernels import DIAGONALS_ABOVE, FEW_QUERIES, ByQuery
from rpr_nmt.train.setup import with_compiled_layers

from ..model.test_transformer import check_cached_decoding
from .test_cuda import _no_tf32  # noqa: F401  (an autouse fixture: TF32 off here too)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device: run pytest -m gpu on a GPU"
    ),
]

CUDA = torch.device("cuda")
VOCAB, PAD = 31, 0
TINY = dict(
    d_model=32, n_heads=4, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0,
    attention_dropout=0.0, pre_norm=True, max_relative_position=0, sinusoidal=False,
)  # fmt: skip
# Each method of the position study as configs/positions/ sets it (tables shrunk to the toy size).
METHODS = {
    "sinusoid": dict(sinusoidal=True, relative_positions="none"),
    "shaw": dict(max_relative_position=4),
    "learned": dict(absolute_positions="learned", relative_positions="none", max_positions=64),
    "none": dict(absolute_positions="none", relative_positions="none"),
    "rope": dict(absolute_positions="none", relative_positions="rope"),
    "alibi": dict(absolute_positions="none", relative_positions="alibi"),
    "t5": dict(absolute_positions="none", relative_positions="t5", t5_num_buckets=8,
               t5_max_distance=12, share_relative_across_layers=True),
    # model.positions_in: the methods in one stack only (experiment=where_positions)
    "shaw_decoder_only": dict(max_relative_position=4, positions_in="decoder"),
    "rope_encoder_only": dict(absolute_positions="none", relative_positions="rope",
                              positions_in="encoder"),
}  # fmt: skip


def tiny(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(ModelConfig(**{**TINY, **METHODS[name]}), vocab_size=VOCAB, pad_id=PAD)


def batch(n: int = 3, s: int = 2 * FEW_QUERIES + 5, t: int = 2 * FEW_QUERIES + 3):
    """src (n, s) with padding in two rows, tgt (n, t); both past the few-query path."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, VOCAB, (n, s), generator=g)
    src[1, -3:] = src[2, -1:] = PAD
    return src, torch.randint(4, VOCAB, (n, t), generator=g)


def logits_and_grads(forward, model: torch.nn.Module, src, tgt) -> tuple[torch.Tensor, dict]:
    """forward's logits (B, T, V) and the gradients a fixed weighting of them leaves on model's
    parameters (forward: the model, or a twin sharing its parameters), both on the CPU."""
    model.zero_grad()
    logits = forward(src, tgt)  # (B, T, V)
    weights = torch.linspace(-1, 1, logits.numel(), device=logits.device).view_as(logits)
    (logits * weights).sum().backward()
    grads = {k: p.grad.cpu() for k, p in model.named_parameters() if p.grad is not None}
    return logits.detach().cpu(), grads


@pytest.mark.parametrize("name", list(METHODS))
def test_forward_and_backward_on_cuda_equal_the_cpu(name):
    src, tgt = batch()
    results = {}
    for device in ("cpu", "cuda"):
        model = tiny(name).to(device)
        results[device] = logits_and_grads(model, model, src.to(device), tgt.to(device))
    torch.testing.assert_close(results["cuda"][0], results["cpu"][0], atol=2e-5, rtol=1e-4)
    assert results["cuda"][1].keys() == results["cpu"][1].keys()
    for key, grad in results["cpu"][1].items():
        torch.testing.assert_close(results["cuda"][1][key], grad, atol=5e-5, rtol=1e-4, msg=key)


@pytest.mark.parametrize("name", list(METHODS))
def test_cached_decoding_on_cuda_equals_the_full_forward(name):
    """One target at a time, then a block after a cached prefix (the fused kernel's float32
    summation order differs from the own path's by more than on the CPU: 1e-4)."""
    src, tgt = (x.to(CUDA) for x in batch())
    check_cached_decoding(tiny(name).to(CUDA), src, tgt, tolerance=1e-4)


@pytest.mark.parametrize("name", list(METHODS))
def test_bf16_autocast_forward_on_cuda_stays_near_float32(name):
    """bf16 operands: relative error of the logits between 1e-3 and 1e-2, never NaN."""
    model = tiny(name).to(CUDA).eval()
    src, tgt = (x.to(CUDA) for x in batch())
    with torch.no_grad():
        reference = model(src, tgt).double()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            low = model(src, tgt).double()
    assert torch.isfinite(low).all()
    assert ((low - reference).norm() / reference.norm()).item() < 2e-2


@pytest.mark.parametrize("name", ["shaw", "sinusoid"])
def test_compiled_layers_on_cuda_equal_eager(name):
    """The two variants the GPU sitting times compiled: eager's logits and gradients over two batch
    shapes (one compile; dropout off, whose random stream inductor draws otherwise)."""
    check_compiled_layers(name, [(3, 2 * FEW_QUERIES + 5, 2 * FEW_QUERIES + 3),
                                 (4, 2 * FEW_QUERIES + 9, 40)])  # fmt: skip


def test_shaw_per_diagonal_compiled_layers_on_cuda_equal_eager():
    """Sequences past DIAGONALS_ABOVE, where CUDA builds Shaw's terms per diagonal: traced without
    a graph break (Diagonals.of_window reads no tensor), eager's values."""
    n = DIAGONALS_ABOVE + 5
    torch._dynamo.utils.counters.clear()
    check_compiled_layers("shaw", [(3, n, n - 2), (3, n + 7, n + 3)])
    assert not torch._dynamo.utils.counters["graph_break"]


def check_compiled_layers(name: str, shapes: list[tuple[int, int, int]]) -> None:
    """The twin with compiled layers against the eager model, batch by (n, s, t) batch; a gradient
    to 5e-5 of its largest entry (or absolutely, below 1: float32 sums over long sequences round
    by more, gather and per diagonal alike). Compiled anew: no graph of an earlier test's form."""
    torch._dynamo.reset()
    model = tiny(name).to(CUDA)
    twin = with_compiled_layers(model)
    for n, s, t in shapes:
        src, tgt = (x.to(CUDA) for x in batch(n, s, t))
        want, want_grads = logits_and_grads(model, model, src, tgt)
        got, got_grads = logits_and_grads(twin, model, src, tgt)
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
        for key, grad in want_grads.items():
            atol = 5e-5 * max(1.0, grad.abs().max().item())
            torch.testing.assert_close(got_grads[key], grad, atol=atol, rtol=1e-4, msg=key)


@pytest.fixture
def by_query(monkeypatch):
    """Shaw's terms on CUDA as the paper computes them (attention_kernels.ByQuery), the form the
    sitting times against gather; the CPU keeps gather."""
    monkeypatch.setattr(attention_kernels, "BY_QUERY_DEVICES", ("cuda",))
    assert isinstance(shaw_pairs(20, 20, 4, 0, causal=False, device=CUDA).rows, ByQuery)


def test_shaw_by_query_on_cuda_equals_gather_on_the_cpu(by_query):
    test_forward_and_backward_on_cuda_equal_the_cpu("shaw")


def test_shaw_by_query_cached_decoding_on_cuda_equals_the_full_forward(by_query):
    test_cached_decoding_on_cuda_equals_the_full_forward("shaw")


def test_shaw_by_query_compiled_layers_on_cuda_equal_eager(by_query):
    test_compiled_layers_on_cuda_equal_eager("shaw")
