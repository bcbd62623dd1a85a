"""Forced decoding: a reference's log-probability equals the cached decoder's step-by-step
scores and the training loss without label smoothing."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from rpr_nmt.config import DecodeConfig, ModelConfig
from rpr_nmt.data import Tokenizer
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.decode.forced import reference_logprobs, score_references
from rpr_nmt.model import build_model
from rpr_nmt.train.loss import label_smoothed_loss

PAD, BOS, EOS, VOCAB = 0, 2, 3, 24
TINY = ModelConfig(
    d_model=32, n_heads=2, d_ff=64, n_encoder_layers=2, n_decoder_layers=2,
    max_relative_position=4, pre_norm=True,
)  # fmt: skip
POSITIONS = {
    "shaw": {},
    "sinusoid_only": dict(max_relative_position=0, sinusoidal=True),
    "rope": dict(relative_positions="rope", max_relative_position=0),
    "alibi": dict(relative_positions="alibi", max_relative_position=0),
}


def tiny_model(**changes) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model(replace(TINY, **changes), vocab_size=VOCAB, pad_id=PAD).eval()


def random_batch(n: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """src (ending with EOS), tgt_in (BOS + ids) and tgt_out (ids + EOS), each padded."""
    g = torch.Generator().manual_seed(3)
    src_len = torch.randint(2, 9, (n,), generator=g).tolist()
    tgt_len = torch.randint(1, 8, (n,), generator=g).tolist()
    src = torch.full((n, max(src_len)), PAD)
    tgt_in = torch.full((n, max(tgt_len) + 1), PAD)
    tgt_out = torch.full((n, max(tgt_len) + 1), PAD)
    for i, (s, t) in enumerate(zip(src_len, tgt_len)):
        src[i, : s - 1] = torch.randint(4, VOCAB, (s - 1,), generator=g)
        src[i, s - 1] = EOS
        ids = torch.randint(4, VOCAB, (t,), generator=g)
        tgt_in[i, 0], tgt_in[i, 1 : t + 1] = BOS, ids
        tgt_out[i, :t], tgt_out[i, t] = ids, EOS
    return src, tgt_in, tgt_out


@pytest.mark.parametrize("positions", POSITIONS.values(), ids=POSITIONS.keys())
def test_reference_logprobs_equal_the_cached_decoder_step_by_step(positions):
    model = tiny_model(**positions)
    src, tgt_in, tgt_out = random_batch()
    forced = reference_logprobs(model, src, tgt_in, tgt_out, pad_id=PAD)  # (B, T)
    with torch.inference_mode():
        encoded, cache, steps = model.encode(src), None, []
        for t in range(tgt_in.size(1)):  # one token at a time through the decoding cache
            logits, cache = model.decode_step(tgt_in[:, t : t + 1], encoded, cache)
            lprobs = torch.log_softmax(logits[:, -1].float(), dim=-1)  # (B, V)
            steps.append(lprobs.gather(1, tgt_out[:, t : t + 1]).squeeze(1))
    stepwise = torch.stack(steps, dim=1).masked_fill(tgt_out.eq(PAD), 0.0)  # (B, T)
    torch.testing.assert_close(forced, stepwise, rtol=1e-5, atol=1e-5)
    assert forced[tgt_out.eq(PAD)].eq(0).all() and (forced[tgt_out.ne(PAD)] < 0).all()


def test_reference_total_equals_the_training_loss_without_label_smoothing():
    model = tiny_model()
    src, tgt_in, tgt_out = random_batch(7)
    with torch.no_grad():
        loss, nll = label_smoothed_loss(model(src, tgt_in), tgt_out, epsilon=0.0, pad_id=PAD)
    total = reference_logprobs(model, src, tgt_in, tgt_out, pad_id=PAD).sum()
    torch.testing.assert_close(-total, loss, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(-total, nll, rtol=1e-5, atol=1e-4)
    with torch.no_grad():  # label smoothing changes the loss: the equality is not vacuous
        smoothed, _ = label_smoothed_loss(model(src, tgt_in), tgt_out, epsilon=0.1, pad_id=PAD)
    assert abs(float(smoothed + total)) > 1e-2


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    words = "a man woman dog child rides runs on the red blue bike street park".split()
    g = torch.Generator().manual_seed(0)
    lines = [" ".join(words[i] for i in torch.randint(0, len(words), (6,), generator=g).tolist())
             for _ in range(100)]  # fmt: skip
    return Tokenizer.from_proto(train_bpe(lines, vocab_size=60, character_coverage=1.0))


def test_score_references_keeps_input_order_and_batching_changes_nothing(tokenizer):
    torch.manual_seed(0)
    model = build_model(TINY, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id).eval()
    sources = ["a man rides", "the dog", "a red bike on the street park", "woman", "child runs"]
    refs = ["the man", "a blue dog runs on the street", "bike", "a woman rides", "child"]
    one = score_references(model, tokenizer, sources, refs, DecodeConfig(max_sentences=1))
    together = score_references(model, tokenizer, sources, refs, DecodeConfig(max_sentences=8))
    for i, (a, b) in enumerate(zip(one, together)):
        assert a.tokens == tokenizer.encode(refs[i]) + [tokenizer.eos_id] == b.tokens
        assert a.src_len == len(tokenizer.encode(sources[i])) + 1
        assert len(a.logprobs) == len(a.tokens) and a.total == pytest.approx(sum(a.logprobs))
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    with pytest.raises(ValueError, match="5 sources but 4 references"):
        score_references(model, tokenizer, sources, refs[:4], DecodeConfig())


@pytest.mark.parametrize(
    "sources,refs,message",
    [
        (["a man", "the dog"], ["the man", " "], "reference line 2 is empty; remove the pair or "
         "give its translation"),
        (["a man", "\u200b\x01"], ["the man", "a dog"], "source line 2 is empty (no BPE token: "
         "only control or zero-width characters); remove the pair or give its source"),
        (["", "the dog"], ["the man", "\u200b"], "reference line 2 is empty (no BPE token"),
    ],
    ids=["blank_reference", "tokenless_source", "references_first"],
)  # fmt: skip
def test_score_references_refuses_a_line_empty_to_the_model(tokenizer, sources, refs, message):
    # It was scored (a reference as EOS alone, a source as EOS alone); rpr-nmt-score refused it
    # only by encoding every line a second time.
    from rpr_nmt.decode.forced import EmptyLineError

    torch.manual_seed(0)
    model = build_model(TINY, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id).eval()
    with pytest.raises(EmptyLineError) as error:
        score_references(model, tokenizer, sources, refs, DecodeConfig())
    assert str(error.value).startswith(message) and error.value.line == 2


def test_score_references_encodes_each_line_once(tokenizer, monkeypatch):
    torch.manual_seed(0)
    model = build_model(TINY, vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id).eval()
    encoded = []
    original = Tokenizer.encode
    monkeypatch.setattr(Tokenizer, "encode", lambda self, t: encoded.append(t) or original(self, t))
    score_references(model, tokenizer, ["a man", "the dog"], ["woman", "child"], DecodeConfig())
    assert sorted(encoded) == ["a man", "child", "the dog", "woman"]
