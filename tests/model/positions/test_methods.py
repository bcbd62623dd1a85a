"""Every position method inside the Transformer: cached decoding equals the full forward, order
awareness, no position term in cross-attention, the fused kernel kept where the method allows."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import attention as attention_module
from rpr_nmt.model import build_model

VOCAB, PAD = 23, 0
TINY = dict(d_model=16, n_heads=4, d_ff=32, n_encoder_layers=2, n_decoder_layers=2)
METHODS = {
    "rope": dict(relative_positions="rope"),
    "rope_halves_partial": dict(relative_positions="rope", rope_layout="halves", rope_dims=2),
    "alibi": dict(relative_positions="alibi"),
    "alibi_3_heads": dict(relative_positions="alibi", d_model=12, n_heads=3),
    "t5": dict(relative_positions="t5", share_relative_across_layers=True, t5_num_buckets=8,
               t5_max_distance=6),
    "t5_per_layer": dict(relative_positions="t5", t5_num_buckets=8, t5_max_distance=6),
    "learned": dict(absolute_positions="learned", relative_positions="none", max_positions=40),
    "learned_alibi": dict(absolute_positions="learned", relative_positions="alibi"),
    "sinusoid_rope": dict(sinusoidal=True, relative_positions="rope"),
    "none": dict(absolute_positions="none", relative_positions="none"),
}  # fmt: skip


def tiny(name: str, **extra) -> torch.nn.Module:
    fields = {**TINY, "max_relative_position": 0, "pre_norm": True, **METHODS[name], **extra}
    torch.manual_seed(0)
    return build_model(ModelConfig(**fields), vocab_size=VOCAB, pad_id=PAD)


def batch(n=3, s=11, t=12):
    torch.manual_seed(1)
    src = torch.randint(4, VOCAB, (n, s))
    src[1, -3:] = PAD
    return src, torch.randint(4, VOCAB, (n, t))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_cached_decoding_equals_the_full_forward(name):
    """Step by step, and a block after a cached prefix: keys cached rotated at their own
    positions, biases built for the query's absolute position (q_offset), not the cache's row 0."""
    model = tiny(name).eval()
    src, tgt = batch()  # 12 targets: full forward on the fused kernel, steps on the own path
    with torch.no_grad():
        full = model(src, tgt)
        enc = model.encode(src)
        steps, cache = [], None
        for t in range(tgt.size(1)):
            logits, cache = model.decode_step(tgt[:, t : t + 1], enc, cache)
            steps.append(logits)
        torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)
        head, cache = model.decode_step(tgt[:, :3], enc, None)
        tail, _ = model.decode_step(tgt[:, 3:], enc, cache)
        torch.testing.assert_close(torch.cat([head, tail], 1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "learned"])
def test_distances_count_from_the_query_not_from_a_cache_buffer(name):
    """Beam search's reordered caches hold buffers one position longer than what they hold
    (KeyValueCache.index_select): the next step's positions still start at the cache's length."""
    model = tiny(name).eval()
    src, tgt = batch(n=2, t=9)
    swap = torch.tensor([1, 0])  # the two rows trade places after every step, as beams may
    with torch.no_grad():
        full = model(src, tgt)
        enc, cache, steps = model.encode(src), None, []
        order = torch.arange(2)  # the sentence each cache row holds
        for t in range(tgt.size(1)):
            logits, cache = model.decode_step(tgt[order, t : t + 1], enc.index_select(order), cache)
            step = torch.empty_like(logits)
            step[order] = logits
            steps.append(step)
            cache = cache.index_select(swap, memory_index=swap)  # into buffers with room for one
            order = order[swap]
            assert cache.self_attn[0]._room[0].size(2) == t + 2 and cache.length == t + 1
        torch.testing.assert_close(torch.cat(steps, 1), full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_the_encoder_sees_word_order_unless_no_method_is_on(name):
    model = tiny(name, dropout=0.0, attention_dropout=0.0).eval()
    src, _ = batch()
    swapped = src[:, [1, 0, *range(2, src.size(1))]]
    with torch.no_grad():
        a, b = model.encode(src).memory, model.encode(swapped).memory
    changed = not torch.allclose(a[0, 2:], b[0, 2:], atol=1e-6)
    assert changed == (name != "none")


@pytest.mark.parametrize("name", ["alibi", "rope", "t5", "learned"])
def test_only_alibis_encoder_cannot_tell_left_from_right(name):
    """ALiBi's encoder bias -m |i - j| is symmetric: a reversed source gives the reversed memory,
    so the encoder alone cannot tell a sentence from its mirror image (docs/results_positions.md,
    the position study). Every other method sees direction."""
    model = tiny(name, dropout=0.0, attention_dropout=0.0).eval()
    src, _ = batch()
    src = src[[0, 2]]  # no padding: a padded row's mirror would start with its padding
    with torch.no_grad():
        memory = model.encode(src).memory  # (B, S, D)
        mirrored = model.encode(src.flip(1)).memory.flip(1)
    assert torch.allclose(memory, mirrored, atol=1e-5) == (name == "alibi")


@pytest.mark.parametrize("name", ["rope", "alibi", "t5"])
def test_cross_attention_gets_no_position_term(name):
    model = tiny(name)
    src, tgt = batch()
    seen = []
    for layer in model.decoder.layers:
        layer.cross_attn.register_forward_hook(
            lambda m, args, kwargs, out: seen.append(kwargs.get("terms")), with_kwargs=True
        )
    model(src, tgt)
    assert seen == [None, None]
    with pytest.raises(ValueError, match="cross-attention takes no position terms"):
        layer = model.decoder.layers[0]
        terms = model.decoder.position_terms(tgt.size(1), tgt.size(1), 0, src.device)[0]
        layer.cross_attn(torch.randn(3, tgt.size(1), 16), torch.randn(3, 11, 16), terms=terms)


@pytest.mark.parametrize(
    "name,fused", [("rope", True), ("learned", True), ("none", True), ("alibi", True),
                   ("t5", False)],
)  # fmt: skip
def test_the_fused_kernel_serves_every_method_without_learned_logit_terms(name, fused, monkeypatch):
    """Training-shaped calls (more than FEW_QUERIES queries) go to SDPA, but for T5, whose bias
    needs gradients there (a float mask with gradients takes SDPA's unfused path on CPU)."""
    calls = []
    real = attention_module.fused_attention
    monkeypatch.setattr(
        attention_module, "fused_attention", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    model = tiny(name)
    model(*batch())
    cross_attention, self_attention = 2, 2 + 2  # decoder layers; encoder and decoder layers
    assert len(calls) == cross_attention + (self_attention if fused else 0)
