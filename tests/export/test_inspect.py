"""rpr-nmt-inspect: the numbers behind the figures (not the pictures), and the files."""

from __future__ import annotations

import json

import pytest
import torch

from rpr_nmt.cli.inspect import main as inspect_main
from rpr_nmt.data import EOS_ID
from rpr_nmt.export.inspect import attention_mass, attention_weights, table_statistics
from rpr_nmt.model import build_model

from .conftest import corpus, padded, tiny_config


def model_of(**overrides):
    torch.manual_seed(0)
    return build_model(tiny_config(**overrides), vocab_size=80, pad_id=0).eval()


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per_head"])
def test_attention_mass_sums_to_one_per_layer_and_head(tiny_bpe, shared):
    model = model_of(share_relative_across_heads=shared)
    sources, targets = corpus(10, seed=3)
    mass = attention_mass(model, tiny_bpe, sources, targets, max_distance=3, batch_size=4)
    for stack in ("encoder", "decoder"):
        m = mass.mass[stack]  # (L, H, 2W + 1)
        assert m.shape == (2, 2, 7)
        torch.testing.assert_close(m.sum(-1), torch.ones(2, 2))
        torch.testing.assert_close(m.mean(1).sum(-1), torch.ones(2))
    assert mass.mass["decoder"][..., 4:].abs().max() == 0  # causal: never a later position
    expected = sum(len(tiny_bpe.encode(s)) + 1 for s in sources)  # tokens + EOS
    assert mass.queries["encoder"] == expected


@pytest.mark.parametrize("method", ["rope", "alibi", "t5"])
def test_attention_mass_of_the_other_relative_methods(tiny_bpe, method):
    """The recomputed weights take the stack's rotation or bias: without them attention_mass's
    own check against each module's output raises InspectError."""
    fields = dict(relative_positions=method, max_relative_position=0)
    model = model_of(**fields, share_relative_across_heads=False)
    sources, targets = corpus(10, seed=3)
    mass = attention_mass(model, tiny_bpe, sources, targets, max_distance=3, batch_size=4)
    for stack in ("encoder", "decoder"):
        torch.testing.assert_close(mass.mass[stack].sum(-1), torch.ones(2, 2))
    assert mass.mass["decoder"][..., 4:].abs().max() == 0


def eq4_by_hand(attn, x, padding):
    """alpha from eq. 4 with every a^K_ij materialised (B, H, T, T): the reference."""
    B, T, D = x.shape
    H, Dh, k = attn.n_heads, attn.d_head, attn.relative.k
    q, keys = (p(x).view(B, T, H, Dh).transpose(1, 2) for p in (attn.q_proj, attn.k_proj))
    r = (torch.arange(T)[None, :] - torch.arange(T)[:, None]).clamp(-k, k) + k  # (T, T)
    a_k = attn.rel_keys[..., r, :]  # (H, T, T, Dh): per-head tables
    logits = (q @ keys.transpose(-1, -2) + torch.einsum("bhid,hijd->bhij", q, a_k)) / Dh**0.5
    return torch.softmax(logits.masked_fill(padding[:, None, None, :], -torch.inf), dim=-1)


def test_weights_and_output_are_the_models(tiny_bpe):
    """attention_weights gives eq. 4's alpha and the module's output, on padded batches."""
    model = model_of(share_relative_across_heads=False)
    src = padded([tiny_bpe.encode(s) + [EOS_ID] for s in corpus(3, seed=4)[0]])  # (B, S)
    x = model.encoder.embed(src)
    attn = model.encoder.layers[0].self_attn
    x = model.encoder.layers[0].attn_norm.before(x)
    with torch.no_grad():
        alpha, output = attention_weights(attn, x, src.eq(0))
        expected, _ = attn(x, key_padding_mask=src.eq(0))
        torch.testing.assert_close(alpha, eq4_by_hand(attn, x, src.eq(0)), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-4)
    assert alpha[src.eq(0)[:, None, None, :].expand_as(alpha)].abs().max() == 0  # padding


def test_one_sentence_by_hand(tiny_bpe):
    """A two-token source: the mass at distance d is alpha summed over pairs with j - i = d."""
    model = model_of()
    sources, targets = ["a."], ["ein."]
    src = torch.tensor([tiny_bpe.encode("a.") + [EOS_ID]])
    n = src.size(1)
    x = model.encoder.layers[0].attn_norm.before(model.encoder.embed(src))
    alpha, _ = attention_weights(model.encoder.layers[0].self_attn, x, None)  # (1, H, n, n)
    by_hand = torch.zeros(2, 2 * n - 1)
    for i in range(n):
        for j in range(n):
            by_hand[:, j - i + n - 1] += alpha[0, :, i, j] / n
    mass = attention_mass(model, tiny_bpe, sources, targets, max_distance=n - 1)
    torch.testing.assert_close(mass.mass["encoder"][0], by_hand)


def test_table_statistics_shapes_and_values():
    model = model_of(share_relative_across_heads=False)
    stats = table_statistics(model)
    assert len(stats) == 2 * 2 * 2  # stacks x layers x (w^K, w^V)
    first = stats[0]
    table = model.encoder.layers[0].self_attn.rel_keys.detach()  # (H, R, Dh)
    torch.testing.assert_close(first.norms, table.norm(dim=-1))
    torch.testing.assert_close(first.cosine.diagonal(dim1=-2, dim2=-1), torch.ones(2, 9))
    assert first.max_relative_position == 4
    assert table_statistics(model_of(max_relative_position=0)) == []


def test_cli_writes_pngs_index_and_numbers(tiny_checkpoint, tmp_path):
    out = tmp_path / "inspect"
    assert inspect_main([str(tiny_checkpoint), "-o", str(out), "--sentences", "8"]) == 0
    for stack in ("encoder", "decoder"):
        for name in ("table_norms", "keys_cosine", "values_cosine", "attention_mass"):
            png = out / f"{stack}_{name}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert png.name in (out / "index.md").read_text()
    numbers = json.loads((out / "inspect.json").read_text())
    assert numbers["sentences"] == 8 and numbers["split"] == "valid"
    assert numbers["max_distance"] == 16 and len(numbers["distances"]) == 33
    for stack in ("encoder", "decoder"):
        for row in numbers["attention_mass"][stack]["per_layer"]:
            assert sum(row) == pytest.approx(1.0, abs=1e-5)


def test_cli_missing_split_is_one_line(tiny_checkpoint, tmp_path, capsys):
    assert inspect_main([str(tiny_checkpoint), "-o", str(tmp_path), "--split", "nosuch"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rpr-nmt-inspect: error:") and "nosuch" in err and "\n" not in err
