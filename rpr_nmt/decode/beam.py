"""Batched beam search over the model's cached one-step decoder.

Legend: B sentences, A active (unfinished) sentences, N beam, K n-best, V vocabulary,
S source length, L the longest allowed output, t tokens generated so far (BOS, EOS excluded).

What one step does, for every active sentence at once (no Python loop over hypotheses):

1. The decoder scores the next token of each of the N alive hypotheses; log-softmax in float32,
   forbidden tokens and length limits applied (constraints.py, shared with greedy search).
2. `select_step` takes the 2N best extensions. An EOS among the N best finishes its hypothesis
   (it would have taken a beam slot); the N best non-EOS extensions stay alive, so the beam is
   always full.
3. Finished hypotheses are scored length-normalised, score = log P(Y) / lp(|Y|), with the paper's
   lp(|Y|) = ((5 + |Y|) / 6)^alpha (Wu et al., 2016) and |Y| counting the EOS, as tensor2tensor
   does. Each sentence keeps its K best finished hypotheses.
4. A sentence is done when nothing still alive can enter its K best (see `_upper_bound`), or when
   it reached its length limit; done sentences leave the active batch, so later steps cost less.

Early stopping is exact: the result equals running every sentence to its length limit with the
same beam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from rpr_nmt.decode.constraints import (
    NEG_INF,
    check_sources_fit,
    max_output_lengths,
    next_token_logprobs,
    position_limits,
)


@dataclass
class Hypothesis:
    """One translation: token ids without BOS/EOS and the length-normalised log-probability."""

    tokens: list[int]
    score: float


class StepDecoder(Protocol):
    """What beam search needs from a model (rpr_nmt.model.Transformer satisfies it).

    `encode` gives one row per sentence (an object with `.index_select(sentences)`). `decode_step`
    takes G rows of `tgt` per encoded sentence, consecutive rows sharing one (G = 1 at the first
    step, the beam size after), and returns the logits and a cache with
    `.index_select(rows, memory_index)`: rows (R',) the decoder row each new row continues,
    memory_index (A',) the sentences kept when some have finished, None when all are kept.
    """

    def encode(self, src: Tensor) -> Any: ...

    def decode_step(self, tgt: Tensor, encoder_out: Any, cache: Any) -> tuple[Tensor, Any]: ...


def length_penalty(length: Tensor | float, alpha: float) -> Tensor | float:
    """The paper's (GNMT's) length penalty lp(|Y|) = ((5 + |Y|) / 6)^alpha; alpha = 0 gives 1."""
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class StepSelection:
    """The outcome of one beam step for A sentences (see `select_step`)."""

    alive_beam: Tensor  # (A, N) the hypothesis each new alive one extends, in 0 .. n_in - 1
    alive_token: Tensor  # (A, N) its new token
    alive_logp: Tensor  # (A, N) its log-probability, sorted best first; -inf = no such hypothesis
    eos_beam: Tensor  # (A, N) hypotheses whose EOS ranks among the N best extensions
    eos_logp: (
        Tensor  # (A, N) their log-probability with the EOS; -inf where there is no EOS in that rank
    )


# Vocabulary chunk width of `top_extensions` (fastest of 16-250 on this machine's kernels).
_CHUNK = 32


def top_extensions(logp: Tensor, lprobs: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Each sentence's k best extensions: top-k over (b, v) of logp[a, b] + lprobs[a, b, v].

    Exact, and 3-4x cheaper than torch.topk over all n_in * V sums (docs/performance.md): the
    vocabulary is cut into chunks of _CHUNK ids, and the k best extensions lie in the k chunks
    with the best maxima (any other chunk's best is beaten by k better ones, one per chunk). So
    only chunk maxima (a fast reduction) are ranked over the whole vocabulary, then the k * _CHUNK
    sums of the chosen chunks. The sums are the same float32 additions as a full sum would make.

    Returns:
        (sums, flat index b * V + v), best first; -inf sums where fewer than k extensions exist.

    Shapes:
        logp (A, n_in), lprobs (A, n_in, V) -> (A, k), (A, k)
    """
    A, n_in, V = lprobs.shape
    width = _CHUNK
    chunks = -(-V // width)  # C, the last one maybe shorter
    if n_in * chunks <= k:  # tiny vocabularies: rank every sum, padded to k candidates
        total = (logp.unsqueeze(-1) + lprobs).view(A, n_in * V)  # (A, n_in * V)
        total = F.pad(total, (0, max(0, k - total.size(1))), value=NEG_INF)
        return total.topk(k, dim=1)
    full = V // width * width
    chunk_max = lprobs[..., :full].unflatten(-1, (V // width, width)).amax(-1)  # (A, n_in, C')
    if full < V:
        chunk_max = torch.cat([chunk_max, lprobs[..., full:].amax(-1, keepdim=True)], dim=-1)
    chunk_best = (chunk_max + logp.unsqueeze(-1)).view(A, n_in * chunks)  # (A, n_in * C)
    best_chunks = chunk_best.topk(k, dim=1).indices  # (A, k)
    beam, chunk = best_chunks // chunks, best_chunks % chunks  # (A, k)
    token = (chunk * width).unsqueeze(-1) + torch.arange(width, device=lprobs.device)  # (A, k, W)
    outside = token >= V  # past the end of a shorter last chunk
    flat = (beam.unsqueeze(-1) * V + token.clamp_max(V - 1)).view(A, k * width)  # (A, k * W)
    sums = lprobs.view(A, n_in * V).gather(1, flat)  # (A, k * W)
    sums = sums.view(A, k, width) + logp.gather(1, beam).unsqueeze(-1)  # (A, k, W)
    sums.masked_fill_(outside, NEG_INF)
    best, pos = sums.view(A, k * width).topk(k, dim=1)  # (A, k)
    return best, flat.gather(1, pos)


def select_step(logp: Tensor, lprobs: Tensor, *, beam_size: int, eos_id: int) -> StepSelection:
    """Choose the next beam from all one-token extensions of the alive hypotheses.

    Args:
        logp: log-probabilities of the alive hypotheses (-inf for empty slots).
        lprobs: next-token log-probabilities of each alive hypothesis, constraints already applied.
        beam_size: N, the number of hypotheses kept alive.
        eos_id: end-of-sentence id.

    Returns:
        The N best non-EOS extensions (the new beam), and the EOS extensions that rank among the
        N best overall.

    Shapes:
        logp (A, n_in), lprobs (A, n_in, V) -> fields of shape (A, N)
    """
    A, n_in, V = lprobs.shape
    N = beam_size
    cand_logp, cand_index = top_extensions(logp, lprobs, 2 * N)  # (A, 2N), best first
    cand_beam = (cand_index // V).clamp_max(n_in - 1)  # padded candidates are -inf anyway
    cand_token = cand_index % V
    is_eos = cand_token == eos_id  # (A, 2N)
    # Among 2N candidates at most n_in <= N end in EOS, so at least N continue.
    eos_logp = cand_logp[:, :N].masked_fill(~is_eos[:, :N], NEG_INF)  # (A, N)
    alive_logp, pos = cand_logp.masked_fill(is_eos, NEG_INF).topk(N, dim=1)  # (A, N)
    return StepSelection(
        alive_beam=cand_beam.gather(1, pos),
        alive_token=cand_token.gather(1, pos),
        alive_logp=alive_logp,
        eos_beam=cand_beam[:, :N],
        eos_logp=eos_logp,
    )


def _upper_bound(alive_logp: Tensor, t: int, max_len: Tensor, alpha: float) -> Tensor:
    """Best score any descendant of the alive hypotheses can still reach, per sentence.

    A descendant finishes with log P <= the current log P (log-probabilities only decrease, and
    both are <= 0), so its score log P / lp(|Y|) is at most current log P / lp(|Y|): largest where
    lp is largest. The alive hypotheses hold t + 1 tokens, so |Y| (EOS included) lies in
    t + 2 .. max_len + 1. With alpha >= 0, lp grows with |Y|, so the bound divides by
    lp(max_len + 1); dividing by the current length's lp instead would stop too early and miss
    longer hypotheses that the length penalty favours. With alpha < 0, lp shrinks: lp(t + 2).

    Shapes:
        alive_logp (A, N), max_len (A,) -> (A,)
    """
    best = alive_logp[:, 0]  # (A,) sorted best first
    if alpha >= 0:
        lp = length_penalty(max_len.to(best.dtype) + 1.0, alpha)  # (A,)
    else:
        lp = torch.full_like(best, float(length_penalty(float(t + 2), alpha)))
    return best / lp


@dataclass
class _Beams:
    """Decoding state of the active sentences, one row each; `keep` drops finished ones."""

    sentence: Tensor  # (A,) index into the input batch
    max_len: Tensor  # (A,) output length limits
    # (A,) the limits before a learned decoder table's cap: the bound reads them, so that early
    # stopping, and with it the sentences of each step's batch, is what it was before the cap
    # (a looser bound, still exact; a sentence at its cap is done by max_len)
    bound_len: Tensor
    logp: Tensor  # (A, n_in) alive log-probabilities
    tokens: Tensor  # (A, n_in, t) alive tokens
    fin_score: Tensor  # (A, K) kept finished scores, best first, -inf = empty
    fin_len: Tensor  # (A, K)
    fin_tokens: Tensor  # (A, K, L) padded

    def keep(self, idx: Tensor) -> None:
        names = ("sentence", "max_len", "bound_len", "logp", "tokens", "fin_score", "fin_len")
        for name in (*names, "fin_tokens"):
            setattr(self, name, getattr(self, name).index_select(0, idx))

    def add_finished(self, sel: StepSelection, t: int, alpha: float, pad_id: int) -> None:
        """Merge this step's EOS hypotheses (t tokens each) into the K best finished ones."""
        A, K, L = self.fin_tokens.shape
        N = sel.eos_beam.size(1)
        score = sel.eos_logp / length_penalty(float(t + 1), alpha)  # (A, N)
        new_tokens = self.tokens.gather(1, sel.eos_beam[..., None].expand(-1, -1, t))  # (A, N, t)
        new_tokens = F.pad(new_tokens, (0, L - t), value=pad_id)  # (A, N, L)
        all_score = torch.cat([self.fin_score, score], dim=1)  # (A, K + N), old ones first
        self.fin_score, pos = all_score.topk(K, dim=1)  # (A, K)
        new_len = torch.full((A, N), t, dtype=self.fin_len.dtype, device=self.fin_len.device)
        self.fin_len = torch.cat([self.fin_len, new_len], dim=1).gather(1, pos)
        all_tokens = torch.cat([self.fin_tokens, new_tokens], dim=1)  # (A, K + N, L)
        self.fin_tokens = all_tokens.gather(1, pos[..., None].expand(-1, -1, L))

    def advance(self, sel: StepSelection) -> None:
        """Reorder the alive hypotheses to the new beam and append their new tokens."""
        t = self.tokens.size(2)
        kept = self.tokens.gather(1, sel.alive_beam[..., None].expand(-1, -1, t))  # (A, N, t)
        self.tokens = torch.cat([kept, sel.alive_token.unsqueeze(-1)], dim=2)  # (A, N, t + 1)
        self.logp = sel.alive_logp


def check_settings(beam_size: int, nbest: int, length_penalty: float, min_len: int) -> None:
    """Refuse search settings that cannot work (ValueError names the value)."""
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest must be in 1 .. beam_size ({beam_size}), got {nbest}")
    if min_len < 0:
        raise ValueError(f"min_len must be >= 0, got {min_len}")
    if length_penalty != length_penalty:  # NaN
        raise ValueError("length_penalty is NaN; use 0.0 for no length normalisation")


@torch.inference_mode()
def beam_search(
    model: StepDecoder,
    src: Tensor,
    *,
    beam_size: int = 4,
    length_penalty: float = 0.6,
    max_len_a: float = 1.2,
    max_len_b: int = 10,
    min_len: int = 1,
    nbest: int = 1,
    bos_id: int = 2,
    eos_id: int = 3,
    pad_id: int = 0,
) -> list[list[Hypothesis]]:
    """Translate a padded batch of source sentences with batched beam search.

    Args:
        model: encoder-decoder with `encode` and cached `decode_step` (see StepDecoder).
        src: source token ids (each sentence ends with EOS), padded with pad_id.
        beam_size: N, hypotheses kept alive per sentence.
        length_penalty: alpha of lp(|Y|) = ((5 + |Y|) / 6)^alpha, |Y| counting EOS; 0 = raw
            log-probability.
        max_len_a, max_len_b: at most floor(a * source length + b) output tokens (EOS excluded),
            and with a learned decoder table of N rows at most N - 1 (constraints.py).
        min_len: EOS is not allowed before this many output tokens (but at that cap).
        nbest: K, hypotheses returned per sentence (<= beam_size).
        bos_id, eos_id, pad_id: special ids; BOS and PAD are never generated.

    Returns:
        Per sentence, its K best finished hypotheses, best first.

    Raises:
        PositionLimitError: a source longer than a learned encoder table (index: its row).

    Shapes:
        src (B, S)
    """
    check_settings(beam_size, nbest, length_penalty, min_len)
    if src.size(0) == 0:
        return []
    B, device = src.size(0), src.device
    N, K, alpha = beam_size, nbest, float(length_penalty)
    encoder_rows, decoder_rows = position_limits(model)
    if encoder_rows is not None:
        check_sources_fit(src.ne(pad_id).sum(dim=1).tolist(), encoder_rows)
    lengths = dict(max_len_a=max_len_a, max_len_b=max_len_b, min_len=min_len, pad_id=pad_id)
    bound_len = max_output_lengths(src, **lengths)  # (B,)
    max_len = bound_len  # (B,)
    if decoder_rows is not None:
        max_len = max_output_lengths(src, **lengths, max_positions=decoder_rows)
    L = int(max_len.max())
    beams = _Beams(
        sentence=torch.arange(B, device=device),
        max_len=max_len,
        bound_len=bound_len,
        logp=torch.zeros(B, 1, device=device),  # one alive hypothesis (BOS) until the first step
        tokens=torch.zeros(B, 1, 0, dtype=torch.long, device=device),
        fin_score=torch.full((B, K), NEG_INF, device=device),  # (A, K) best first
        fin_len=torch.zeros(B, K, dtype=torch.long, device=device),
        fin_tokens=torch.full((B, K, L), pad_id, dtype=torch.long, device=device),
    )
    out = _Finished.empty((B, K, L), pad_id, device)
    encoder_out = model.encode(src)  # one row per active sentence, shared by its beams
    cache, last = None, torch.full((B, 1), bos_id, dtype=torch.long, device=device)
    for t in range(L + 1):
        logits, cache = model.decode_step(last, encoder_out, cache)  # (A * n_in, 1, V)
        lprobs = next_token_logprobs(
            logits, t, beams.max_len, min_len=min_len, bos_id=bos_id, eos_id=eos_id, pad_id=pad_id
        )  # (A, n_in, V)
        sel = select_step(beams.logp, lprobs, beam_size=N, eos_id=eos_id)  # (A, N) fields
        if bool(torch.isfinite(sel.eos_logp).any()):
            beams.add_finished(sel, t, alpha, pad_id)
        bound = _upper_bound(sel.alive_logp, t, beams.bound_len, alpha)  # (A,)
        done = (bound <= beams.fin_score[:, -1]) | (beams.max_len <= t)  # (A,)
        A, n_in = beams.logp.shape
        rows = torch.arange(A, device=device).unsqueeze(1) * n_in + sel.alive_beam  # (A, N)
        beams.advance(sel)
        keep = out.retire(beams, done)  # (A',) surviving rows of the active batch
        if keep.numel() == 0:
            break
        finished = keep.numel() != A  # only then do the sentences' memory rows change
        cache = cache.index_select(rows[keep].flatten(), keep if finished else None)  # (A' * N)
        if finished:
            encoder_out = encoder_out.index_select(keep)  # (A',)
        last = beams.tokens[:, :, -1].reshape(-1, 1)  # (A' * N, 1)
    return out.hypotheses()


@dataclass
class _Finished:
    """The K best finished hypotheses of every input sentence, filled as sentences are done."""

    score: Tensor  # (B, K)
    length: Tensor  # (B, K)
    tokens: Tensor  # (B, K, L)

    @classmethod
    def empty(cls, shape: tuple[int, int, int], pad_id: int, device: torch.device) -> _Finished:
        B, K, L = shape
        return cls(
            score=torch.full((B, K), NEG_INF, device=device),
            length=torch.zeros(B, K, dtype=torch.long, device=device),
            tokens=torch.full((B, K, L), pad_id, dtype=torch.long, device=device),
        )

    def retire(self, beams: _Beams, done: Tensor) -> Tensor:
        """Copy out the done sentences, drop them from `beams`; returns the kept rows (A',)."""
        if not bool(done.any()):
            return torch.arange(done.numel(), device=done.device)
        ids = beams.sentence[done]
        self.score[ids], self.length[ids] = beams.fin_score[done], beams.fin_len[done]
        self.tokens[ids] = beams.fin_tokens[done]
        keep = (~done).nonzero().squeeze(1)  # (A',)
        beams.keep(keep)
        return keep

    def hypotheses(self) -> list[list[Hypothesis]]:
        """Per sentence, its finished hypotheses best first, skipping empty (-inf) slots."""
        scores, lengths, tokens = self.score.tolist(), self.length.tolist(), self.tokens.tolist()
        return [
            [Hypothesis(tokens=tok[:n], score=sc) for sc, n, tok in zip(*row) if sc != NEG_INF]
            for row in zip(scores, lengths, tokens)
        ]
