"""Tokenizer and BPE training: fixed ids, round trip, determinism, sampling, the cached model."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from rpr_nmt.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, DataError, Tokenizer, prepare_data
from rpr_nmt.data.bpe import load_or_train_bpe, sample_sentences, train_bpe
from tests.data.conftest import synthetic_pairs


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    src, tgt = synthetic_pairs(300)
    return Tokenizer(train_bpe(src + tgt, vocab_size=120, character_coverage=1.0))


def test_fixed_special_ids(tokenizer):
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    assert tokenizer.vocab_size == 120
    assert [tokenizer.id_to_piece(i) for i in range(4)] == ["<pad>", "<unk>", "<s>", "</s>"]


def test_round_trip_and_specials_skipped(tokenizer):
    text = "A man plays with two small dogs near the old building."
    ids = tokenizer.encode(text)
    assert ids and min(ids) > EOS_ID  # no BOS / EOS added
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == text
    assert tokenizer.encode_batch([text, "the dog"]) == [ids, tokenizer.encode("the dog")]


def test_from_proto_and_sha256(tokenizer):
    again = Tokenizer.from_proto(tokenizer.proto)
    assert again.sha256 == tokenizer.sha256 and len(again.sha256) == 64
    assert again.encode("the red ball") == tokenizer.encode("the red ball")
    with pytest.raises(DataError, match="not a sentencepiece model"):
        Tokenizer.from_proto(b"garbage")


def test_training_is_deterministic(tokenizer):
    src, tgt = synthetic_pairs(300)
    assert train_bpe(src + tgt, vocab_size=120, character_coverage=1.0) == tokenizer.proto


def test_vocab_too_large_is_a_data_error():
    with pytest.raises(DataError, match="lower data.vocab_size"):
        train_bpe(["a b", "b a"], vocab_size=5000, character_coverage=1.0)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"vocab_size": 0}, r"^data\.vocab_size=0 must be positive"),
        ({"vocab_size": -5}, r"^data\.vocab_size=-5 must be positive"),
        (
            {"bpe_character_coverage": 1.5},
            r"^data\.bpe_character_coverage=1\.5 must be in \[0\.98, 1\]",
        ),
        ({"bpe_sample_sentences": 0}, r"^data\.bpe_sample_sentences=0 must be positive"),
    ],
)
def test_bad_bpe_settings_refused_before_the_text_is_read(make_cfg, settings, message):
    def sample() -> list[str]:
        raise AssertionError("the training text was read")

    with pytest.raises(DataError, match=message) as refused:
        load_or_train_bpe(make_cfg(**settings), "0" * 64, sample, log=lambda _: None)
    assert "\n" not in str(refused.value) and "lower data.vocab_size" not in str(refused.value)


def test_vocab_below_the_characters_says_how_far_to_raise_it():
    src, tgt = synthetic_pairs(300)
    with pytest.raises(DataError) as refused:
        train_bpe(src + tgt, vocab_size=5, character_coverage=1.0)
    required = int(re.search(r"5 vs (\d+)", str(refused.value))[1])
    assert f"raise data.vocab_size to at least {required}" in str(refused.value)
    assert "lower data.vocab_size" not in str(refused.value)


@pytest.mark.parametrize("vocab_size", [1, 2, 3, 4, 30])
def test_a_tiny_vocab_says_the_minimum_too(vocab_size):
    # Below the 4 special pieces sentencepiece failed placing one, and the advice had no minimum.
    src, tgt = synthetic_pairs(300)
    with pytest.raises(DataError) as five:
        train_bpe(src + tgt, vocab_size=5, character_coverage=1.0)
    required = re.search(r"raise data\.vocab_size to at least \d+", str(five.value))[0]
    with pytest.raises(DataError) as refused:
        train_bpe(src + tgt, vocab_size=vocab_size, character_coverage=1.0)
    assert required in str(refused.value) and f"vocab_size={vocab_size}:" in str(refused.value)


def test_too_small_a_sample_names_bpe_sample_sentences():
    src, tgt = synthetic_pairs(300)
    with pytest.raises(DataError, match=r"raise data\.bpe_sample_sentences \(now 1\)"):
        train_bpe(src[:1] + tgt[:1], vocab_size=8000, character_coverage=1.0, sample_sentences=1)


def test_no_usable_line_names_the_line_endings():
    # A file whose lines end in CR alone reads as one line, too long for sentencepiece.
    one_line = "\r".join(synthetic_pairs(300)[0])
    with pytest.raises(DataError) as refused:
        train_bpe([one_line], vocab_size=120, character_coverage=1.0, sample_sentences=2_000_000)
    message = str(refused.value)
    assert "too few lines" in message and "CR" in message and "\n" not in message
    assert "lower data.vocab_size" not in message


def test_sample_takes_both_sides_of_pairs():
    src, tgt = [f"s{i}" for i in range(100)], [f"t{i}" for i in range(100)]
    assert sample_sentences(src, tgt, 500) == src + tgt
    sample = sample_sentences(src, tgt, 20)
    assert len(sample) == 20 and sample == sample_sentences(src, tgt, 20)
    assert [s[1:] for s in sample[:10]] == [t[1:] for t in sample[10:]]


def test_bpe_cache_reused(make_cfg, tiny_corpus):
    cfg = make_cfg()
    first = prepare_data(cfg, splits=[], log=lambda _: None)
    assert first.reused == {"bpe": False}
    (model,) = (tiny_corpus.parent / "cache" / "bpe").glob("*.model")
    mtime = model.stat().st_mtime_ns
    second = prepare_data(cfg, splits=[], log=lambda _: None)
    assert second.reused == {"bpe": True}
    assert model.stat().st_mtime_ns == mtime
    assert second.tokenizer.sha256 == first.tokenizer.sha256
    # A BPE setting is part of the key: a new vocabulary size trains a second model.
    third = prepare_data(replace(cfg, vocab_size=110), splits=[], log=lambda _: None)
    assert third.reused == {"bpe": False} and third.tokenizer.vocab_size == 110
