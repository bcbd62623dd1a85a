"""Forced decoding: the model's log-probability of given reference translations.

Legend: B sentences, S source length, T target length (EOS included), V vocabulary.

Each reference token y_t is scored by the decoder's next-token distribution given the source and
the reference prefix, log p(y_t | y_<t, x) = log_softmax(logits_t)[y_t], and the sentence total
is their sum, EOS included: the quantity whose negation, summed over tokens, is the training loss
without label smoothing. The whole reference is one `decode_step` block from an empty cache,
which the cached decoder computes exactly as it would one token at a time (tests/decode/
test_forced.py checks both equalities). Unlike the search's scores, no token is forbidden here
(beam search sets BOS and PAD to -inf and renormalises nothing), so a reference containing
neither gets the same log-probability either way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from rpr_nmt.config import DecodeConfig
from rpr_nmt.decode.beam import StepDecoder
from rpr_nmt.decode.constraints import check_sources_fit, position_limits
from rpr_nmt.decode.ensemble import Ensemble
from rpr_nmt.decode.translate import (
    TextTokenizer,
    decode_in_streams,
    decoding_model,
    length_sorted_batches,
    pad_batch,
)


class EmptyLineError(ValueError):
    """A source or reference line empty to the model: blank, or of no BPE token (only control or
    zero-width characters). Scored, an empty reference measures only EOS; an empty source's
    reference would be scored as the translation of nothing."""

    def __init__(self, side: str, line: int, *, blank: bool) -> None:
        self.side, self.line = side, line  # "source" or "reference", 1-based
        tokens = "" if blank else " (no BPE token: only control or zero-width characters)"
        mend = "translation" if side == "reference" else "source"
        super().__init__(f"{side} line {line} is empty{tokens}; remove the pair or give its {mend}")


@dataclass
class SentenceScore:
    """One reference under the model: its tokens (EOS last), each one's log-probability, their sum,
    and the number of source tokens (EOS included)."""

    tokens: list[int]
    logprobs: list[float]
    total: float
    src_len: int


@torch.inference_mode()
def reference_logprobs(
    model: StepDecoder, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, *, pad_id: int
) -> Tensor:
    """Float32 log-probability of every reference token; 0 at padding.

    Args:
        model: encoder-decoder with `encode` and `decode_step`.
        src: source ids, each sentence ending with EOS, padded with pad_id.
        tgt_in: decoder input, BOS + reference ids, padded with pad_id.
        tgt_out: what each position should predict, reference ids + EOS, padded with pad_id.
        pad_id: padding id.

    Returns:
        log p(tgt_out[b, t] | tgt_in[b, :t+1], src[b]), zero where tgt_out is padding.

    Shapes:
        src (B, S), tgt_in (B, T), tgt_out (B, T) -> (B, T)
    """
    if isinstance(model, Ensemble):
        # log mean_m p_m(y): each member's distribution is normalised on its own, so the mean needs
        # only every member's probability of the reference token, never the (M, B, T, V) stack.
        each = torch.stack([_picked(m, src, tgt_in, tgt_out) for m in model.members])  # (M, B, T)
        picked = torch.logsumexp(each, dim=0) - math.log(len(model.members))  # (B, T)
    else:
        picked = _picked(model, src, tgt_in, tgt_out)  # (B, T)
    return picked.masked_fill(tgt_out.eq(pad_id), 0.0)


def _picked(model: StepDecoder, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> Tensor:
    """log_softmax(logits_t)[y_t] of one model at every position, float32: (B, T)."""
    logits, _ = model.decode_step(tgt_in, model.encode(src), None)  # (B, T, V)
    lprobs = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
    return lprobs.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)  # (B, T)


def score_references(
    model: nn.Module,
    tokenizer: TextTokenizer,
    sources: Sequence[str],
    references: Sequence[str],
    cfg: DecodeConfig,
) -> list[SentenceScore]:
    """Score raw references given raw sources, batched by length as translation is.

    Args:
        model: the Transformer (put in eval mode here), on the device of its parameters.
        tokenizer: its BPE tokenizer.
        sources: raw source sentences.
        references: raw reference translations, line-aligned with sources.
        cfg: batching (max_sentences, streams) and precision; the search settings are not read.

    Returns:
        One SentenceScore per pair, in input order.

    Raises:
        ValueError: sources and references differ in number.
        EmptyLineError: a reference, else a source, that is empty to the model (the first).
        PositionLimitError: a source (ids + EOS) or reference (BOS + ids) longer than a learned
            position table, naming its line (1-based).
    """
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources but {len(references)} references")
    device = next(model.parameters()).device
    model = decoding_model(model.eval(), cfg.precision)
    src_tokens = [tokenizer.encode(s) for s in sources]
    ref_ids = [tokenizer.encode(r) for r in references]
    for side, texts, ids in (("reference", references, ref_ids), ("source", sources, src_tokens)):
        for number, (text, row) in enumerate(zip(texts, ids), start=1):
            if not text.strip() or not row:
                raise EmptyLineError(side, number, blank=not text.strip())
    src_ids = [row + [tokenizer.eos_id] for row in src_tokens]
    encoder_rows, decoder_rows = position_limits(model)
    lines = range(1, len(sources) + 1)
    check_sources_fit([len(s) for s in src_ids], encoder_rows, lines=lines)
    check_sources_fit([len(r) + 1 for r in ref_ids], decoder_rows, side="reference", lines=lines)
    streams = cfg.streams if device.type == "cpu" else 1
    per_batch = min(cfg.max_sentences, max(1, -(-len(src_ids) // streams)))
    lengths = [len(s) + len(r) for s, r in zip(src_ids, ref_ids)]
    batches = list(length_sorted_batches(lengths, per_batch))
    pad = tokenizer.pad_id

    def score(batch: list[int]) -> list[list[float]]:
        src = pad_batch([src_ids[i] for i in batch], pad, device)  # (B, S)
        tgt_in = pad_batch([[tokenizer.bos_id] + ref_ids[i] for i in batch], pad, device)
        tgt_out = pad_batch([ref_ids[i] + [tokenizer.eos_id] for i in batch], pad, device)
        logp = reference_logprobs(model, src, tgt_in, tgt_out, pad_id=pad).cpu()  # (B, T)
        return [logp[row, : len(ref_ids[i]) + 1].tolist() for row, i in enumerate(batch)]

    results: list[SentenceScore | None] = [None] * len(sources)
    for batch, rows in zip(batches, decode_in_streams(score, batches, streams)):
        for i, logprobs in zip(batch, rows):
            tokens = ref_ids[i] + [tokenizer.eos_id]
            results[i] = SentenceScore(tokens, logprobs, float(sum(logprobs)), len(src_ids[i]))
    return [r for r in results if r is not None]
