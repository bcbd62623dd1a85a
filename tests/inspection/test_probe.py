"""The linear probe of absolute position (rpr_nmt/inspection/probe.py): the fit, and what it reads
from a model's states."""

from __future__ import annotations

import json

import pytest
import torch

from rpr_nmt.cli.inspect import main as inspect_main
from rpr_nmt.inspection.probe import fit_and_score, position_probe
from rpr_nmt.inspection.statistics import InspectError
from tests.export.conftest import corpus

from .conftest import model_of


def states(n: int = 400, d: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, d, generator=g), torch.randn(d, generator=g)


def test_a_linear_target_is_found_and_noise_is_not():
    x, w = states()
    y = x @ w + 3.0
    r2, mae = fit_and_score(x[:200], y[:200], x[200:], y[200:])
    assert r2 > 0.999 and mae < 0.05 * float(y.std())
    noise = torch.randn(400, generator=torch.Generator().manual_seed(1))
    r2, _ = fit_and_score(x[:200], noise[:200], x[200:], noise[200:])
    assert r2 < 0.1


def test_the_fit_does_not_depend_on_the_states_scale():
    x, w = states()
    y = (x @ w).sin()  # not linear: the ridge penalty shapes the fit
    small = fit_and_score(x[:200], y[:200], x[200:], y[200:])
    large = fit_and_score(1e3 * x[:200], y[:200], 1e3 * x[200:], y[200:])
    assert small == pytest.approx(large, rel=1e-9)


def test_the_sinusoid_is_read_from_the_embeddings_and_no_method_adds_nothing_to_them(tiny_bpe):
    sources, targets = corpus(60, seed=3)
    sinusoid = model_of(sinusoidal=True, max_relative_position=0)
    none = model_of(max_relative_position=0)
    with_sinusoid = position_probe(sinusoid, tiny_bpe, sources, targets, batch_size=8)
    without = position_probe(none, tiny_bpe, sources, targets, batch_size=8)
    for probed, bare in zip(with_sinusoid, without):
        assert len(probed.r2) == len(probed.mae) == 3  # the embeddings, then 2 layers
        # Without a method the embedding output is the token embeddings, scaled: the baseline.
        assert bare.r2[0] == pytest.approx(bare.baseline_r2, abs=1e-9)
        assert probed.baseline_r2 == pytest.approx(bare.baseline_r2, abs=1e-9)  # same tables
        assert probed.r2[0] > 0.8 and probed.r2[0] > bare.r2[0] + 0.5  # the sinusoid's
        assert probed.mae[0] < bare.mae[0] / 2


def test_without_positions_only_the_decoders_causal_mask_tells_where_a_token_is(tiny_bpe):
    """No method at all, untrained: the encoder sees a bag of tokens, and no layer reads position
    much better than the tokens alone (a trained one learns a little from which words a sentence
    holds: docs/results_positions.md); the decoder's later layers do, from how many tokens each
    query sees."""
    sources, targets = corpus(60, seed=3)
    encoder, decoder = position_probe(
        model_of(max_relative_position=0), tiny_bpe, sources, targets, batch_size=8
    )
    assert max(encoder.r2) < encoder.baseline_r2 + 0.1
    assert decoder.r2[-1] > decoder.baseline_r2 + 0.2


def test_even_sentences_are_fitted_and_odd_ones_scored(tiny_bpe):
    sources, targets = corpus(9, seed=4)
    encoder, decoder = position_probe(model_of(), tiny_bpe, sources, targets, batch_size=4)
    ids = [len(tiny_bpe.encode(s)) + 1 for s in sources]  # + EOS
    assert (encoder.fitted, encoder.held_out) == (sum(ids[0::2]), sum(ids[1::2]))
    ids = [len(tiny_bpe.encode(t)) + 1 for t in targets]  # BOS +
    assert (decoder.fitted, decoder.held_out) == (sum(ids[0::2]), sum(ids[1::2]))


def test_one_sentence_is_refused_with_what_to_do(tiny_bpe):
    sources, targets = corpus(1, seed=4)
    with pytest.raises(InspectError, match="raise --sentences"):
        position_probe(model_of(), tiny_bpe, sources, targets)


def test_cli_draws_the_probe_and_keeps_its_numbers(tiny_checkpoint, tmp_path):
    out = tmp_path / "inspect"
    assert inspect_main([str(tiny_checkpoint), "-o", str(out), "--sentences", "8"]) == 0
    assert (out / "position_probe.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    index = (out / "index.md").read_text()
    assert "position_probe.png" in index and "read by a linear probe" in index
    probe = json.loads((out / "inspect.json").read_text())["position_probe"]
    assert [p["stack"] for p in probe] == ["encoder", "decoder"]
    assert all(len(p["r2"]) == 3 and p["fitted"] > 0 and p["held_out"] > 0 for p in probe)


def test_cli_on_one_sentence_draws_everything_but_the_probe(tiny_checkpoint, tmp_path):
    out = tmp_path / "inspect"
    assert inspect_main([str(tiny_checkpoint), "-o", str(out), "--sentences", "1"]) == 0
    assert (out / "encoder_attention_mass.png").exists()
    assert not (out / "position_probe.png").exists()
    assert json.loads((out / "inspect.json").read_text())["position_probe"] == []
