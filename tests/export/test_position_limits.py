"""A learned position table exported to CTranslate2 stops and refuses as our own decoding does.

Our decoder caps outputs at the table's last row (N - 1 tokens after BOS, winning over min_len,
rpr_nmt/decode/constraints.py) and refuses a source longer than the encoder's table; CTranslate2
alone fails with "No position encodings are defined for positions >= N". Given the rows the
export records (read_position_limits), translate_ctranslate2 and the lines of docs/deployment.md
give our outputs, and the same refusal.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from rpr_nmt.config import DecodeConfig
from rpr_nmt.data import PAD_ID
from rpr_nmt.decode import translate
from rpr_nmt.decode.constraints import PositionLimitError
from rpr_nmt.export import (
    ExportError,
    PositionLimits,
    export_ctranslate2,
    read_position_limits,
    translate_ctranslate2,
)
from rpr_nmt.model import Transformer, build_model

from .conftest import corpus, readme_translations, tiny_config, train_tiny

ctranslate2 = pytest.importorskip("ctranslate2")

ROWS = 12  # model.max_positions: outputs of at most 11 tokens, sources of at most 11 pieces
LEARNED = dict(absolute_positions="learned", max_positions=ROWS, max_relative_position=0)
# Sources that fit an encoder table of ROWS rows, their outputs short (EOS) or long (the cap).
SOURCES = corpus(16, seed=11, max_words=3)[0] + ["park park park park park."]
TOO_LONG = "park park park park park park park park park park park park."  # 13 pieces + EOS


@pytest.fixture(scope="module")
def exports(tiny_bpe, tmp_path_factory) -> dict[str, tuple[Transformer, Path]]:
    """A model with a learned table of ROWS rows in the decoder only, and in both stacks, and its
    export: trained with 48 rows (the corpus' targets are longer), then cut to the first ROWS, so
    that it wants outputs longer than its table holds."""
    torch.set_num_threads(1)
    exported = {}
    for where in ("decoder", "both"):
        cfg = tiny_config(**LEARNED, positions_in=where)
        trained = train_tiny(replace(cfg, max_positions=48), tiny_bpe, steps=40).state_dict()
        model = build_model(cfg, vocab_size=tiny_bpe.vocab_size, pad_id=PAD_ID).eval()
        model.load_state_dict(
            {k: v[:ROWS] if k.endswith("learned.table") else v for k, v in trained.items()}
        )  # (ROWS, D) tables
        folder = export_ctranslate2(model, tiny_bpe, tmp_path_factory.mktemp(where) / "m")
        exported[where] = model, folder
    return exported


def translator(folder: Path):
    return ctranslate2.Translator(str(folder), device="cpu", intra_threads=1)


def our_pieces(model, tok, sentences, cfg) -> list[list[str]]:
    return [
        [tok.id_to_piece(i) for i in h[0].tokens] for h in translate(model, tok, sentences, cfg)
    ]


@pytest.mark.parametrize("where", ["decoder", "both"])
def test_the_export_records_the_tables_rows(exports, where):
    _, folder = exports[where]
    expected = PositionLimits(encoder=ROWS if where == "both" else None, decoder=ROWS)
    assert read_position_limits(folder) == expected
    info = json.loads((folder / "rpr_nmt_export.json").read_text())
    assert info["position_limits"] == expected._asdict()


@pytest.mark.parametrize("min_len", [1, ROWS + 3], ids=["default", "min_len_past_the_table"])
@pytest.mark.parametrize("where", ["decoder", "both"])
def test_greedy_stops_at_the_decoder_tables_last_row_as_ours(tiny_bpe, exports, where, min_len):
    model, folder = exports[where]
    cfg = DecodeConfig(beam_size=1, min_len=min_len, streams=1)  # own caps 1.2 S + 10 >= 11
    expected = our_pieces(model, tiny_bpe, SOURCES, cfg)
    limits = read_position_limits(folder)
    got = [
        h[0]
        for h in translate_ctranslate2(translator(folder), tiny_bpe, SOURCES, cfg, limits=limits)
    ]
    assert got == expected
    at_table = [len(h) == ROWS - 1 for h in expected]
    assert all(len(h) <= ROWS - 1 for h in expected) and any(at_table)
    assert all(at_table) if min_len > ROWS - 1 else not all(at_table)  # EOS chosen, too


@pytest.mark.parametrize("where", ["decoder", "both"])
def test_the_documented_translate_batch_lines_stop_there_too(tiny_bpe, exports, where):
    model, folder = exports[where]
    cfg = DecodeConfig(beam_size=1, max_len_a=0.0, max_len_b=256, streams=1)  # the lines' 256
    expected = [tiny_bpe.decode(h[0].tokens) for h in translate(model, tiny_bpe, SOURCES, cfg)]
    assert readme_translations(folder, SOURCES) == expected


def test_a_longer_source_translates_with_the_table_in_the_decoder_only(tiny_bpe, exports):
    model, folder = exports["decoder"]
    cfg = DecodeConfig(beam_size=1, streams=1)
    limits = read_position_limits(folder)
    got = translate_ctranslate2(translator(folder), tiny_bpe, [TOO_LONG], cfg, limits=limits)
    assert [got[0][0]] == our_pieces(model, tiny_bpe, [TOO_LONG], cfg)


def test_a_source_longer_than_the_encoder_table_is_refused_as_ours(tiny_bpe, exports):
    model, folder = exports["both"]
    cfg = DecodeConfig(beam_size=1, streams=1)
    sentences = [SOURCES[0], TOO_LONG]
    with pytest.raises(PositionLimitError) as ours:
        translate(model, tiny_bpe, sentences, cfg)
    limits = read_position_limits(folder)
    with pytest.raises(PositionLimitError) as theirs:
        translate_ctranslate2(translator(folder), tiny_bpe, sentences, cfg, limits=limits)
    assert str(theirs.value) == str(ours.value)
    assert str(ours.value).startswith(f"line 2: a source of {len(tiny_bpe.encode(TOO_LONG)) + 1}")


def test_without_the_rows_the_failure_says_how_to_pass_them(tiny_bpe, exports):
    _, folder = exports["decoder"]
    cfg = DecodeConfig(beam_size=1, min_len=ROWS + 3, streams=1)  # every output runs past it
    with pytest.raises(RuntimeError, match=r"No position encodings.*read_position_limits"):
        translate_ctranslate2(translator(folder), tiny_bpe, SOURCES[:2], cfg)


SINE_ROWS = 40  # rpr-nmt-export --max-positions: the exported sinusoid's rows
SINUSOID = dict(max_relative_position=0, sinusoidal=True)
LONG = " ".join(["park"] * 45) + "."  # 46 pieces + EOS: past SINE_ROWS


@pytest.fixture(scope="module")
def sinusoid_exports(tiny_bpe, tmp_path_factory) -> dict[str, tuple[Transformer, Path]]:
    """A sinusoid model (in both stacks, in the encoder or the decoder only) exported with a table
    of SINE_ROWS rows: our own sinusoid has no last row, the exported one has."""
    torch.set_num_threads(1)
    exported = {}
    for where in ("both", "encoder", "decoder"):
        model = train_tiny(tiny_config(**SINUSOID, positions_in=where), tiny_bpe, steps=40)
        folder = tmp_path_factory.mktemp(f"sine_{where}") / "m"
        exported[where] = (
            model,
            export_ctranslate2(model, tiny_bpe, folder, max_positions=SINE_ROWS),
        )
    return exported


@pytest.mark.parametrize("where", ["both", "encoder", "decoder"])
def test_a_sinusoid_export_records_its_rows_in_the_stacks_that_have_it(sinusoid_exports, where):
    # Probe: the record said {encoder: null, decoder: null}, so nothing capped or refused.
    _, folder = sinusoid_exports[where]
    expected = PositionLimits(
        encoder=SINE_ROWS if where != "decoder" else None,
        decoder=SINE_ROWS if where != "encoder" else None,
    )
    assert read_position_limits(folder) == expected
    info = json.loads((folder / "rpr_nmt_export.json").read_text())
    assert info["position_limits"] == expected._asdict()


@pytest.mark.parametrize("where", ["both", "decoder"])
def test_min_len_past_the_exported_sinusoid_stops_at_its_last_row(
    tiny_bpe, sinusoid_exports, where
):
    # Probe: a short source (24 pieces) with min_len=45 failed inside CTranslate2 ("No position
    # encodings are defined for positions >= 40"); as with a learned table, the output stops at
    # the table's last row, where ours (no last row) goes on.
    model, folder = sinusoid_exports[where]
    source = "a man rides the red bike on the street a dog."  # 26 pieces + EOS
    assert len(tiny_bpe.encode(source)) + 1 < SINE_ROWS
    cfg = DecodeConfig(beam_size=1, min_len=45, streams=1)
    ours = our_pieces(model, tiny_bpe, [source], cfg)[0]
    limits = read_position_limits(folder)
    got = translate_ctranslate2(translator(folder), tiny_bpe, [source], cfg, limits=limits)
    assert len(ours) >= 45 and got[0][0] == ours[: SINE_ROWS - 1]


def test_a_source_longer_than_the_exported_sinusoid_is_refused(tiny_bpe, sinusoid_exports):
    _, folder = sinusoid_exports["both"]
    cfg = DecodeConfig(beam_size=1, streams=1)
    limits = read_position_limits(folder)
    with pytest.raises(PositionLimitError) as refused:
        translate_ctranslate2(translator(folder), tiny_bpe, [SOURCES[0], LONG], cfg, limits=limits)
    n = len(tiny_bpe.encode(LONG)) + 1
    assert str(refused.value) == (
        f"line 2: a source of {n} positions is longer than the exported sinusoid table "
        f"({SINE_ROWS} rows, rpr-nmt-export --max-positions): shorten or split it, or export the "
        "checkpoint again with a larger --max-positions"
    )
    _, decoder_only = sinusoid_exports["decoder"]  # no table in the encoder: no limit there
    limits = read_position_limits(decoder_only)
    got = translate_ctranslate2(translator(decoder_only), tiny_bpe, [LONG], cfg, limits=limits)
    assert len(got[0][0]) <= SINE_ROWS - 1


def test_a_sinusoid_export_without_its_rows_is_to_be_exported_again(sinusoid_exports, tmp_path):
    # A folder rpr-nmt-export wrote before the rows were recorded: its model settings say it has
    # the sinusoid, its limits none, so it says what to do rather than let CTranslate2 fail.
    _, folder = sinusoid_exports["both"]
    old = tmp_path / "old"
    old.mkdir()
    info = json.loads((folder / "rpr_nmt_export.json").read_text())
    del info["position_table"]
    info["position_limits"] = {"encoder": None, "decoder": None}
    info["model"] = asdict(tiny_config(**SINUSOID))  # as the command records it
    (old / "rpr_nmt_export.json").write_text(json.dumps(info))
    with pytest.raises(ExportError) as stale:
        read_position_limits(old)
    assert str(stale.value) == (
        f"{old / 'rpr_nmt_export.json'} records no rows for its sinusoid table (exported before "
        "rpr-nmt recorded them): export the checkpoint again with rpr-nmt-export"
    )
