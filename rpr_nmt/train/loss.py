"""Label-smoothed cross-entropy, summed over non-padding target tokens.

The smoothed target distribution puts 1 - eps on the reference token and spreads eps uniformly over
the whole vocabulary (as torch's cross_entropy(label_smoothing=eps) and tensor2tensor do):

    q(v) = (1 - eps) * [v == y] + eps / V
    loss = -sum_v q(v) log p(v) = lse(x) - (1 - eps) * x_y - eps * mean_v(x_v)
    dloss/dx_v = softmax(x)_v - q(v)

with x the logits and lse the log-sum-exp. The forward pass needs only lse, x_y and the mean of each
row, and the backward pass is one softmax: computed row block by row block in float32, nothing of
size (tokens, V) is stored besides the logits and their gradient (half the memory traffic of
log_softmax + gather + mean under autograd; tests/train/test_loss.py holds that plain version).

Positions whose reference is the padding id contribute nothing. This module returns sums; the
trainer divides them by the number of non-padding target tokens of the whole update (all accumulated
batches on all ranks), so that every target token weighs the same however the update is split
across batches and processes. Reported losses are therefore per target token.
"""

from __future__ import annotations

from typing import Any

import torch


def label_smoothed_loss(
    logits: torch.Tensor, target: torch.Tensor, *, epsilon: float, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed loss and summed negative log-likelihood over non-padding positions.

    Args:
        logits: unnormalised scores; any float dtype (computed in float32).
        target: reference ids, pad_id where there is no token.
        epsilon: label smoothing (0.1 in the paper); 0 gives the plain cross-entropy.
        pad_id: id whose positions are ignored.

    Returns:
        (loss_sum, nll_sum): scalar float32 tensors (float64 for float64 logits); nll_sum is the
        unsmoothed cross-entropy (for perplexity) and carries no gradient.

    Shapes:
        logits (B, T, V), target (B, T).
    """
    vocab = logits.shape[-1]
    return _SmoothedCrossEntropy.apply(
        logits.reshape(-1, vocab), target.reshape(-1), float(epsilon), pad_id
    )


def _row_block(logits: torch.Tensor) -> int:
    """Rows per block: about 8 MiB of float32 on CPU (stays in cache), 256 MiB on a GPU."""
    budget = 2**26 if logits.is_cuda else 2**21
    return max(1, budget // logits.shape[1])


class _SmoothedCrossEntropy(torch.autograd.Function):
    """loss = sum over kept rows of lse - (1 - eps) x_y - eps mean(x); see the module docstring."""

    @staticmethod
    def forward(
        ctx: Any, logits: torch.Tensor, target: torch.Tensor, epsilon: float, pad_id: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = logits.shape[0]  # logits (N, V), target (N,)
        dtype = torch.promote_types(logits.dtype, torch.float32)  # float64 stays (gradcheck)
        lse = torch.empty(n, dtype=dtype, device=logits.device)  # (N,)
        mean = torch.empty_like(lse)  # (N,)
        block = _row_block(logits)
        for start in range(0, n, block):
            rows = logits[start : start + block].to(dtype)  # (n_block, V)
            torch.logsumexp(rows, dim=-1, out=lse[start : start + block])
            torch.mean(rows, dim=-1, out=mean[start : start + block])
        keep = (target != pad_id).to(dtype)  # (N,)
        target_logit = logits.gather(1, target.unsqueeze(1)).squeeze(1).to(dtype)  # (N,)
        nll = (lse - target_logit) * keep
        loss = ((1.0 - epsilon) * nll + epsilon * (lse - mean) * keep).sum()
        ctx.save_for_backward(logits, target, lse, keep)
        ctx.epsilon = epsilon
        nll_sum = nll.sum()
        ctx.mark_non_differentiable(nll_sum)
        return loss, nll_sum

    @staticmethod
    def backward(ctx: Any, grad_loss: torch.Tensor, _grad_nll: Any) -> tuple[Any, ...]:
        logits, target, lse, keep = ctx.saved_tensors
        eps = ctx.epsilon
        n, vocab = logits.shape
        scale = keep * grad_loss  # (N,): padded rows get no gradient
        grad = torch.empty_like(logits)  # (N, V)
        block = _row_block(logits)
        buffer = torch.empty(min(block, n), vocab, dtype=lse.dtype, device=logits.device)
        for start in range(0, n, block):
            stop = min(start + block, n)
            probs = buffer[: stop - start]
            torch.sub(logits[start:stop], lse[start:stop, None], out=probs)
            probs.exp_().sub_(eps / vocab).mul_(scale[start:stop, None])  # p - eps/V
            # minus (1 - eps) at the reference token, in the float32 block: a scatter into the
            # whole bf16 gradient would convert all of it to float32 and back (17% of a step).
            reference = target[start:stop].unsqueeze(1)  # (n_block, 1)
            probs.scatter_add_(1, reference, (-(1.0 - eps) * scale[start:stop]).unsqueeze(1))
            grad[start:stop] = probs
        return grad, None, None, None
