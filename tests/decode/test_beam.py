"""Beam search on a scripted toy model: hand-computed hypotheses and scores, exact early stopping.

The toy model's next-token probabilities come from tables keyed by the target prefix (BOS
excluded); the first source token picks the table. Token ids: PAD 0, UNK 1, BOS 2, EOS 3, a 4,
b 5, c 6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

from rpr_nmt.decode import beam_search, greedy_search, length_penalty, select_step
from rpr_nmt.decode.beam import top_extensions

PAD, BOS, EOS, A, B, C = 0, 2, 3, 4, 5, 6
V = 7
SPECIAL = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)

# Scenario 4: beam search finds "b" (p = 0.4 * 0.9 = 0.36), greedy "a c" (p = 0.5 * 0.4 = 0.2).
FIRST = {
    (): {A: 0.5, B: 0.4, C: 0.1},
    (A,): {C: 0.4, EOS: 0.35, B: 0.25},
    (B,): {EOS: 0.9, A: 0.1},
    (A, C): {EOS: 1.0},
    (A, B): {EOS: 0.6, A: 0.4},
}
# Scenario 5: "a" (p = 0.3) wins without length penalty; "a c c" (p = 0.6 * 0.45 * 0.9 * 0.95) wins
# with alpha = 1, found only after "a" has finished as the best hypothesis so far.
LENGTH = {
    (): {A: 0.6, B: 0.4},
    (A,): {EOS: 0.5, C: 0.45, B: 0.05},
    (B,): {C: 0.6, A: 0.4},
    (A, C): {C: 0.9, EOS: 0.1},
    (B, C): {EOS: 0.9, A: 0.1},
    (A, C, C): {EOS: 0.95, A: 0.05},
}
TABLES = {4: FIRST, 5: LENGTH}


@dataclass
class _Rows:
    scenario: Tensor  # (A,) one per sentence; its beams are consecutive decoder rows

    def index_select(self, index: Tensor) -> _Rows:
        return _Rows(self.scenario.index_select(0, index))


@dataclass
class _Prefix:
    tokens: Tensor  # (R, t) BOS included

    def index_select(self, index: Tensor, memory_index: Tensor | None = None) -> _Prefix:
        return _Prefix(self.tokens.index_select(0, index))


class ScriptedModel:
    """encode / decode_step / index_select over probability tables (missing prefixes: EOS)."""

    def __init__(self, table_fn) -> None:
        self.table_fn = table_fn  # (scenario, prefix tuple) -> {token: probability}
        self.rows_seen: list[int] = []

    def encode(self, src: Tensor) -> _Rows:
        return _Rows(src[:, 0].clone())

    def decode_step(self, tgt: Tensor, enc: _Rows, cache: _Prefix | None) -> tuple[Tensor, _Prefix]:
        prefix = tgt if cache is None else torch.cat([cache.tokens, tgt], dim=1)
        self.rows_seen.append(prefix.size(0))
        scenario = enc.scenario.repeat_interleave(prefix.size(0) // enc.scenario.size(0))  # (R,)
        logits = torch.full((prefix.size(0), 1, V), float("-inf"))
        for r in range(prefix.size(0)):
            probs = self.table_fn(int(scenario[r]), tuple(prefix[r, 1:].tolist()))
            for tok, p in probs.items():
                logits[r, 0, tok] = math.log(p) if p > 0 else float("-inf")
        return logits, _Prefix(prefix)


def scripted(scenario: int, prefix: tuple[int, ...]) -> dict[int, float]:
    return TABLES[scenario].get(prefix, {EOS: 1.0})


def run(src: list[list[int]], **kwargs) -> list[list[tuple[list[int], float]]]:
    width = max(len(s) for s in src)
    t = torch.tensor([s + [PAD] * (width - len(s)) for s in src])
    settings = dict(beam_size=2, length_penalty=0.0, max_len_a=0.0, max_len_b=5, min_len=1, nbest=1)
    settings.update(kwargs)
    out = beam_search(ScriptedModel(scripted), t, **settings, **SPECIAL)
    return [[(h.tokens, h.score) for h in hyps] for hyps in out]


def lp(n: int, alpha: float) -> float:
    return ((5 + n) / 6) ** alpha


def check(got, expected) -> None:
    assert [[toks for toks, _ in hyps] for hyps in got] == [[t for t, _ in e] for e in expected]
    for hyps, exp in zip(got, expected):
        for (_, score), (_, want) in zip(hyps, exp):
            assert score == pytest.approx(want, abs=1e-5)


def test_length_penalty_formula():
    assert length_penalty(1.0, 0.6) == pytest.approx(1.0)
    assert length_penalty(7.0, 1.0) == pytest.approx(2.0)
    assert length_penalty(30.0, 0.0) == 1.0


def test_beam_without_length_penalty_finds_the_better_hypothesis_than_greedy():
    check(run([[4, EOS]]), [[([B], math.log(0.36))]])
    check(run([[4, EOS]], beam_size=1), [[([A, C], math.log(0.2))]])


def test_nbest_lists_are_ordered_best_first():
    expected = [[([B], math.log(0.36)), ([A, C], math.log(0.2))]]
    check(run([[4, EOS]], nbest=2), expected)


def test_length_penalty_changes_the_winner_and_scores_are_normalised():
    check(run([[5, EOS]]), [[([A], math.log(0.3))]])
    long = math.log(0.6 * 0.45 * 0.9 * 0.95) / lp(4, 1.0)  # |Y| = 3 tokens + EOS
    short = math.log(0.3) / lp(2, 1.0)
    check(run([[5, EOS]], length_penalty=1.0, nbest=2), [[([A, C, C], long), ([A], short)]])


def test_min_len_blocks_eos():
    check(run([[4, EOS]], min_len=2), [[([A, C], math.log(0.2))]])


def test_max_len_forces_eos_without_renormalising():
    # At t = max_len = 2 only EOS is allowed; "b c" keeps its EOS probability 0.9, "a c" its 0.1.
    got = run([[5, EOS]], length_penalty=1.0, max_len_b=2, nbest=2)
    check(got, [[([A], math.log(0.3) / lp(2, 1.0)), ([B, C], math.log(0.216) / lp(3, 1.0))]])


def test_per_sentence_max_len_in_one_batch():
    # max_len = 1.0 * source length (EOS included): 2 for the first sentence, 4 for the second.
    got = run([[5, EOS], [5, A, A, EOS], [4, EOS]], length_penalty=1.0, max_len_a=1.0, max_len_b=0)
    long = math.log(0.6 * 0.45 * 0.9 * 0.95) / lp(4, 1.0)
    check(
        got,
        [
            [([A], math.log(0.3) / lp(2, 1.0))],
            [([A, C, C], long)],
            [([B], math.log(0.36) / lp(2, 1.0))],
        ],
    )
    assert all(len(t) <= 2 for t, _ in got[0])


def test_finished_sentences_leave_the_batch():
    model = ScriptedModel(scripted)
    src = torch.tensor([[4, EOS], [5, EOS]])
    beam_search(
        model,
        src,
        beam_size=2,
        length_penalty=1.0,
        max_len_a=0.0,
        max_len_b=5,
        min_len=1,
        **SPECIAL,
    )
    # step 0: 2 sentences x 1 row; step 1: 2 x 2 rows; then sentence 4 is done ("b" at -0.876
    # beats anything "a c" can still reach: log 0.2 / lp(6) = -0.878), leaving 2 rows for 2 steps.
    assert model.rows_seen == [2, 4, 2, 2]


def test_select_step_ranks_eos_only_within_the_beam():
    logp = torch.tensor([[0.0, -1.0]])
    lprobs = torch.log(torch.tensor([[[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]]))  # V = 3, EOS = 2
    sel = select_step(logp, lprobs, beam_size=2, eos_id=2)
    # candidates: (0,0) -0.69, (0,1) -1.20, (1,2) -1.22 EOS (rank 2: not in the beam), (0,2) -1.61
    assert sel.alive_beam.tolist() == [[0, 0]] and sel.alive_token.tolist() == [[0, 1]]
    assert torch.isinf(sel.eos_logp).all()


@pytest.mark.parametrize("vocab", [3, 7, 64, 1000, 1003])
@pytest.mark.parametrize("n_in", [1, 4])
def test_top_extensions_equal_a_full_topk(vocab, n_in):
    """The chunked top-k ranks exactly like torch.topk over every sum, also with a shorter last
    chunk (1003 = 31 x 32 + 11), -inf columns, and rows where only EOS is allowed."""
    g = torch.Generator().manual_seed(vocab * 10 + n_in)
    lprobs = torch.log_softmax(torch.randn(5, n_in, vocab, generator=g) * 3, dim=-1)
    lprobs[..., 0] = float("-inf")  # padding is never generated
    lprobs[2] = float("-inf")  # sentence 2 is at its length limit: EOS only
    lprobs[2, :, vocab - 1] = -0.5
    logp = -torch.rand(5, n_in, generator=g) * 4
    logp[1, 1:] = float("-inf")  # empty beam slots
    k = 8
    got, index = top_extensions(logp, lprobs, k)
    total = (logp.unsqueeze(-1) + lprobs).view(5, n_in * vocab)
    total = torch.nn.functional.pad(total, (0, max(0, k - total.size(1))), value=float("-inf"))
    want, want_index = total.topk(k, dim=1)
    assert torch.equal(got, want)
    finite = torch.isfinite(want)
    assert torch.equal(index[finite], want_index[finite])  # random sums: no ties among them


# Exact early stopping: batched beam search with pruning equals a plain search run to max_len.


def random_table(scenario: int, prefix: tuple[int, ...]) -> dict[int, float]:
    g = torch.Generator().manual_seed(hash((scenario, prefix)) % (2**31))
    logits = torch.randn(V, generator=g, dtype=torch.float64) * 2.0
    logits[[PAD, BOS]] = float("-inf")
    logits[EOS] += 0.3 * len(prefix)  # sentences tend to end, at varied lengths
    probs = torch.softmax(logits, 0).tolist()
    return {tok: p for tok, p in enumerate(probs) if p > 0}


def reference_beam(scenario, max_len, *, beam, nbest, alpha, min_len):
    """Per-hypothesis Python beam search with the same rules, never stopping early."""
    alive, finished = [((), 0.0)], []
    for t in range(max_len + 1):
        cands = []
        for toks, score in alive:
            for tok, p in random_table(scenario, toks).items():
                if (tok == EOS and t < min_len) or (tok != EOS and t == max_len):
                    continue
                cands.append((score + math.log(p), toks, tok))
        top = sorted(cands, key=lambda c: -c[0])[: 2 * beam]
        finished += [(list(c[1]), c[0] / lp(t + 1, alpha)) for c in top[:beam] if c[2] == EOS]
        alive = [(c[1] + (c[2],), c[0]) for c in top if c[2] != EOS][:beam]
    return sorted(finished, key=lambda h: -h[1])[:nbest]


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0, -0.5])
@pytest.mark.parametrize("beam,nbest,min_len", [(1, 1, 0), (2, 1, 1), (3, 2, 2), (4, 4, 0)])
def test_early_stopping_is_exact(alpha, beam, nbest, min_len):
    lengths = [1, 2, 3, 5, 2]  # source lengths before EOS; max_len = length + 1 + 1
    src = torch.full((len(lengths), max(lengths) + 1), PAD)
    for i, n in enumerate(lengths):
        src[i, : n + 1] = torch.tensor([10 + i] + [A] * (n - 1) + [EOS])
    out = beam_search(
        ScriptedModel(random_table),
        src,
        beam_size=beam,
        length_penalty=alpha,
        max_len_a=1.0,
        max_len_b=1,
        min_len=min_len,
        nbest=nbest,
        **SPECIAL,
    )
    for i, n in enumerate(lengths):
        want = reference_beam(10 + i, n + 2, beam=beam, nbest=nbest, alpha=alpha, min_len=min_len)
        check([[(h.tokens, h.score) for h in out[i]]], [want])


def test_greedy_equals_beam_one():
    src = torch.tensor([[10 + i, A, A, EOS] for i in range(6)] + [[4, EOS, PAD, PAD]])
    kw = dict(max_len_a=1.5, max_len_b=2, min_len=1, **SPECIAL)
    beam = beam_search(ScriptedModel(random_table), src, beam_size=1, length_penalty=0.0, **kw)
    greedy = greedy_search(ScriptedModel(random_table), src, **kw)
    assert [[(h.tokens, round(h.score, 5)) for h in x] for x in beam] == [
        [(h.tokens, round(h.score, 5)) for h in x] for x in greedy
    ]


def test_beam_one_with_length_penalty_may_outlive_greedy():
    # Greedy stops at the first arg-max EOS ("a"); beam 1 with alpha = 1 keeps "a c" alive, since
    # it could still reach a better normalised score, and finds "a c c" (see greedy.py).
    src = torch.tensor([[5, EOS]])
    kw = dict(length_penalty=1.0, max_len_a=0.0, max_len_b=5, min_len=1, **SPECIAL)
    greedy = greedy_search(ScriptedModel(scripted), src, **kw)
    assert [(h.tokens, round(h.score, 5)) for h in greedy[0]] == [
        ([A], round(math.log(0.3) / lp(2, 1.0), 5))
    ]
    assert beam_search(ScriptedModel(scripted), src, beam_size=1, **kw)[0][0].tokens == [A, C, C]


@pytest.mark.parametrize("search", [beam_search, greedy_search])
@pytest.mark.parametrize("bad", [dict(length_penalty=float("nan")), dict(min_len=-1)])
def test_both_searches_refuse_a_nan_length_penalty_or_negative_min_len(search, bad):
    model = ScriptedModel(scripted)
    with pytest.raises(ValueError, match="length_penalty|min_len"):
        search(model, torch.tensor([[4, EOS]]), **bad, **SPECIAL)
