"""rpr-nmt-export --format ctranslate2: CTranslate2 float32 decodes exactly as our greedy search.

ctranslate2 is an optional extra (rpr-nmt[export]): without it these tests skip.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from rpr_nmt.checkpoint import TrainingState, load_checkpoint, save_checkpoint
from rpr_nmt.cli.export import main as export_main
from rpr_nmt.config import DecodeConfig
from rpr_nmt.data import BOS_ID, EOS_ID, Tokenizer
from rpr_nmt.decode import translate
from rpr_nmt.export import (
    QUANTIZATIONS,
    export_ctranslate2,
    max_decoding_length,
    translate_ctranslate2,
    translate_options,
)
from rpr_nmt.model import build_model

from .conftest import corpus, padded, readme_translations, tiny_config, train_tiny

ctranslate2 = pytest.importorskip("ctranslate2")
spm = pytest.importorskip("sentencepiece")

SOURCES = corpus(40, seed=11, max_words=14)[0] + ["park park park park park park."]


@pytest.fixture(scope="module")
def exported(tiny_checkpoint, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ct2") / "tiny"
    assert export_main([str(tiny_checkpoint), "--format", "ctranslate2", "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def ours(tiny_checkpoint):
    state = load_checkpoint(tiny_checkpoint)
    tok = Tokenizer.from_proto(state.bpe_model)
    model = build_model(state.config.model, vocab_size=tok.vocab_size, pad_id=tok.pad_id)
    model.load_state_dict(state.weights())
    return model.eval(), tok


def translator(path: Path):
    return ctranslate2.Translator(str(path), device="cpu", intra_threads=1)


def our_pieces(model, tok, sentences, cfg) -> list[list[str]]:
    hyps = translate(model, tok, sentences, cfg)
    return [[tok.id_to_piece(i) for i in h[0].tokens] for h in hyps]


def test_the_folder_holds_model_vocabulary_and_sentencepiece(exported, ours):
    _, tok = ours
    names = {p.name for p in exported.iterdir()}
    assert {"model.bin", "config.json", "sentencepiece.model", "rpr_nmt_export.json"} <= names
    vocab = json.loads((exported / "shared_vocabulary.json").read_text())
    assert vocab == [tok.id_to_piece(i) for i in range(tok.vocab_size)]  # ids match ours
    config = json.loads((exported / "config.json").read_text())
    tokens = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    assert {key: config[key] for key in tokens} == tokens
    assert vocab.index("<pad>") == 0 and vocab.index("<s>") == BOS_ID
    assert config["add_source_eos"] is True and config["decoder_start_token"] == "<s>"
    info = json.loads((exported / "rpr_nmt_export.json").read_text())
    assert info["step"] == 120 and info["weights"] == "raw" and info["quantization"] == "float32"
    assert info["position_limits"] == {"encoder": None, "decoder": None}  # no learned table


@pytest.mark.parametrize(
    "a,b,min_len", [(1.2, 10, 1), (0.8, 2, 1), (1.0, 0, 3)], ids=["default", "tight", "min_len"]
)
def test_greedy_equals_ours_sentence_for_sentence(exported, ours, a, b, min_len):
    model, tok = ours
    cfg = DecodeConfig(beam_size=1, max_len_a=a, max_len_b=b, min_len=min_len, streams=1)
    expected = our_pieces(model, tok, SOURCES, cfg)
    got = [h[0] for h in translate_ctranslate2(translator(exported), tok, SOURCES, cfg)]
    assert got == expected
    caps = [max_decoding_length(len(tok.encode(s)) + 1, cfg) for s in SOURCES]
    at_cap = sum(len(h) == c for h, c in zip(expected, caps))
    assert 0 < at_cap < len(SOURCES)  # both rules at work: EOS chosen, and the length cap
    assert all(len(h) >= min_len for h in expected)


def test_parallel_workers_keep_the_input_order(exported, ours):
    """All caps' calls are submitted at once: two workers (inter_threads=2) decode them in
    parallel, and every sentence still gets its own greedy translation, in input order."""
    model, tok = ours
    cfg = DecodeConfig(beam_size=1, max_sentences=4, streams=1)
    workers = ctranslate2.Translator(str(exported), device="cpu", inter_threads=2, intra_threads=1)
    got = [h[0] for h in translate_ctranslate2(workers, tok, SOURCES, cfg)]
    assert got == our_pieces(model, tok, SOURCES, cfg)


def test_one_call_with_the_largest_cap_differs_only_where_a_smaller_cap_is_reached(exported, ours):
    model, tok = ours
    cfg = DecodeConfig(beam_size=1, max_len_a=0.8, max_len_b=2, streams=1)
    expected = our_pieces(model, tok, SOURCES, cfg)
    caps = [max_decoding_length(len(tok.encode(s)) + 1, cfg) for s in SOURCES]
    pieces = [[tok.id_to_piece(i) for i in tok.encode(s)] for s in SOURCES]
    single = translator(exported).translate_batch(pieces, **translate_options(cfg, tok, max(caps)))
    differ = {i for i, (r, e) in enumerate(zip(single, expected)) if r.hypotheses[0] != e}
    reached = {i for i, (e, c) in enumerate(zip(expected, caps)) if len(e) == c < max(caps)}
    assert differ and differ <= reached
    for i in differ:  # ours stopped at its cap where CTranslate2 went on
        assert single[i].hypotheses[0][: caps[i]] == expected[i]


def test_an_empty_line_is_left_empty_by_both(exported, ours):
    # CTranslate2 skips a source without tokens (EncoderDecoderReplica::skip_translation); ours
    # does not decode a blank sentence either.
    model, tok = ours
    cfg = DecodeConfig(beam_size=1, streams=1)
    for blank in ("", "  "):
        assert translate_ctranslate2(translator(exported), tok, [blank], cfg) == [[[]]]
        assert our_pieces(model, tok, [blank], cfg) == [[]]


def test_readme_lines_translate_text(exported, ours):
    model, tok = ours
    text = ["a man rides a red bike.", "the dog sits on the street."]
    translations = readme_translations(exported, text)  # docs/deployment.md's lines
    assert all(isinstance(t, str) and t for t in translations)
    cfg = DecodeConfig(beam_size=1, max_len_a=0.0, max_len_b=256, streams=1)  # CT2's default cap
    assert translations == [tok.decode(h[0].tokens) for h in translate(model, tok, text, cfg)]


RELATIVE_ONLY = dict(max_relative_position=0, share_relative_across_heads=False)
VARIANTS = {
    "post_norm": dict(pre_norm=False),
    "keys_only": dict(relative_values=False),
    "values_only": dict(relative_keys=False),
    "shared_across_layers": dict(share_relative_across_layers=True),
    "untied": dict(tie_embeddings=False),
    "one_head_per_head_tables": dict(n_heads=1, share_relative_across_heads=False),
    "sinusoid_only": dict(max_relative_position=0, sinusoidal=True),
    "no_positions": dict(max_relative_position=0),
    "positions_none": dict(
        absolute_positions="none", relative_positions="none", max_relative_position=0
    ),
    "learned": dict(absolute_positions="learned", max_positions=48, max_relative_position=0),
    "learned_post_norm": dict(
        absolute_positions="learned", max_relative_position=0, pre_norm=False
    ),
    "rope": dict(relative_positions="rope", **RELATIVE_ONLY),
    "rope_halves_part_base_100": dict(
        relative_positions="rope", rope_layout="halves", rope_dims=8, rope_base=100.0,
        **RELATIVE_ONLY,
    ),
    "rope_interleaved_part_untied": dict(
        relative_positions="rope", rope_dims=6, tie_embeddings=False, **RELATIVE_ONLY
    ),
    "t5": dict(relative_positions="t5", share_relative_across_layers=True, **RELATIVE_ONLY),
    # 8 buckets up to distance 10: the log-spaced and the last buckets within short sentences.
    "t5_8_buckets_to_10": dict(
        relative_positions="t5", share_relative_across_layers=True, t5_num_buckets=8,
        t5_max_distance=10, pre_norm=False, **RELATIVE_ONLY,
    ),
    # model.positions_in: each stack its own spec options, the other stack without positions.
    "shaw_encoder_only": dict(positions_in="encoder"),
    "shaw_decoder_only": dict(positions_in="decoder"),
    "sinusoid_encoder_only": dict(max_relative_position=0, sinusoidal=True, positions_in="encoder"),
    "sinusoid_decoder_only": dict(max_relative_position=0, sinusoidal=True, positions_in="decoder"),
    "learned_decoder_only": dict(
        absolute_positions="learned", max_positions=48, max_relative_position=0,
        positions_in="decoder",
    ),
    "rope_encoder_only": dict(relative_positions="rope", positions_in="encoder", **RELATIVE_ONLY),
    "rope_decoder_only": dict(relative_positions="rope", positions_in="decoder", **RELATIVE_ONLY),
    "t5_decoder_only": dict(
        relative_positions="t5", share_relative_across_layers=True, positions_in="decoder",
        **RELATIVE_ONLY,
    ),
    # ALiBi in the decoder only: CTranslate2's decoder alibi flag (an encoder has none).
    "alibi_decoder_only": dict(
        relative_positions="alibi", positions_in="decoder", **RELATIVE_ONLY
    ),
    "alibi_decoder_only_3_heads_post_norm": dict(
        relative_positions="alibi", positions_in="decoder", n_heads=3, d_model=48,
        pre_norm=False, **RELATIVE_ONLY,
    ),
}  # fmt: skip


def logprob_differences(model, tok, out, src_ids, tgt_ids) -> list[float]:
    """|log p| differences, ours against CTranslate2's score_batch, of every target token + EOS."""
    pieces = [[[tok.id_to_piece(i) for i in ids] for ids in rows] for rows in (src_ids, tgt_ids)]
    scores = translator(out).score_batch(*pieces)  # log p of targets + EOS
    src = padded([ids + [EOS_ID] for ids in src_ids])  # (B, S)
    with torch.inference_mode():
        logp = F.log_softmax(model(src, padded([[BOS_ID] + ids for ids in tgt_ids])), dim=-1)
    differences = []
    for i, ids in enumerate(tgt_ids):
        gold = torch.tensor(ids + [EOS_ID])
        expected = logp[i, torch.arange(len(gold)), gold]  # (T,)
        got = torch.tensor(scores[i].log_probs)
        assert got.shape == expected.shape
        differences += (got - expected).abs().tolist()
    return differences


@pytest.mark.parametrize("overrides", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_exportable_variant_scores_and_decodes_like_ours(tiny_bpe, tmp_path, overrides):
    torch.set_num_threads(1)
    # 20 updates: the twelve sentences already decode to 11-12 distinct outputs (40 gave no more).
    model = train_tiny(tiny_config(**overrides), tiny_bpe, steps=20)
    out = export_ctranslate2(model, tiny_bpe, tmp_path / "m", max_positions=64)
    sources, targets = corpus(12, seed=13)
    src_ids, tgt_ids = ([tiny_bpe.encode(s) for s in side] for side in (sources, targets))
    assert max(logprob_differences(model, tiny_bpe, out, src_ids, tgt_ids)) <= 1e-4
    cfg = DecodeConfig(beam_size=1, max_len_a=1.0, max_len_b=3, streams=1)
    got = [h[0] for h in translate_ctranslate2(translator(out), tiny_bpe, sources, cfg)]
    assert got == our_pieces(model, tiny_bpe, sources, cfg)


LONG = {
    "t5": dict(relative_positions="t5", share_relative_across_layers=True, **RELATIVE_ONLY),
    "t5_14_buckets_to_40": dict(
        relative_positions="t5", share_relative_across_layers=True, t5_num_buckets=14,
        t5_max_distance=40, **RELATIVE_ONLY,
    ),
    "rope": dict(relative_positions="rope", **RELATIVE_ONLY),
    "rope_halves": dict(relative_positions="rope", rope_layout="halves", **RELATIVE_ONLY),
    "learned": dict(
        absolute_positions="learned", relative_positions="none", max_positions=320,
        max_relative_position=0,
    ),
    "alibi_decoder_only": dict(
        relative_positions="alibi", positions_in="decoder", **RELATIVE_ONLY
    ),
    "shaw_encoder_only": dict(positions_in="encoder"),
}  # fmt: skip


@pytest.mark.parametrize("overrides", LONG.values(), ids=LONG.keys())
def test_long_inputs_score_alike_at_every_distance(tiny_bpe, tmp_path, overrides):
    """Inputs of 300 tokens: T5's buckets past max_distance (128), RoPE's angles and the learned
    table at positions far beyond the short sentences above. Untrained weights, T5's biases drawn
    large, so that every bucket sways attention."""
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = build_model(tiny_config(**overrides), vocab_size=tiny_bpe.vocab_size, pad_id=0).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".t5." in name:
                p.normal_(0.0, 2.0)  # (U, H)
    out = export_ctranslate2(model, tiny_bpe, tmp_path / "m")
    g = torch.Generator().manual_seed(2)
    src_ids, tgt_ids = (
        [torch.randint(4, tiny_bpe.vocab_size, (n,), generator=g).tolist() for n in lengths]
        for lengths in ((300, 170), (290, 200))
    )  # ids 4.. : no PAD, UNK, BOS or EOS inside
    assert max(logprob_differences(model, tiny_bpe, out, src_ids, tgt_ids)) <= 1e-4
    if overrides.get("relative_positions") == "t5":  # the far buckets count: a change there shows
        with torch.no_grad():
            for t5 in (model.encoder.relative_terms.t5[0], model.decoder.relative_terms.t5[0]):
                U = t5.num_buckets  # each side's last bucket: up to max_distance, and beyond
                far = [U // 2 - 1, U - 1] if t5.bidirectional else [U - 1]
                t5.weight[far] += 1.0
        assert max(logprob_differences(model, tiny_bpe, out, src_ids, tgt_ids)) > 1e-3


def test_int8_export_is_smaller_and_translates(exported, ours, tmp_path):
    model, tok = ours
    out = export_ctranslate2(model, tok, tmp_path / "int8", quantization="int8")
    cfg = DecodeConfig(beam_size=4, streams=1)
    hyps = translate_ctranslate2(translator(out), tok, SOURCES[:5], cfg)
    assert len(hyps) == 5 and all(len(h) == 1 for h in hyps)
    assert (out / "model.bin").stat().st_size < (exported / "model.bin").stat().st_size


def test_quantization_choices_are_ctranslate2s():
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    assert set(QUANTIZATIONS) == set(ACCEPTED_MODEL_TYPES)


def test_force_replaces_a_previous_export(tiny_checkpoint, tmp_path, monkeypatch, capsys):
    out = tmp_path / "m"
    assert export_main([str(tiny_checkpoint), "-o", str(out)]) == 0
    (out / "model.bin").write_bytes(b"stale")
    assert export_main([str(tiny_checkpoint), "-o", str(out), "--force"]) == 0
    assert (out / "model.bin").read_bytes() != b"stale"
    monkeypatch.chdir(out)  # a previous export, but the working directory: never deleted
    assert export_main([str(tiny_checkpoint), "-o", ".", "--force"]) == 2
    assert "is the working directory" in capsys.readouterr().err
    assert (out / "rpr_nmt_export.json").is_file()


@pytest.mark.parametrize("method", ["rope", "t5"])
def test_cli_exports_a_checkpoint_of_another_method(tiny_checkpoint, tmp_path, method):
    """rpr-nmt-export on a checkpoint whose config names the method: built from the stored
    config, exported, and decoding greedily as ours."""
    torch.set_num_threads(1)
    state = load_checkpoint(tiny_checkpoint)
    tok = Tokenizer.from_proto(state.bpe_model)
    fields = dict(relative_positions=method, share_relative_across_layers=method == "t5")
    model = train_tiny(tiny_config(**fields, **RELATIVE_ONLY), tok, steps=40)
    config = replace(state.config, model=tiny_config(**fields, **RELATIVE_ONLY))
    path = save_checkpoint(
        TrainingState(config=config, model=model.state_dict(), bpe_model=state.bpe_model, step=40),
        tmp_path / f"{method}.pt",
    )
    out = tmp_path / "exported"
    assert export_main([str(path), "-o", str(out)]) == 0
    info = json.loads((out / "rpr_nmt_export.json").read_text())
    assert info["model"]["relative_positions"] == method and info["step"] == 40
    cfg = DecodeConfig(beam_size=1, streams=1)
    got = [h[0] for h in translate_ctranslate2(translator(out), tok, SOURCES, cfg)]
    assert got == our_pieces(model, tok, SOURCES, cfg)


@pytest.mark.parametrize("variant", ["learned", "rope", "t5"])
def test_int8_export_of_every_method_translates(tiny_bpe, tmp_path, variant):
    """Quantization leaves the positions in float: T5's bias and the tables are no linear weights
    (CTranslate2 quantizes only variables with a scale)."""
    torch.manual_seed(0)
    model = build_model(tiny_config(**VARIANTS[variant]), vocab_size=tiny_bpe.vocab_size, pad_id=0)
    out = export_ctranslate2(model.eval(), tiny_bpe, tmp_path / "int8", quantization="int8")
    cfg = DecodeConfig(beam_size=2, streams=1)
    hyps = translate_ctranslate2(translator(out), tiny_bpe, SOURCES[:5], cfg)
    assert len(hyps) == 5 and all(len(h) == 1 for h in hyps)
