"""The Transformer: every toggle combination, cached decoding, presets, parameter sharing."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
import yaml

from rpr_nmt.model import DecoderCache, build_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "model"
VOCAB, PAD = 23, 0

TINY = dict(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=2)
TOGGLES = ["relative_keys", "relative_values", "sinusoidal", "share_relative_across_heads",
           "share_relative_across_layers", "tie_embeddings", "pre_norm"]  # fmt: skip


def toggle_configs():
    """Every combination of the boolean toggles with k = 2, plus k = 0 (relative positions off)."""
    for values in itertools.product([False, True], repeat=len(TOGGLES)):
        yield dict(TINY, max_relative_position=2, **dict(zip(TOGGLES, values)))
    for sinusoidal, pre_norm in itertools.product([False, True], repeat=2):
        yield dict(TINY, max_relative_position=0, sinusoidal=sinusoidal, pre_norm=pre_norm)


def batch(n=3, s=6, t=5):
    src = torch.randint(4, VOCAB, (n, s))
    src[1, -2:] = PAD  # one padded sentence
    return src, torch.randint(4, VOCAB, (n, t))


def check_cached_decoding(model, src, tgt):
    model.eval()
    with torch.no_grad():
        full = model(src, tgt)  # (B, T, V)
        enc = model.encode(src)
        step_logits, cache = [], None
        for t in range(tgt.size(1)):
            logits, cache = model.decode_step(tgt[:, t : t + 1], enc, cache)
            step_logits.append(logits)
        torch.testing.assert_close(torch.cat(step_logits, 1), full, rtol=1e-5, atol=1e-5)
        assert cache.length == tgt.size(1)
        # A block of several new queries after a cached prefix.
        head, cache = model.decode_step(tgt[:, :2], enc, None)
        tail, cache = model.decode_step(tgt[:, 2:], enc, cache)
        torch.testing.assert_close(torch.cat([head, tail], 1), full, rtol=1e-5, atol=1e-5)


def test_cached_decoding_equals_full_forward_for_every_toggle_combination():
    src, tgt = batch()
    configs = list(toggle_configs())
    assert len(configs) == 2 ** len(TOGGLES) + 4
    for config in configs:
        model = build_model(config, vocab_size=VOCAB, pad_id=PAD)
        check_cached_decoding(model, src, tgt)


def test_positions_are_absolute_not_cache_size():
    """Decoding past k: the same logits whether the prefix came in one block or token by token."""
    model = build_model(dict(TINY, max_relative_position=1), vocab_size=VOCAB, pad_id=PAD)
    src, tgt = batch(t=7)
    check_cached_decoding(model, src, tgt)


def test_index_select_reorders_beams():
    model = build_model(dict(TINY, max_relative_position=2), vocab_size=VOCAB, pad_id=PAD).eval()
    src, tgt = batch()
    with torch.no_grad():
        enc = model.encode(src)
        _, cache = model.decode_step(tgt[:, :3], enc, None)
        order = torch.tensor([2, 2, 0, 1])  # memory follows the rows: one row per sentence
        enc2, cache2 = enc.index_select(order), cache.index_select(order, order)
        assert isinstance(cache2, DecoderCache) and cache2.length == 3
        got, _ = model.decode_step(tgt[order, 3:], enc2, cache2)
        want = model(src[order], tgt[order])[:, 3:]
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_beams_share_their_sentence_memory():
    """G rows per encoded sentence: the same logits as copying the memory per beam, through beam
    reordering (memory untouched) and a finished sentence leaving (memory_index)."""
    model = build_model(dict(TINY, max_relative_position=2), vocab_size=VOCAB, pad_id=PAD).eval()
    src, tgt = batch(t=6)
    beams = torch.arange(3).repeat_interleave(2)  # two beams per sentence, consecutive rows
    tgt = tgt[beams]
    tgt[1] = torch.randint(4, VOCAB, (tgt.size(1),))  # beams of one sentence differ
    with torch.no_grad():
        enc = model.encode(src)  # (3, S): one row per sentence
        _, cache = model.decode_step(tgt[:, :3], enc, None)
        assert cache.cross_attn[0].keys.size(0) == 3  # projected once per sentence
        swap = torch.tensor([1, 0, 2, 3, 5, 4])  # within each sentence only
        cache = cache.index_select(swap)
        got, cache = model.decode_step(tgt[swap, 3:4], enc, cache)
        want = model(src[beams], tgt[swap])[:, 3:4]
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        # Sentence 1 finishes: its two rows and its memory row leave.
        rows, kept = torch.tensor([0, 1, 4, 5]), torch.tensor([0, 2])
        cache, enc = cache.index_select(rows, kept), enc.index_select(kept)
        got, _ = model.decode_step(tgt[swap][rows, 4:], enc, cache)
        want = model(src[beams][rows], tgt[swap][rows])[:, 4:]
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        with pytest.raises(ValueError, match="5 query rows cannot share 3 memory rows"):
            model.decode_step(tgt[:5, :1], model.encode(src), None)


def test_sharing_and_tying():
    config = dict(TINY, max_relative_position=2, share_relative_across_layers=True)
    model = build_model(config, vocab_size=VOCAB, pad_id=PAD)
    enc = model.encoder.layers
    assert enc[0].self_attn.rel_keys is enc[1].self_attn.rel_keys
    assert model.decoder.layers[0].self_attn.rel_keys is not enc[0].self_attn.rel_keys
    assert all(layer.cross_attn.rel_keys is None for layer in model.decoder.layers)
    assert model.output_projection.weight is model.encoder.embed.table.weight
    untied = build_model(dict(config, tie_embeddings=False), vocab_size=VOCAB, pad_id=PAD)
    assert untied.output_projection.weight is not untied.encoder.embed.table.weight
    with pytest.raises(TypeError, match="d_modle"):
        build_model(dict(d_modle=8), vocab_size=VOCAB, pad_id=PAD)


def test_relative_positions_make_the_encoder_order_aware():
    src, _ = batch()
    for k, expect_change in ((2, True), (0, False)):
        model = build_model(dict(TINY, max_relative_position=k, sinusoidal=False), vocab_size=VOCAB,
                            pad_id=PAD).eval()  # fmt: skip
        flipped = src[:, [1, 0, 2, 3, 4, 5]]
        a, b = model.encode(src).memory, model.encode(flipped).memory
        changed = not torch.allclose(a[0, 2:], b[0, 2:], atol=1e-6)
        assert changed == expect_change


@pytest.mark.parametrize("preset", sorted(p.stem for p in CONFIGS.glob("*.yaml")))
def test_preset_builds_and_trains_one_step(preset):
    config = yaml.safe_load((CONFIGS / f"{preset}.yaml").read_text())
    config.pop("defaults", None)
    vocab = 32768 if preset in ("transformer_base", "transformer_big") else 8000
    torch.manual_seed(0)
    model = build_model(config, vocab_size=vocab, pad_id=PAD)
    src = torch.randint(4, vocab, (2, 4))
    tgt = torch.randint(4, vocab, (2, 3))
    logits = model(src, tgt)
    assert logits.shape == (2, 3, vocab)
    logits.float().logsumexp(-1).mean().backward()
    rel = model.encoder.layers[0].self_attn.rel_keys
    assert rel is not None and rel.grad is not None and rel.grad.abs().sum() > 0
