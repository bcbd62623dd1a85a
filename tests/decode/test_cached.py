"""Beam search over the real model: cached decoding gives what recomputing the prefix gives."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from rpr_nmt.config import DecodeConfig, ModelConfig
from rpr_nmt.decode import (
    UncachedModel,
    beam_search,
    check_decode_config,
    decoding_model,
    greedy_search,
    translate,
)
from rpr_nmt.decode.translate import decode_in_streams
from rpr_nmt.model import RelativeMultiheadAttention, build_model

PAD, BOS, EOS, VOCAB = 0, 2, 3, 24
SPECIAL = dict(bos_id=BOS, eos_id=EOS, pad_id=PAD)
TINY = ModelConfig(
    d_model=32,
    n_heads=2,
    d_ff=64,
    n_encoder_layers=2,
    n_decoder_layers=2,
    dropout=0.1,
    attention_dropout=0.1,
    max_relative_position=4,
    pre_norm=True,
)


def tiny_model(**changes) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(replace(TINY, **changes), vocab_size=VOCAB, pad_id=PAD)
    return model.eval()


def random_src(n: int = 5) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(2, 9, (n,), generator=g)
    src = torch.full((n, int(lengths.max())), PAD)
    for i, length in enumerate(lengths.tolist()):
        src[i, : length - 1] = torch.randint(4, VOCAB, (length - 1,), generator=g)
        src[i, length - 1] = EOS
    return src


class _EosBias:
    """Adds 0.8 * (position - 3) to the EOS logit so that random models end at varied lengths."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def encode(self, src):
        return self.inner.encode(src)

    def decode_step(self, tgt, encoder_out, cache):
        logits, cache = self.inner.decode_step(tgt, encoder_out, cache)  # (R, Tnew, V)
        positions = torch.arange(cache.length - tgt.size(1), cache.length)  # (Tnew,)
        logits = logits.clone()
        logits[..., EOS] += 0.8 * (positions - 3)
        return logits, cache


def as_lists(hyps):
    return [[(h.tokens, h.score) for h in nbest] for nbest in hyps]


def assert_same(a, b) -> None:
    assert [[t for t, _ in x] for x in a] == [[t for t, _ in x] for x in b]
    for x, y in zip(a, b):
        for (_, s), (_, r) in zip(x, y):
            assert s == pytest.approx(r, abs=1e-4)


@pytest.mark.parametrize(
    "changes",
    [{}, {"pre_norm": False, "sinusoidal": True, "share_relative_across_heads": True}],
    ids=["tiny", "post_norm_sinusoid_shared"],
)
def test_cached_beam_search_equals_recomputing_the_prefix(changes):
    model, src = tiny_model(**changes), random_src()
    kw = dict(beam_size=3, length_penalty=0.6, max_len_a=1.0, max_len_b=3, min_len=1, nbest=3)
    for wrap in (lambda m: m, _EosBias):  # hypotheses run to max_len, or end at varied lengths
        cached = as_lists(beam_search(wrap(model), src, **kw, **SPECIAL))
        uncached = beam_search(wrap(UncachedModel(model, reencode=True)), src, **kw, **SPECIAL)
        assert_same(cached, as_lists(uncached))
        assert all(len(nbest) == 3 for nbest in cached)
    lengths = {len(t) for nbest in cached for t, _ in nbest}
    assert len(lengths) > 2, lengths  # the EOS bias made hypotheses of several lengths


def test_greedy_equals_beam_one_on_the_model():
    model, src = tiny_model(), random_src()
    kw = dict(max_len_a=1.0, max_len_b=3, min_len=0, **SPECIAL)
    beam = as_lists(beam_search(model, src, beam_size=1, length_penalty=0.0, **kw))
    greedy = as_lists(greedy_search(model, src, **kw))
    uncached = as_lists(greedy_search(UncachedModel(model), src, **kw))
    assert_same(beam, greedy)
    assert_same(greedy, uncached)


def test_batching_does_not_change_results():
    model, src = tiny_model(), random_src(6)
    kw = dict(beam_size=4, length_penalty=0.6, max_len_a=1.0, max_len_b=3, min_len=1, **SPECIAL)
    model = _EosBias(model)  # sentences finish at different steps and leave the batch
    together = as_lists(beam_search(model, src, **kw))
    alone = [as_lists(beam_search(model, src[i : i + 1], **kw))[0] for i in range(len(src))]
    assert_same(together, alone)


class _CharTokenizer:
    """Characters 'a'..'t' as ids 4..23 (enough of rpr_nmt.data.Tokenizer for translate)."""

    pad_id, bos_id, eos_id = PAD, BOS, EOS

    def encode(self, text: str) -> list[int]:
        return [4 + (ord(ch) - ord("a")) % (VOCAB - 4) for ch in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(ord("a") + i - 4) for i in ids if i >= 4)


def test_translate_returns_input_order_and_matches_single_sentences():
    model = tiny_model()
    sentences = ["abc", "a", "hello", "", "qrstabcd", "ee"]
    cfg = DecodeConfig(
        beam_size=2, length_penalty=0.6, max_len_a=1.0, max_len_b=2, nbest=2, device="cpu"
    )
    out = translate(model, _CharTokenizer(), sentences, replace(cfg, max_sentences=4))
    one_by_one = [translate(model, _CharTokenizer(), [s], cfg)[0] for s in sentences]
    assert_same(as_lists(out), as_lists(one_by_one))
    assert all(len(nbest) == 2 for s, nbest in zip(sentences, out) if s)


def test_a_blank_sentence_is_not_decoded_and_translates_to_an_empty_line():
    model, sizes = tiny_model(), []
    encode = model.encode
    model.encode = lambda src: sizes.append(src.size(0)) or encode(src)
    cfg = DecodeConfig(beam_size=2, nbest=2, max_len_b=2, streams=1, device="cpu")
    out = translate(model, _CharTokenizer(), ["", "abc", " \t", "de"], cfg)
    assert sizes == [2]  # only the two sentences with text were encoded
    assert [[h.tokens for h in nbest] for nbest in (out[0], out[2])] == [[[]], [[]]]
    assert len(out[1]) == len(out[3]) == 2 and all(h.tokens for h in out[1] + out[3])
    assert translate(model, _CharTokenizer(), ["", ""], cfg)[1][0].score == 0.0


class _LetterTokenizer(_CharTokenizer):
    """Letters only: other characters give no token, as sentencepiece drops U+200B or \\x01."""

    def encode(self, text: str) -> list[int]:
        return super().encode("".join(ch for ch in text if ch.isalpha()))


def test_a_sentence_without_a_token_is_not_decoded_either():
    # Probe E: a line of only a zero-width space or control characters encoded to no token, was
    # decoded from EOS alone and came out as invented text.
    model, sizes = tiny_model(), []
    encode = model.encode
    model.encode = lambda src: sizes.append(src.size(0)) or encode(src)
    cfg = DecodeConfig(beam_size=2, nbest=2, max_len_b=2, streams=1, device="cpu")
    out = translate(model, _LetterTokenizer(), ["\u200b", "abc", "\x01\x02"], cfg)
    assert sizes == [1]
    assert [[h.tokens for h in nbest] for nbest in (out[0], out[2])] == [[[]], [[]]]
    assert len(out[1]) == 2 and all(h.tokens for h in out[1])


def test_streams_decode_batches_concurrently_with_the_same_results():
    model = tiny_model()
    sentences = ["abc", "a", "hello", "", "qrstabcd", "ee", "xyz"]
    cfg = DecodeConfig(
        beam_size=2, max_len_a=1.0, max_len_b=2, nbest=2, max_sentences=2, device="cpu"
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        one = translate(model, _CharTokenizer(), sentences, replace(cfg, streams=1))
        two = translate(model, _CharTokenizer(), sentences, replace(cfg, streams=2))
        assert torch.get_num_threads() == 2  # restored after the streams
    finally:
        torch.set_num_threads(threads)
    assert_same(as_lists(two), as_lists(one))
    with pytest.raises(ValueError, match="decode.streams"):
        translate(model, _CharTokenizer(), sentences, replace(cfg, streams=0))


def test_a_few_sentences_are_split_so_that_every_stream_has_a_batch():
    model, sizes = tiny_model(), []
    encode = model.encode
    model.encode = lambda src: sizes.append(src.size(0)) or encode(src)
    sentences = ["abc", "de", "f", "ghij", "k", "lm", "nop"]
    translate(model, _CharTokenizer(), sentences, DecodeConfig(beam_size=2, streams=2))  # 128
    assert sorted(sizes) == [3, 4]
    sizes.clear()
    translate(model, _CharTokenizer(), sentences, DecodeConfig(beam_size=2, streams=1))
    assert sizes == [7]


def test_decode_in_streams_keeps_batch_order_and_shares_the_threads():
    seen = []

    def decode(batch: int) -> tuple[int, int]:
        seen.append(torch.get_num_threads())
        return batch, batch * batch

    threads = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        got = list(decode_in_streams(decode, list(range(9)), streams=2))
        assert torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(threads)
    assert got == [(b, b * b) for b in range(9)]
    assert set(seen) == {2}  # two streams of two threads


def test_bf16_decodes_with_a_bf16_copy_and_leaves_the_model_fp32():
    model = tiny_model()
    cfg = DecodeConfig(beam_size=2, precision="bf16")
    out = translate(model, _CharTokenizer(), ["abc", "de"], cfg)
    assert len(out) == 2 and all(isinstance(h.score, float) for nbest in out for h in nbest)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    copy = decoding_model(model, "bf16")
    assert copy is not model and all(p.dtype == torch.bfloat16 for p in copy.parameters())
    # Tied embeddings stay tied in the copy.
    assert copy.output_projection.weight is copy.decoder.embed.table.weight
    assert decoding_model(model, "fp32") is model


def test_bf16_copy_attends_in_float32_and_its_cache_equals_the_full_forward():
    model = decoding_model(tiny_model(), "bf16")
    attention = [m for m in model.modules() if isinstance(m, RelativeMultiheadAttention)]
    assert attention and all(m.attention_dtype == torch.float32 for m in attention)
    src = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])
    tgt = torch.tensor([[BOS, 11, 12, 13, 14, 15], [BOS, 16, 17, 18, 19, 20]])
    with torch.inference_mode():
        full = model(src, tgt)  # (B, T, V) bf16 logits
        enc, cache, steps = model.encode(src), None, []
        for t in range(tgt.size(1)):
            logits, cache = model.decode_step(tgt[:, t : t + 1], enc, cache)
            steps.append(logits)
    assert full.dtype == torch.bfloat16 and cache.self_attn[0].keys.dtype == torch.float32
    assert cache.cross_attn[0].keys.dtype == torch.float32
    torch.testing.assert_close(torch.cat(steps, 1), full, rtol=0.02, atol=0.02)
    with pytest.raises(ValueError, match="precision"):
        decoding_model(model, "fp16")


def test_check_decode_config_names_the_bad_setting():
    cfg = DecodeConfig(beam_size=2)
    check_decode_config(cfg)  # device and the other settings are fine
    with pytest.raises(ValueError, match="nbest"):
        check_decode_config(replace(cfg, beam_size=2, nbest=3))
    with pytest.raises(ValueError, match="precision"):
        check_decode_config(replace(cfg, precision="fp16"))
    with pytest.raises(ValueError, match="decode.beam_size must be >= 1"):
        check_decode_config(replace(cfg, beam_size=0, nbest=0))
    for name in ("max_sentences", "streams"):
        with pytest.raises(ValueError, match=f"decode.{name} must be >= 1, got 0"):
            check_decode_config(replace(cfg, **{name: 0}))
    with pytest.raises(ValueError, match="decode.min_len must be >= 0"):
        check_decode_config(replace(cfg, min_len=-1))
    with pytest.raises(TypeError, match="DecodeConfig"):  # a plain dict is not a config
        check_decode_config(dict(beam_size=2))
