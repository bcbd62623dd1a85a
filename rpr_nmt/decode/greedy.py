"""Greedy decoding: the most probable next token at every step.

Legend: B sentences, A active sentences, V vocabulary, t tokens generated so far.

It returns what `beam_search(..., beam_size=1, length_penalty=0.0)` returns. With alpha > 0 the
two may differ: beam 1 keeps the best non-EOS continuation alive after an EOS and stops only when
no continuation can reach a better length-normalised score; greedy stops at the first EOS (its
score is then normalised with alpha).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rpr_nmt.decode import beam
from rpr_nmt.decode.beam import Hypothesis, StepDecoder
from rpr_nmt.decode.constraints import (
    check_sources_fit,
    max_output_lengths,
    next_token_logprobs,
    position_limits,
)


@torch.inference_mode()
def greedy_search(
    model: StepDecoder,
    src: Tensor,
    *,
    length_penalty: float = 0.0,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    min_len: int = 1,
    bos_id: int = 2,
    eos_id: int = 3,
    pad_id: int = 0,
) -> list[list[Hypothesis]]:
    """Translate a padded batch by taking the arg-max token at each step.

    Args:
        model: encoder-decoder with `encode` and cached `decode_step`.
        src: source token ids (each sentence ends with EOS), padded with pad_id.
        length_penalty: alpha used only to normalise the returned score (as beam search does).
        max_len_a, max_len_b: at most floor(a * source length + b) output tokens (EOS excluded),
            and with a learned decoder table of N rows at most N - 1 (constraints.py).
        min_len: EOS is not allowed before this many output tokens (but at that cap).
        bos_id, eos_id, pad_id: special ids; BOS and PAD are never generated.

    Returns:
        Per sentence, a one-element list with its hypothesis.

    Raises:
        ValueError: a negative min_len or a NaN length_penalty (as beam_search refuses them).
        PositionLimitError: a source longer than a learned encoder table (index: its row).

    Shapes:
        src (B, S)
    """
    beam.check_settings(1, 1, length_penalty, min_len)
    B, device = src.size(0), src.device
    if B == 0:
        return []
    encoder_rows, decoder_rows = position_limits(model)
    if encoder_rows is not None:
        check_sources_fit(src.ne(pad_id).sum(dim=1).tolist(), encoder_rows)
    max_len = max_output_lengths(
        src, max_len_a=max_len_a, max_len_b=max_len_b, min_len=min_len, pad_id=pad_id,
        max_positions=decoder_rows,
    )  # fmt: skip
    L = int(max_len.max())
    sentence = torch.arange(B, device=device)  # (A,) active sentences
    tokens = torch.full((B, L), pad_id, dtype=torch.long, device=device)  # (B, L) outputs
    logp = torch.zeros(B, device=device)  # (A,)
    out_logp, out_len = (
        torch.zeros(B, device=device),
        torch.zeros(B, dtype=torch.long, device=device),
    )
    rules = dict(min_len=min_len, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id)
    encoder_out, cache = model.encode(src), None
    last = torch.full((B, 1), bos_id, dtype=torch.long, device=device)  # (A, 1)
    for t in range(L + 1):
        logits, cache = model.decode_step(last, encoder_out, cache)  # (A, 1, V)
        lprobs = next_token_logprobs(logits, t, max_len[sentence], **rules)[:, 0]  # (A, V)
        best_lprob, best = lprobs.max(dim=-1)  # (A,)
        logp = logp + best_lprob
        done = best == eos_id  # (A,)
        if t < L:
            tokens[sentence, t] = best.masked_fill(done, pad_id)
        if bool(done.any()):
            out_logp[sentence[done]] = logp[done]
            out_len[sentence[done]] = t
            keep = (~done).nonzero().squeeze(1)
            if keep.numel() == 0:
                break
            sentence, logp, best = sentence[keep], logp[keep], best[keep]
            cache, encoder_out = cache.index_select(keep, keep), encoder_out.index_select(keep)
        last = best.unsqueeze(1)
    scores = (out_logp / beam.length_penalty(out_len.float() + 1.0, length_penalty)).tolist()
    return [
        [Hypothesis(tokens=row[:n], score=s)]
        for row, n, s in zip(tokens.tolist(), out_len.tolist(), scores)
    ]
