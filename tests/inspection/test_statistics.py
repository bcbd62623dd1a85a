"""rpr-nmt-inspect: the numbers behind the figures (not the pictures), and the files."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from rpr_nmt.checkpoint import TrainingState, load_checkpoint, save_checkpoint
from rpr_nmt.cli.inspect import main as inspect_main
from rpr_nmt.data import EOS_ID
from rpr_nmt.inspection.statistics import (
    InspectError,
    attention_mass,
    attention_weights,
    position_statistics,
    table_statistics,
)
from rpr_nmt.model import build_model
from tests.export.conftest import corpus, padded, tiny_config

from .conftest import model_of


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


@pytest.mark.parametrize(
    "overrides",
    [
        dict(absolute_positions="learned", max_relative_position=0),
        dict(sinusoidal=True, max_relative_position=0),
        dict(max_relative_position=0),
    ],
    ids=["learned", "sinusoid", "none"],
)
def test_attention_mass_of_the_absolute_methods(tiny_bpe, overrides):
    model = model_of(**overrides)
    sources, targets = corpus(10, seed=3)
    mass = attention_mass(model, tiny_bpe, sources, targets, max_distance=3, batch_size=4)
    for stack in ("encoder", "decoder"):
        torch.testing.assert_close(mass.mass[stack].sum(-1), torch.ones(2, 2))
    assert mass.mass["decoder"][..., 4:].abs().max() == 0


T5 = dict(relative_positions="t5", max_relative_position=0, share_relative_across_heads=False)


def test_t5_bias_by_distance_is_the_bucket_table():
    """Bucket u of head h holds u + 100 h: the bias at each distance names its bucket."""
    model = model_of(**T5, share_relative_across_layers=True)
    with torch.no_grad():
        for stack in (model.encoder, model.decoder):
            stack.relative_terms.t5[0].weight.copy_(
                torch.arange(32.0)[:, None] + 100 * torch.arange(2.0)
            )
    encoder, decoder = position_statistics(model).t5
    assert (encoder.stack, encoder.layer, decoder.stack, decoder.layer) == (
        "encoder", None, "decoder", None
    )  # fmt: skip
    assert encoder.distances == list(range(-160, 161)) and decoder.distances == list(range(-160, 1))
    torch.testing.assert_close(encoder.weight, model.encoder.relative_terms.t5[0].weight)
    # 32 buckets to 128: the encoder's 16 per side (8 exact), the decoder's 32 (16 exact)
    by_hand = {
        "encoder": {0: 0, -1: 1, -7: 7, -8: 8, -12: 9, -160: 15, 1: 17, 8: 24, 12: 25, 160: 31},
        "decoder": {0: 0, -1: 1, -15: 15, -16: 16, -64: 26, -100: 30, -128: 31, -160: 31},
    }
    for t in (encoder, decoder):
        for distance, bucket in by_hand[t.stack].items():
            column = t.distances.index(distance)
            assert t.by_distance[:, column].tolist() == [bucket, bucket + 100], (t.stack, distance)


def test_t5_tables_per_layer_are_each_drawn():
    model = model_of(**T5, share_relative_across_layers=False)
    tables = position_statistics(model).t5
    assert [(t.stack, t.layer) for t in tables] == [
        ("encoder", 0), ("encoder", 1), ("decoder", 0), ("decoder", 1)
    ]  # fmt: skip
    torch.testing.assert_close(tables[3].weight, model.decoder.relative_terms.t5[1].weight)
    assert not tables[2].bidirectional and tables[0].bidirectional


def test_learned_table_similarity_of_position_vectors():
    model = model_of(absolute_positions="learned", max_positions=20, max_relative_position=0)
    stats = position_statistics(model)
    assert [t.stack for t in stats.learned] == ["encoder", "decoder"]
    assert stats.t5 == [] and stats.alibi is None
    table = model.decoder.embed.learned.table.detach()  # (N, D)
    decoder = stats.learned[1]
    torch.testing.assert_close(decoder.norms, table.norm(dim=-1))
    assert decoder.cosine.shape == (20, 20)
    by_hand = float(table[3] @ table[11] / (table[3].norm() * table[11].norm()))
    assert decoder.cosine[3, 11].item() == pytest.approx(by_hand, abs=1e-6)
    torch.testing.assert_close(decoder.cosine, decoder.cosine.T)
    torch.testing.assert_close(decoder.cosine.diagonal(), torch.ones(20))


def test_alibi_slopes_for_reference():
    stats = position_statistics(
        model_of(relative_positions="alibi", max_relative_position=0, n_heads=4)
    )
    assert stats.alibi.slopes == [2**-2, 2**-4, 2**-6, 2**-8]  # 2^(-8 h / H), Press et al.
    assert stats.alibi.stacks == ["encoder", "decoder"]
    assert position_statistics(model_of()).alibi is None  # Shaw: nothing of the others


def checkpoint_of(tiny_checkpoint, tmp_path, **overrides):
    """The tiny checkpoint's data and BPE model with another (untrained) model."""
    state = load_checkpoint(tiny_checkpoint)
    config = replace(state.config, model=tiny_config(**overrides))
    model = build_model(config.model, vocab_size=80, pad_id=0)
    new = TrainingState(config=config, model=model.state_dict(), bpe_model=state.bpe_model, step=1)
    return save_checkpoint(new, tmp_path / "model.pt")


FIGURES = {
    "t5": (dict(**T5, share_relative_across_layers=True), ["encoder_t5_bias", "decoder_t5_bias"]),
    "learned": (
        dict(absolute_positions="learned", max_positions=40, max_relative_position=0),
        ["encoder_learned_cosine", "decoder_learned_cosine"],
    ),
    "alibi": (dict(relative_positions="alibi", max_relative_position=0), ["alibi_slopes"]),
}


@pytest.mark.parametrize("overrides,figures", FIGURES.values(), ids=FIGURES.keys())
def test_cli_draws_what_each_method_learned(tiny_checkpoint, tmp_path, overrides, figures):
    path = checkpoint_of(tiny_checkpoint, tmp_path, **overrides)
    out = tmp_path / "inspect"
    assert inspect_main([str(path), "-o", str(out), "--sentences", "6"]) == 0
    index = (out / "index.md").read_text()
    for name in [*figures, "encoder_attention_mass", "decoder_attention_mass"]:
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"{name}.png" in index
    assert not list(out.glob("*table_norms.png"))  # no Shaw tables
    numbers = json.loads((out / "inspect.json").read_text())
    method = overrides.get("relative_positions", overrides.get("absolute_positions"))
    assert f"relative {overrides.get('relative_positions', 'none')}" in index
    if method == "t5":
        assert [t["stack"] for t in numbers["t5"]] == ["encoder", "decoder"]
        assert len(numbers["t5"][0]["bucket_bias"]) == 2  # (H, U)
        assert len(numbers["t5"][1]["distances"]) == 161
    elif method == "learned":
        matrix = np.load(out / "encoder_learned_cosine.npy")
        assert matrix.shape == (40, 40) and "encoder_learned_cosine.npy" in index
        assert numbers["learned"][1]["mean_cosine_by_offset"][0] == pytest.approx(1.0)
    else:
        assert numbers["alibi"]["slopes"] == [2**-4, 2**-8]


def test_cli_on_a_model_with_positions_in_one_stack(tiny_checkpoint, tmp_path):
    """Shaw's tables of the encoder only: its figures are drawn, the decoder's are not, and the
    index says where the methods are."""
    state = load_checkpoint(tiny_checkpoint)
    model_cfg = replace(state.config.model, positions_in="encoder")
    model = build_model(model_cfg, vocab_size=80, pad_id=0)
    config = replace(state.config, model=model_cfg)
    path = save_checkpoint(
        replace(state, config=config, model=model.state_dict()), tmp_path / "e.pt"
    )
    out = tmp_path / "inspect"
    assert inspect_main([str(path), "-o", str(out), "--sentences", "8"]) == 0
    assert (out / "encoder_table_norms.png").is_file()
    assert not (out / "decoder_table_norms.png").exists()
    assert "relative shaw, in the encoder only." in (out / "index.md").read_text()


def test_weights_that_are_not_finite_are_named_not_the_code(tiny_bpe, tiny_checkpoint, tmp_path):
    """A diverged checkpoint: NaN never compares equal, so the recomputation check blamed the
    inspection code; the weights are named instead, in one line."""
    model = model_of()
    with torch.no_grad():
        model.decoder.layers[0].self_attn.q_proj.weight[0, 0] = float("nan")
    sources, targets = corpus(4, seed=3)
    with pytest.raises(InspectError, match=r"^the checkpoint's weights are not finite \(NaN or "
                       r"inf in decoder\.layers\.0\.self_attn\.q_proj\.weight"):  # fmt: skip
        attention_mass(model, tiny_bpe, sources, targets, max_distance=4)
    state = load_checkpoint(tiny_checkpoint)
    weights = {k: v.clone() for k, v in state.model.items()}
    weights["encoder.layers.0.self_attn.q_proj.weight"][0, 0] = float("inf")
    path = save_checkpoint(replace(state, model=weights), tmp_path / "diverged.pt")
    out = tmp_path / "inspect"
    assert inspect_main([str(path), "-o", str(out), "--sentences", "4"]) == 2


def test_an_output_that_is_not_finite_is_named_not_the_code(tiny_bpe):
    model = model_of()
    with torch.no_grad():  # finite weights whose products overflow float32
        model.encoder.layers[0].self_attn.v_proj.weight.fill_(3e38)
    sources, targets = corpus(4, seed=3)
    with pytest.raises(InspectError, match=r"^encoder layer 0 self-attention is NaN or inf"):
        attention_mass(model, tiny_bpe, sources, targets, max_distance=4)


def test_a_dev_sentence_past_a_learned_table_is_one_line_naming_it(
    tiny_checkpoint, tmp_path, capsys
):
    path = checkpoint_of(
        tiny_checkpoint, tmp_path, absolute_positions="learned", max_positions=8,
        max_relative_position=0,
    )  # fmt: skip
    assert inspect_main([str(path), "-o", str(tmp_path / "out"), "--sentences", "20"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rpr-nmt-inspect: error: dev line ") and "\n" not in err
    assert "positions is longer than the learned position table (model.max_positions=8)" in err
    line = int(err.split("dev line ")[1].split(":")[0])
    assert line > 1 and f"inspect the {line - 1} before it (--sentences)" in err
    out = tmp_path / "before"  # which they do
    assert inspect_main([str(path), "-o", str(out), "--sentences", str(line - 1)]) == 0
