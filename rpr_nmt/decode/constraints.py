"""The rules beam search and greedy search share: output length limits and the tokens allowed next.

Legend: A active sentences, G hypotheses per sentence (the beam; 1 in greedy search), S source
length, Tnew new decoder positions, V vocabulary, t tokens generated so far (BOS, EOS excluded).
"""

from __future__ import annotations

import torch
from torch import Tensor

NEG_INF = float("-inf")


def max_output_lengths(
    src: Tensor, *, max_len_a: float, max_len_b: int, min_len: int, pad_id: int
) -> Tensor:
    """Per-sentence output length limit floor(a * source length + b), EOS excluded, at least
    min_len.

    The source length counts the non-padding source tokens, its EOS included (as fairseq does).

    Shapes:
        src (B, S) -> (B,) long
    """
    src_len = (src != pad_id).sum(dim=1).to(torch.float64)  # (B,)
    return (max_len_a * src_len + max_len_b).floor().long().clamp_min(max(min_len, 0))


def next_token_logprobs(
    logits: Tensor,
    t: int,
    max_len: Tensor,
    *,
    min_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
) -> Tensor:
    """Float32 log-softmax of the newest position, with the tokens that may not come next at -inf.

    BOS and PAD are never generated; EOS not before min_len tokens; a sentence at its length
    limit (t == max_len) may only end, with EOS keeping its probability (not renormalised).

    Args:
        logits: decoder output for the G consecutive rows of each sentence.
        t: tokens generated so far.
        max_len: each sentence's output length limit (max_output_lengths).
        min_len: EOS is not allowed before this many output tokens.
        bos_id, eos_id, pad_id: special ids.

    Returns:
        Next-token log-probabilities per sentence and hypothesis.

    Shapes:
        logits (A * G, Tnew, V), max_len (A,) -> (A, G, V)
    """
    A, V = max_len.size(0), logits.size(-1)
    lprobs = torch.log_softmax(logits[:, -1].float(), dim=-1).view(A, -1, V)  # (A, G, V)
    lprobs[..., pad_id] = NEG_INF
    lprobs[..., bos_id] = NEG_INF
    if t < min_len:
        lprobs[..., eos_id] = NEG_INF
    at_limit = max_len == t  # (A,) these must end now
    if bool(at_limit.any()):
        eos_lprob = lprobs[..., eos_id].clone()
        lprobs[at_limit] = NEG_INF
        lprobs[..., eos_id] = eos_lprob
    return lprobs
