"""Label-smoothed cross-entropy, summed over non-padding target tokens.

The smoothed target distribution puts 1 - eps on the reference token and spreads eps uniformly over
the whole vocabulary (as torch's cross_entropy(label_smoothing=eps) and tensor2tensor do):

    q(v) = (1 - eps) * [v == y] + eps / V
    loss = -sum_v q(v) log p(v) = (1 - eps) * nll + eps * mean_v(-log p(v))

Positions whose reference is the padding id contribute nothing. This module returns sums; the
trainer divides them by the number of non-padding target tokens of the whole update (all accumulated
batches on all ranks), so that every target token weighs the same however the update is split
across batches and processes. Reported losses are therefore per target token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
        (loss_sum, nll_sum): scalar float32 tensors; nll_sum is the unsmoothed cross-entropy (for
        perplexity) and carries no gradient.

    Shapes:
        logits (B, T, V), target (B, T).
    """
    lprobs = F.log_softmax(logits.float(), dim=-1).flatten(0, -2)  # (B*T, V)
    target = target.reshape(-1)  # (B*T,)
    keep = target != pad_id
    nll = -lprobs.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)  # (B*T,)
    nll = nll.masked_fill(~keep, 0.0)
    nll_sum = nll.sum()
    if epsilon == 0.0:
        return nll_sum, nll_sum.detach()
    uniform = -lprobs.mean(dim=-1).masked_fill(
        ~keep, 0.0
    )  # (B*T,): cross-entropy against eps / V each
    loss_sum = (1.0 - epsilon) * nll_sum + epsilon * uniform.sum()
    return loss_sum, nll_sum.detach()
