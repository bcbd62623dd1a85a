"""The Transformer: every toggle combination, cached decoding, presets, sharing, recast."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
import torch
import yaml

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import (
    DecoderCache,
    RelativeMultiheadAttention,
    RelativePositions,
    build_model,
)

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "model"
VOCAB, PAD = 23, 0

TINY = dict(d_model=8, n_heads=2, d_ff=16, n_encoder_layers=2, n_decoder_layers=2, pre_norm=False)
TOGGLES = ["relative_keys", "relative_values", "sinusoidal", "share_relative_across_heads",
           "share_relative_across_layers", "tie_embeddings", "pre_norm"]  # fmt: skip


def toggle_configs():
    """Every combination of the boolean toggles with k = 2, plus k = 0 (relative positions off)."""
    for values in itertools.product([False, True], repeat=len(TOGGLES)):
        yield dict(TINY, max_relative_position=2, **dict(zip(TOGGLES, values)))
    for sinusoidal, pre_norm in itertools.product([False, True], repeat=2):
        yield dict(TINY, max_relative_position=0, sinusoidal=sinusoidal, pre_norm=pre_norm)


def tiny(config: dict, **kwargs) -> torch.nn.Module:
    """build_model of a ModelConfig with these fields (the others at their defaults)."""
    return build_model(ModelConfig(**config), vocab_size=VOCAB, pad_id=PAD, **kwargs)


def batch(n=3, s=6, t=5):
    src = torch.randint(4, VOCAB, (n, s))
    src[1, -2:] = PAD  # one padded sentence
    return src, torch.randint(4, VOCAB, (n, t))


def check_cached_decoding(model, src, tgt, tolerance=1e-5):
    """Step by step, then a block after a cached prefix, against the full forward."""
    model.eval()
    with torch.no_grad():
        full = model(src, tgt)  # (B, T, V)
        enc = model.encode(src)
        step_logits, cache = [], None
        for t in range(tgt.size(1)):
            logits, cache = model.decode_step(tgt[:, t : t + 1], enc, cache)
            step_logits.append(logits)
        close = dict(rtol=tolerance, atol=tolerance)
        torch.testing.assert_close(torch.cat(step_logits, 1), full, **close)
        assert cache.length == tgt.size(1)
        # A block of several new queries after a cached prefix.
        head, cache = model.decode_step(tgt[:, :2], enc, None)
        tail, cache = model.decode_step(tgt[:, 2:], enc, cache)
        torch.testing.assert_close(torch.cat([head, tail], 1), full, **close)


def test_cached_decoding_equals_full_forward_for_every_toggle_combination():
    src, tgt = batch()
    configs = list(toggle_configs())
    assert len(configs) == 2 ** len(TOGGLES) + 4
    for config in configs:
        model = tiny(config)
        check_cached_decoding(model, src, tgt)


def test_positions_are_absolute_not_cache_size():
    """Decoding past k: the same logits whether the prefix came in one block or token by token."""
    model = tiny(dict(TINY, max_relative_position=1))
    src, tgt = batch(t=7)
    check_cached_decoding(model, src, tgt)


def test_index_select_reorders_beams():
    model = tiny(dict(TINY, max_relative_position=2)).eval()
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
    model = tiny(dict(TINY, max_relative_position=2)).eval()
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
    model = tiny(config)
    enc = model.encoder.layers
    assert enc[0].self_attn.rel_keys is enc[1].self_attn.rel_keys
    assert model.decoder.layers[0].self_attn.rel_keys is not enc[0].self_attn.rel_keys
    assert all(layer.cross_attn.rel_keys is None for layer in model.decoder.layers)
    assert model.output_projection.weight is model.encoder.embed.table.weight
    untied = tiny(dict(config, tie_embeddings=False))
    assert untied.output_projection.weight is not untied.encoder.embed.table.weight
    with pytest.raises(TypeError, match="d_modle"):
        tiny(dict(d_modle=8))
    with pytest.raises(TypeError, match="ModelConfig"):  # a plain dict is not a config
        build_model(dict(TINY), vocab_size=VOCAB, pad_id=PAD)


def test_relative_positions_make_the_encoder_order_aware():
    src, _ = batch()
    for k, expect_change in ((2, True), (0, False)):
        model = tiny(dict(TINY, max_relative_position=k, sinusoidal=False)).eval()
        flipped = src[:, [1, 0, 2, 3, 4, 5]]
        a, b = model.encode(src).memory, model.encode(flipped).memory
        changed = not torch.allclose(a[0, 2:], b[0, 2:], atol=1e-6)
        assert changed == expect_change


# transformer_big (210M parameters) is transformer_base's code at other sizes: -m slow.
PRESETS = [
    pytest.param(p.stem, marks=[pytest.mark.slow] if p.stem == "transformer_big" else [])
    for p in sorted(CONFIGS.glob("*.yaml"))
]


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_builds_and_trains_one_step(preset):
    config = yaml.safe_load((CONFIGS / f"{preset}.yaml").read_text())
    config.pop("defaults", None)
    vocab = 32768 if preset in ("transformer_base", "transformer_big") else 8000
    torch.manual_seed(0)
    model = build_model(ModelConfig(**config), vocab_size=vocab, pad_id=PAD)
    src = torch.randint(4, vocab, (2, 4))
    tgt = torch.randint(4, vocab, (2, 3))
    logits = model(src, tgt)
    assert logits.shape == (2, 3, vocab)
    logits.float().logsumexp(-1).mean().backward()
    rel = model.encoder.layers[0].self_attn.rel_keys
    assert rel is not None and rel.grad is not None and rel.grad.abs().sum() > 0


def test_build_model_maps_every_config_field():
    rel = dict(max_relative_position=3, relative_values=False, share_relative_across_heads=True)
    cfg = ModelConfig(**TINY, **rel, sinusoidal=True)
    model = build_model(cfg, vocab_size=VOCAB, pad_id=PAD)
    arguments = dict(model.arguments)
    assert arguments.pop("vocab_size") == VOCAB and arguments.pop("pad_id") == PAD
    assert arguments.pop("attention_dtype") is None
    fields = dataclasses.asdict(cfg)
    assert arguments.pop("relative") == RelativePositions(
        k=fields.pop("max_relative_position"),
        keys=fields.pop("relative_keys"),
        values=fields.pop("relative_values"),
        share_across_heads=fields.pop("share_relative_across_heads"),
    )
    assert arguments == fields


def test_attention_dtype_reaches_every_attention_module():
    model = tiny(dict(TINY, max_relative_position=2), attention_dtype=torch.float64)
    attention = [m for m in model.modules() if isinstance(m, RelativeMultiheadAttention)]
    assert len(attention) == 2 + 2 * 2  # encoder self; decoder self and cross
    assert all(m.attention_dtype == torch.float64 for m in attention)


def test_recast_copies_weights_and_ties_and_leaves_model_and_rng_alone():
    config = dict(TINY, max_relative_position=2, share_relative_across_layers=True)
    model = tiny(config).eval()
    torch.manual_seed(5)
    copy = model.recast(torch.bfloat16, attention_dtype=torch.float32)
    draw = torch.rand(3)
    torch.manual_seed(5)
    assert torch.equal(draw, torch.rand(3))  # building the copy drew no random numbers
    assert not copy.training and copy.arguments["attention_dtype"] == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(m.attention_dtype is None for m in model.modules() if hasattr(m, "attention_dtype"))
    for (name, p), (copy_name, q) in zip(model.named_parameters(), copy.named_parameters()):
        assert name == copy_name and q.dtype == torch.bfloat16
        assert torch.equal(q, p.to(torch.bfloat16))
    assert copy.output_projection.weight is copy.encoder.embed.table.weight
    enc = copy.encoder.layers
    assert enc[0].self_attn.rel_keys is enc[1].self_attn.rel_keys


def test_shaw_pair_rows_are_built_once_per_stack_and_shared_by_its_layers(monkeypatch):
    """Each stack builds r_ij once per forward (once per step in cached decoding) for all its
    layers, and no attention builds its own; the logits and gradients are exactly those of every
    attention building its own."""
    from rpr_nmt.model import attention, stacks

    real, built = attention.shaw_pairs, []

    def counted(*args, **kwargs):
        pairs = real(*args, **kwargs)
        built.append(pairs.built_for)
        return pairs

    def built_here(*args, **kwargs):
        raise AssertionError("a self-attention built its own pair rows")

    torch.manual_seed(0)
    model = tiny(dict(TINY, max_relative_position=2, n_encoder_layers=3, n_decoder_layers=3))
    src, tgt = batch(s=6, t=5)

    def logits_and_grads():
        model.zero_grad()
        torch.manual_seed(1)  # the same dropout masks
        logits = model(src, tgt)  # (B, T, V)
        (logits * torch.linspace(-1, 1, logits.numel()).view_as(logits)).sum().backward()
        return [logits.detach()] + [p.grad.clone() for p in model.parameters()]

    with monkeypatch.context() as m:  # the stacks share nothing: each attention builds its own
        m.setattr(model.encoder, "shaw_k", 0)
        m.setattr(model.decoder, "shaw_k", 0)
        each_attention = logits_and_grads()
        m.setattr(attention, "shaw_pairs", built_here)
        with pytest.raises(AssertionError, match="built its own"):
            model(src, tgt)
    monkeypatch.setattr(stacks, "shaw_pairs", counted)
    monkeypatch.setattr(attention, "shaw_pairs", built_here)
    shared = logits_and_grads()
    assert built == [(6, 6, 2, 0, False), (5, 5, 2, 0, True)]  # encoder, decoder
    for a, b in zip(each_attention, shared, strict=True):
        assert a.equal(b)
    built.clear()
    model.eval()
    with torch.no_grad():
        enc = model.encode(src)
        cache = None
        for t in range(3):
            _, cache = model.decode_step(tgt[:, t : t + 1], enc, cache)
    assert built == [(6, 6, 2, 0, False)] + [(1, t + 1, 2, t, True) for t in range(3)]


@pytest.mark.parametrize(
    "change,error,message",
    [
        (lambda s, t: (s.float(), t), TypeError, "src: token ids must be an int64 (or int32) "
         "tensor, got torch.float32"),
        (lambda s, t: (s, t[0]), ValueError, "tgt_in: token ids must be (batch, length), got (5,)"),
        (lambda s, t: (s, t.clone().fill_(VOCAB)), ValueError,
         f"tgt_in: token id {VOCAB} outside the vocabulary [0, {VOCAB})"),
        (lambda s, t: (s - 9, t), ValueError, "src: token id -9 outside the vocabulary"),
        (lambda s, t: (s, torch.cat([t, t])), ValueError,
         "src has 3 sentences but tgt_in 6: one target row each"),
    ],
    ids=["float", "rank", "too_high", "negative", "batch_sizes"],
)  # fmt: skip
def test_forward_names_the_bad_token_tensor(change, error, message):
    # torch's own messages (or a device-side assert on CUDA) named neither argument; two target
    # rows per source row were silently paired as beams.
    torch.manual_seed(0)
    model = tiny(dict(TINY, max_relative_position=2)).eval()
    src, tgt = batch()
    with pytest.raises(error) as raised:
        model(*change(src, tgt))
    assert str(raised.value).startswith(message)
    assert model(src.int(), tgt).shape == (3, 5, VOCAB)  # int32 ids, as nn.Embedding takes


@pytest.mark.parametrize("activation", [None, 0.0, 0.3])
def test_activation_dropout_acts_on_the_feed_forward_alone(activation):
    model = tiny(dict(TINY, dropout=0.2, attention_dropout=0.1, activation_dropout=activation))
    expected = 0.2 if activation is None else activation  # null: the feed-forward takes `dropout`
    layers = [*model.encoder.layers, *model.decoder.layers]
    assert [layer.ffn.dropout.p for layer in layers] == [expected] * 4
    assert [layer.dropout.p for layer in layers] == [0.2] * 4  # residual branches unchanged
    assert {m.attention_dropout for layer in layers for m in layer.modules()
            if isinstance(m, RelativeMultiheadAttention)} == {0.1}  # fmt: skip
