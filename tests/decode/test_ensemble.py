"""Ensembles: of one model and of two copies equal the model; scripted toy members give
hand-computed hypotheses and scores; members with other position methods keep their own caches.

Token ids of the scripted members: PAD 0, BOS 2, EOS 3, a 4, b 5, c 6.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest
import torch

from rpr_nmt.config import DecodeConfig, ModelConfig
from rpr_nmt.decode import UncachedModel, beam_search, greedy_search
from rpr_nmt.decode.ensemble import Ensemble
from rpr_nmt.decode.forced import reference_logprobs
from rpr_nmt.model import build_model
from tests.decode.test_beam import ScriptedModel

PAD, BOS, EOS, A, B, C = 0, 2, 3, 4, 5, 6
SPECIAL = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)
# Alone, the first member says "a" (p .55) and the second "c a" (.5 * .6). Their mean:
# a .30, b .275, c .425; after c: EOS (.9 + .4) / 2 = .65, a .35; after a: EOS 1.
FIRST = {(): {A: 0.55, B: 0.1, C: 0.35}, (C,): {EOS: 0.9, A: 0.1}}
SECOND = {(): {A: 0.05, B: 0.45, C: 0.5}, (C,): {EOS: 0.4, A: 0.6}}


def member(table: dict) -> ScriptedModel:
    return ScriptedModel(lambda _scenario, prefix: table.get(prefix, {EOS: 1.0}))


def search(model, *, beam_size: int, nbest: int = 1) -> list[tuple[list[int], float]]:
    src = torch.tensor([[4, EOS]])
    limits = dict(max_len_a=0.0, max_len_b=5, min_len=1, length_penalty=0.0, **SPECIAL)
    if beam_size == 1:
        out = greedy_search(model, src, **limits)
    else:
        out = beam_search(model, src, beam_size=beam_size, nbest=nbest, **limits)
    return [(h.tokens, h.score) for h in out[0]]


def check(got, expected) -> None:
    assert [tokens for tokens, _ in got] == [tokens for tokens, _ in expected]
    assert [score for _, score in got] == pytest.approx([s for _, s in expected], abs=1e-5)


def test_scripted_members_alone():
    check(search(member(FIRST), beam_size=1), [([A], math.log(0.55))])
    check(search(member(SECOND), beam_size=1), [([C, A], math.log(0.5 * 0.6))])


def test_scripted_ensemble_greedy_takes_c_then_eos():
    ensemble = Ensemble([member(FIRST), member(SECOND)])
    check(search(ensemble, beam_size=1), [([C], math.log(0.425 * 0.65))])


def test_scripted_ensemble_beam_finds_a():
    # Beam 2 keeps c (.425) and a (.30); "a EOS" = .30 beats "c EOS" = .27625 and "c a" = .14875.
    ensemble = Ensemble([member(FIRST), member(SECOND)])
    expected = [([A], math.log(0.30)), ([C], math.log(0.425 * 0.65))]
    check(search(ensemble, beam_size=2, nbest=2), expected)


TINY = ModelConfig(
    d_model=32, n_heads=2, d_ff=64, n_encoder_layers=2, n_decoder_layers=2,
    max_relative_position=4, pre_norm=True,
)  # fmt: skip
VOCAB = 24


def tiny_model(seed: int = 0, **changes) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_model(replace(TINY, **changes), vocab_size=VOCAB, pad_id=PAD).eval()


def random_src(n: int = 6) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(2, 9, (n,), generator=g).tolist()
    src = torch.full((n, max(lengths)), PAD)
    for i, length in enumerate(lengths):
        src[i, : length - 1] = torch.randint(4, VOCAB, (length - 1,), generator=g)
        src[i, length - 1] = EOS
    return src


def decode(model, src, beam_size: int) -> list[list[tuple[list[int], float]]]:
    limits = dict(max_len_a=1.0, max_len_b=4, min_len=1, length_penalty=0.6, **SPECIAL)
    if beam_size == 1:
        out = greedy_search(model, src, **limits)
    else:
        out = beam_search(model, src, beam_size=beam_size, nbest=2, **limits)
    return [[(h.tokens, h.score) for h in hyps] for hyps in out]


def same(got, expected) -> None:
    for g, e in zip(got, expected, strict=True):
        check(g, e)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_an_ensemble_of_one_and_of_two_copies_equals_the_model(beam_size):
    model, src = tiny_model(), random_src()
    alone = decode(model, src, beam_size)
    same(decode(Ensemble([model]), src, beam_size), alone)
    same(decode(Ensemble([model, copy.deepcopy(model)]), src, beam_size), alone)


def test_members_of_other_sizes_and_position_methods_keep_their_own_caches():
    members = [tiny_model(0), tiny_model(1, relative_positions="rope", max_relative_position=0,
                                         d_model=48, n_decoder_layers=1)]  # fmt: skip
    src = random_src()
    cached = decode(Ensemble(members), src, beam_size=3)
    same(cached, decode(Ensemble([UncachedModel(m) for m in members]), src, beam_size=3))
    assert cached != decode(members[0], src, beam_size=3)  # the second member counts


def test_ensemble_forced_scores_are_the_log_mean_of_member_probabilities():
    members = [tiny_model(0), tiny_model(1)]
    src = random_src(3)
    tgt_out = torch.tensor([[5, 6, EOS], [7, EOS, PAD], [EOS, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 5, 6], [BOS, 7, PAD], [BOS, PAD, PAD]])
    each = [reference_logprobs(m, src, tgt_in, tgt_out, pad_id=PAD) for m in members]
    both = reference_logprobs(Ensemble(members), src, tgt_in, tgt_out, pad_id=PAD)
    mean = torch.log((each[0].exp() + each[1].exp()) / 2).masked_fill(tgt_out.eq(PAD), 0.0)
    torch.testing.assert_close(both, mean, rtol=1e-5, atol=1e-5)
    # Scoring reads only the members' reference probabilities; the search's full distribution
    # (Ensemble.decode_step) gives the same values at the reference tokens.
    ensemble = Ensemble(members)
    full, _ = ensemble.decode_step(tgt_in, ensemble.encode(src), None)  # (B, T, V)
    at_reference = full.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(both, at_reference.masked_fill(tgt_out.eq(PAD), 0.0))


def test_translate_decodes_an_ensemble_like_a_model():
    from rpr_nmt.decode import translate

    class Chars:  # a tokenizer over ids 4..23: one id per letter
        pad_id, bos_id, eos_id = PAD, BOS, EOS

        def encode(self, text: str) -> list[int]:
            return [4 + (ord(ch) - ord("a")) % 20 for ch in text]

        def decode(self, ids: list[int]) -> str:
            return "".join(chr(ord("a") + i - 4) for i in ids)

    model, cfg = tiny_model(), DecodeConfig(beam_size=2, max_len_b=3, precision="fp32")
    sentences = ["abc", "de", "fghij"]
    alone = translate(model, Chars(), sentences, cfg)
    ensembled = translate(Ensemble([model, copy.deepcopy(model)]), Chars(), sentences, cfg)
    assert [h[0].tokens for h in ensembled] == [h[0].tokens for h in alone]


def test_a_bf16_ensemble_is_the_ensemble_of_bf16_members():
    from rpr_nmt.decode import decoding_model

    model, src = tiny_model(), random_src()
    ensemble = decoding_model(Ensemble([model]), "bf16")
    assert all(p.dtype == torch.bfloat16 for p in ensemble.parameters())
    same(decode(ensemble, src, 3), decode(decoding_model(model, "bf16"), src, 3))


def test_members_with_different_vocabularies_are_refused_in_one_line():
    torch.manual_seed(0)
    cfg = ModelConfig(d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1)
    small = build_model(cfg, vocab_size=12, pad_id=PAD).eval()
    large = build_model(cfg, vocab_size=16, pad_id=PAD).eval()
    with pytest.raises(ValueError, match=r"vocabularies of \[12, 16\] tokens"):
        beam_search(Ensemble([small, large]), torch.tensor([[4, 5, EOS]]), **SPECIAL)
