"""The model, decoding and the update step on CUDA against the CPU (pytest -m gpu on a GPU machine).

Without CUDA every test here is skipped with the reason. On CUDA, fp32 comparisons run with TF32
off, so that CUDA and CPU compute the same float32 arithmetic up to summation order.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest
import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.decode import UncachedModel, beam_search
from rpr_nmt.model import build_model, relative_attention
from rpr_nmt.model.attention_kernels import DIAGONALS_ABOVE, FEW_QUERIES
from rpr_nmt.train import train_step
from rpr_nmt.train.distributed import DistributedContext
from rpr_nmt.train.step import autocast_factory

from ..decode.test_cached import random_src
from ..train.helpers import BOS, EOS, PAD, VOCAB, random_batch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device: run pytest -m gpu on a GPU"
    ),
]

CUDA = torch.device("cuda")
B, H, DH = 3, 4, 8
MODEL = ModelConfig(
    d_model=32, n_heads=2, d_ff=64, n_encoder_layers=2, n_decoder_layers=2, dropout=0.0,
    attention_dropout=0.0, max_relative_position=4, pre_norm=True,
)  # fmt: skip


@pytest.fixture(autouse=True)
def _no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def attention_inputs(tq: int, tk: int, k: int, per_head: bool, seed: int = 0) -> list[torch.Tensor]:
    """q, k, v (B, H, T, Dh) and tables (H, R, Dh) or (R, Dh), float32 on the CPU."""
    g = torch.Generator().manual_seed(seed)
    table = (H, 2 * k + 1, DH) if per_head else (2 * k + 1, DH)
    shapes = [(B, H, tq, DH), (B, H, tk, DH), (B, H, tk, DH), table, table]
    return [torch.randn(shape, generator=g) for shape in shapes]


@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("k", [0, 2, 16])
@pytest.mark.parametrize(
    "n", [2 * FEW_QUERIES + 3, DIAGONALS_ABOVE + 3], ids=["by_gather", "per_diagonal"]
)  # more queries than the few-query path takes; on CUDA, r_ij by gather, then per diagonal
def test_relative_attention_forward_and_backward_equal_the_cpu(per_head, causal, k, n):
    padding = torch.zeros(B, n, dtype=torch.bool)
    padding[1, n - 5 :] = padding[2, n - 1 :] = True
    results = {}
    for device in ("cpu", "cuda"):
        inputs = [t.to(device).requires_grad_() for t in attention_inputs(n, n, k, per_head)]
        q, key, v, wk, wv = inputs
        z = relative_attention(
            q, key, v, rel_keys=wk, rel_values=wv, max_relative_position=k, causal=causal,
            key_padding_mask=padding.to(device),
        )  # fmt: skip
        (z * torch.linspace(-1, 1, z.numel(), device=device).view_as(z)).sum().backward()
        results[device] = [z.detach().cpu()] + [t.grad.cpu() for t in inputs[: 5 if k else 3]]
    for cpu, cuda in zip(results["cpu"], results["cuda"]):
        torch.testing.assert_close(cuda, cpu, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fused_kernel_without_positions_matches_the_explicit_path_with_padding(dtype):
    """k = 0 with many queries takes PyTorch's fused SDPA; it must give eq. 3-4 without tables."""
    n = 2 * FEW_QUERIES
    q, key, v, _, _ = (t.to(CUDA, dtype) for t in attention_inputs(n, n, 1, per_head=True))
    padding = torch.zeros(B, n, dtype=torch.bool, device=CUDA)
    padding[0, n - 3 :] = True
    fused = relative_attention(q, key, v, max_relative_position=0, key_padding_mask=padding)
    logits = (q.float() @ key.float().transpose(-1, -2)) / DH**0.5  # (B, H, n, n)
    logits = logits.masked_fill(padding[:, None, None, :], -torch.inf)
    explicit = torch.softmax(logits, dim=-1) @ v.float()  # (B, H, n, Dh)
    tolerance = dict(atol=2e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(fused.float(), explicit, **tolerance)


@pytest.mark.parametrize("shared", [False, True], ids=["per_head", "shared"])
def test_cached_beam_search_on_cuda_equals_recomputing_and_the_cpu(shared):
    torch.manual_seed(0)
    model = build_model(
        replace(MODEL, share_relative_across_heads=shared), vocab_size=VOCAB, pad_id=PAD
    ).eval()
    kw = dict(beam_size=3, length_penalty=0.6, max_len_a=1.0, max_len_b=4, nbest=3)
    kw.update(bos_id=BOS, eos_id=EOS, pad_id=PAD)

    def tokens(out):
        return [[h.tokens for h in nbest] for nbest in out]

    src = random_src(6)
    cpu = beam_search(model, src, **kw)
    model = model.to(CUDA)
    cached = beam_search(model, src.to(CUDA), **kw)
    uncached = beam_search(UncachedModel(model, reencode=True), src.to(CUDA), **kw)
    assert tokens(cached) == tokens(uncached) == tokens(cpu)
    for a, b in zip(cached, cpu):
        torch.testing.assert_close([h.score for h in a], [h.score for h in b], atol=1e-4, rtol=0)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_update_steps_on_cuda_learn_a_fixed_batch(precision):
    """Twenty updates on one batch: finite, applied, and the loss falls; fp16 through a scaler."""
    torch.manual_seed(0)
    model = build_model(MODEL, vocab_size=VOCAB, pad_id=PAD).to(CUDA)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None
    batch = random_batch(0, n=8, max_len=10).to(CUDA)
    settings = dict(
        ctx=DistributedContext(device=CUDA), autocast=autocast_factory(precision, CUDA),
        scaler=scaler, pad_id=PAD, label_smoothing=0.1, clip_norm=1.0,
    )  # fmt: skip
    losses = [train_step(model, optimizer, [batch], **settings) for _ in range(20)]
    assert all(r.applied for r in losses[2:])  # fp16: the scaler may skip its first updates
    assert losses[-1].loss < 0.7 * losses[0].loss
    assert all(torch.isfinite(p).all() for p in model.parameters())
    if scaler is not None:
        assert scaler.get_scale() > 0


def test_fp32_update_on_cuda_equals_the_cpu():
    results = {}
    for device in ("cpu", "cuda"):
        torch.manual_seed(0)
        model = build_model(MODEL, vocab_size=VOCAB, pad_id=PAD).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        ctx = DistributedContext(device=torch.device(device))
        result = train_step(
            model, optimizer, [random_batch(1, n=8, max_len=10).to(device)], ctx=ctx,
            autocast=contextlib.nullcontext, scaler=None, pad_id=PAD, label_smoothing=0.1,
            clip_norm=1.0,
        )  # fmt: skip
        results[device] = result.loss, {k: v.cpu() for k, v in model.state_dict().items()}
    assert results["cuda"][0] == pytest.approx(results["cpu"][0], rel=1e-5)
    for name, value in results["cpu"][1].items():
        torch.testing.assert_close(results["cuda"][1][name], value, atol=1e-5, rtol=1e-4, msg=name)
