"""The steps scripts/bench_attention.py times (each one forward + backward) and their sizes.

    core_step      part 1: the attention core (none, aK, aK+aV through relative_attention; the
                   paper's materialised (n, n, Dh) tensors, defined only here as the baseline)
    PositionStep   part 2: self-attention with a position method's own term, built in each step
    relative_form  parts 2 and 3: the relative terms in the form a name ends in (FORMS)

bench_attention.py imports them; its --peak-of subprocess runs them again for memory.
"""

from __future__ import annotations

import contextlib

import torch

from rpr_nmt.model import attention_kernels
from rpr_nmt.model.attention import relative_attention, relative_position_index
from rpr_nmt.model.attention_kernels import fused_attention
from rpr_nmt.model.positions.alibi import ALiBi
from rpr_nmt.model.positions.rope import Rotary
from rpr_nmt.model.positions.t5 import T5Bias

METHODS = ["none", "aK", "aK+aV", "materialised"]
POSITION_METHODS = ["plain", "rope", "alibi", "t5", "t5 via SDPA", "shaw"]
# The forms of the relative terms (attention_kernels): on CUDA, t5 and shaw in both of the first two
# at every n of part 2 (the model picks one by query length: attention_kernels.diagonals_apply), and
# shaw by query up to BY_QUERY_MAX_N; in part 3 every form, on every device.
FORMS = (" by gather", " per diagonal", " by query")
BY_FORM = [m + form for form in FORMS[:2] for m in ("t5", "shaw")]
BY_QUERY_MAX_N = 512
H, DH, K, TOKENS = 8, 64, 16, 4096


def materialised_attention(q, k, v, rel_keys, rel_values, max_relative_position):
    """The paper's section 3.3: gather (n, n, Dh) tensors a^K, a^V, then batched matmuls."""
    B, Hh, T, Dh = q.shape
    index = relative_position_index(T, T, max_relative_position, device=q.device)
    a_k, a_v = rel_keys[index], rel_values[index]  # (T, T, Dh) each
    q = q / Dh**0.5
    q_t = q.permute(2, 0, 1, 3).reshape(T, B * Hh, Dh)  # (T, B*H, Dh)
    position = (q_t @ a_k.transpose(1, 2)).view(T, B, Hh, T).permute(1, 2, 0, 3)  # (B, H, T, T)
    alpha = torch.softmax(q @ k.transpose(-1, -2) + position, dim=-1)  # (B, H, T, T)
    alpha_t = alpha.permute(2, 0, 1, 3).reshape(T, B * Hh, T)  # (T, B*H, T)
    z_pos = (alpha_t @ a_v).view(T, B, Hh, Dh).permute(1, 2, 0, 3)  # (B, H, T, Dh)
    return alpha @ v + z_pos


def core_inputs(n, device, dtype):
    gen = torch.Generator().manual_seed(n)
    B = max(1, TOKENS // n)
    qkv = [torch.randn(B, H, n, DH, generator=gen) for _ in range(3)]
    tables = [torch.randn(2 * K + 1, DH, generator=gen) * 0.1 for _ in range(2)]
    grad = torch.randn(B, H, n, DH, generator=gen)
    leaves = [t.to(device, dtype).requires_grad_() for t in qkv + tables]
    return leaves, grad.to(device, dtype)


def core_step(method, leaves, grad):
    q, k, v, wk, wv = leaves
    if method == "materialised":
        out = materialised_attention(q, k, v, wk, wv, K)
    else:
        tables = {"none": (None, None), "aK": (wk, None), "aK+aV": (wk, wv)}[method]
        out = relative_attention(
            q, k, v, rel_keys=tables[0], rel_values=tables[1], max_relative_position=K
        )
    out.backward(grad)
    for t in leaves:
        t.grad = None


@contextlib.contextmanager
def relative_form(name: str):
    """For a name ending in one of FORMS, relative terms in that form on every device from two
    queries on: by gather / scatter-add, per diagonal (Diagonals) or by query (ByQuery, Shaw's
    only); else as the model picks."""
    saved = (
        attention_kernels.DIAGONAL_DEVICES,
        attention_kernels.DIAGONALS_ABOVE,
        attention_kernels.BY_QUERY_DEVICES,
    )
    everywhere = ("cpu", "cuda")
    if name.endswith(" by gather"):
        attention_kernels.DIAGONAL_DEVICES, attention_kernels.BY_QUERY_DEVICES = (), ()
    elif name.endswith(" per diagonal"):
        attention_kernels.DIAGONAL_DEVICES, attention_kernels.DIAGONALS_ABOVE = everywhere, 1
    elif name.endswith(" by query"):
        attention_kernels.DIAGONAL_DEVICES, attention_kernels.BY_QUERY_DEVICES = (), everywhere
    try:
        yield
    finally:
        (
            attention_kernels.DIAGONAL_DEVICES,
            attention_kernels.DIAGONALS_ABOVE,
            attention_kernels.BY_QUERY_DEVICES,
        ) = saved


def form_the_model_takes(device: torch.device, n: int) -> str:
    """The form of Shaw's terms the model takes for n queries on `device` (attention_kernels)."""
    if attention_kernels.diagonals_apply(device, n):
        return "per diagonal"
    return "by query" if attention_kernels.by_query_applies(device) else "by gather"


class PositionStep:
    """One forward + backward of self-attention with a position method's own term (part 2).

    The method's module (and its learned parameters: T5's biases, Shaw's tables) is made once; its
    term (rotation, bias) is built inside every step, as a stack builds it once per forward.
    """

    def __init__(self, method: str, device: torch.device, dtype: torch.dtype) -> None:
        self.method, self.device = method, device
        self.rotary = Rotary(d_head=DH, rope_dims=None, base=10000.0, layout="interleaved")
        self.alibi = ALiBi(H)
        self.t5 = T5Bias(n_heads=H, num_buckets=32, max_distance=128, bidirectional=True)
        gen = torch.Generator().manual_seed(0)
        tables = [torch.randn(H, 2 * K + 1, DH, generator=gen) * 0.1 for _ in range(2)]
        self.tables = [t.to(device, dtype).requires_grad_() for t in tables]
        self.t5.to(device, dtype)

    def __call__(self, leaves: list[torch.Tensor], grad: torch.Tensor) -> None:
        method = self.method
        for form in FORMS:
            method = method.removesuffix(form)
        with relative_form(self.method):
            return self.step(method, leaves, grad)

    def step(self, m: str, leaves: list[torch.Tensor], grad: torch.Tensor) -> None:
        q, k, v = leaves[:3]
        n = q.size(-2)
        if m == "plain":
            out = relative_attention(q, k, v)
        elif m == "rope":
            rotation = self.rotary.rotation(n, 0, self.device)
            out = relative_attention(rotation(q), rotation(k), v)
        elif m == "alibi":
            out = relative_attention(q, k, v, bias=self.alibi.bias(n, n, 0, self.device))
        elif m == "t5":
            out = relative_attention(q, k, v, bias=self.t5.bias(n, n, 0, self.device))
        elif m == "t5 via SDPA":
            bias = self.t5.bias(n, n, 0, self.device).to(q.dtype)  # (H, n, n), requires grad
            out = fused_attention(
                q, k, v, causal=False, key_padding_mask=None, q_offset=0, dropout_p=0.0, bias=bias
            )
        elif m == "shaw":
            wk, wv = self.tables
            out = relative_attention(q, k, v, rel_keys=wk, rel_values=wv, max_relative_position=K)
        else:
            raise ValueError(f"unknown position method {m!r}; one of {POSITION_METHODS}")
        out.backward(grad)
        for t in [*leaves, *self.tables, *self.t5.parameters()]:
            t.grad = None
