"""Models CTranslate2 cannot represent exactly are refused with one line naming the override.

These tests need no ctranslate2: the refusal comes before the optional package is imported.
"""

from __future__ import annotations

import sys

import pytest
import torch

from rpr_nmt.checkpoint import TrainingState, save_checkpoint
from rpr_nmt.cli.export import main as export_main
from rpr_nmt.config import TrainJobConfig
from rpr_nmt.export import ExportError, check_exportable, export_ctranslate2
from rpr_nmt.model import build_model

from .conftest import tiny_config

REFUSED = {
    "per_head_tables": (
        dict(share_relative_across_heads=False),
        "model.share_relative_across_heads=true",
    ),
    "per_head_tables_shared_across_layers": (
        dict(share_relative_across_heads=False, share_relative_across_layers=True),
        "model.share_relative_across_heads=true",
    ),
    "sinusoid_with_relative": (dict(sinusoidal=True), "model.sinusoidal=false"),
    "sinusoid_with_keys_only": (
        dict(sinusoidal=True, relative_values=False, share_relative_across_heads=False),
        "model.sinusoidal=false",
    ),
}


T5 = dict(relative_positions="t5", max_relative_position=0, share_relative_across_heads=False)
# overrides, the line's start (the setting), what it says to do instead
POSITIONS_REFUSED = {
    "alibi": (
        dict(relative_positions="alibi", max_relative_position=0),
        "model.relative_positions=alibi cannot be exported: CTranslate2 applies ALiBi in "
        "decoders only",
        "rpr-nmt-translate",
    ),
    "learned_with_alibi": (
        dict(absolute_positions="learned", relative_positions="alibi", max_relative_position=0),
        "model.relative_positions=alibi cannot be exported",
        "rpr-nmt-translate",
    ),
    "t5_per_layer": (
        dict(**T5, share_relative_across_layers=False),
        "model.share_relative_across_layers=false with model.relative_positions=t5",
        "model.share_relative_across_layers=true",
    ),
    "learned_with_rope": (
        dict(absolute_positions="learned", relative_positions="rope", max_relative_position=0),
        "model.absolute_positions=learned with model.relative_positions=rope cannot be exported",
        "model.absolute_positions=none",
    ),
    "learned_with_shaw": (
        dict(absolute_positions="learned"),
        "model.absolute_positions=learned with model.relative_positions=shaw cannot be exported",
        "model.absolute_positions=none",
    ),
    "sinusoid_with_t5": (
        dict(**T5, sinusoidal=True, share_relative_across_layers=True),
        "model.sinusoidal=true with model.relative_positions=t5 cannot be exported",
        "model.sinusoidal=false",
    ),
    "alibi_encoder_only": (
        dict(relative_positions="alibi", max_relative_position=0, positions_in="encoder"),
        "model.relative_positions=alibi cannot be exported: CTranslate2 applies ALiBi in "
        "decoders only",
        "model.positions_in=decoder",
    ),
    "learned_with_rope_decoder_only": (
        dict(
            absolute_positions="learned",
            relative_positions="rope",
            max_relative_position=0,
            positions_in="decoder",
        ),
        "model.absolute_positions=learned with model.relative_positions=rope cannot be exported",
        "model.absolute_positions=none",
    ),
    "t5_per_layer_encoder_only": (
        dict(**T5, share_relative_across_layers=False, positions_in="encoder"),
        "model.share_relative_across_layers=false with model.relative_positions=t5",
        "model.share_relative_across_layers=true",
    ),
    "sinusoid_with_rope": (
        dict(sinusoidal=True, relative_positions="rope", max_relative_position=0),
        "model.sinusoidal=true with model.relative_positions=rope cannot be exported",
        "model.sinusoidal=false",
    ),
}


def model_of(**overrides):
    torch.manual_seed(0)
    return build_model(tiny_config(**overrides), vocab_size=80, pad_id=0).eval()


@pytest.mark.parametrize("overrides,override", REFUSED.values(), ids=REFUSED.keys())
def test_check_exportable_names_the_setting_and_the_override(overrides, override):
    with pytest.raises(ExportError) as error:
        check_exportable(model_of(**overrides))
    message = str(error.value)
    assert override in message and "\n" not in message
    setting = override.split("=")[0]
    assert f"{setting}={'false' if override.endswith('true') else 'true'}" in message


@pytest.mark.parametrize(
    "overrides,start,instead", POSITIONS_REFUSED.values(), ids=POSITIONS_REFUSED.keys()
)
def test_positions_ctranslate2_cannot_hold_are_refused_in_one_line(overrides, start, instead):
    with pytest.raises(ExportError) as error:
        check_exportable(model_of(**overrides))
    message = str(error.value)
    assert message.startswith(start) and instead in message and "\n" not in message


@pytest.mark.parametrize("axis,method", [("relative", "xpos"), ("absolute", "scaled")])
def test_a_method_the_exporter_does_not_map_is_refused_not_guessed(axis, method):
    """A method added to the model but not to export/positions.py: without this refusal its
    stacks would be written as Shaw's tables or the sinusoid's, a model that translates wrongly."""
    model = model_of(max_relative_position=0)
    model.arguments[f"{axis}_positions"] = method  # as a model of that new method reads
    with pytest.raises(ExportError) as error:
        check_exportable(model)
    message = str(error.value)
    assert message.startswith(f"model.{axis}_positions={method} cannot be exported")
    assert "rpr-nmt-translate" in message and "\n" not in message


def test_identical_per_head_tables_are_exported_as_one():
    model = model_of(share_relative_across_heads=False)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "rel_" in name:
                p.copy_(p[:1].expand_as(p))
    check_exportable(model)  # every head holds the same table: exact as one shared table


def test_identical_per_layer_t5_tables_are_exported_as_one():
    model = model_of(**T5, share_relative_across_layers=False)
    with torch.no_grad():
        for stack in (model.encoder, model.decoder):
            first, *others = stack.relative_terms.t5
            for t5 in others:
                t5.weight.copy_(first.weight)
    check_exportable(model)  # every layer holds the first layer's table: CTranslate2's reuse


def test_nothing_is_written_for_a_refused_model(tiny_bpe, tmp_path):
    with pytest.raises(ExportError):
        export_ctranslate2(model_of(share_relative_across_heads=False), tiny_bpe, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_cli_refusal_is_one_line_with_status_2(tiny_bpe, tmp_path, capsys):
    model = model_of(share_relative_across_heads=False)
    config = TrainJobConfig(model=tiny_config(share_relative_across_heads=False))
    state = TrainingState(config=config, model=model.state_dict(), bpe_model=tiny_bpe.proto)
    path = save_checkpoint(state, tmp_path / "per_head.pt")
    assert export_main([str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rpr-nmt-export: error: model.share_relative_across_heads=false")
    assert "model.share_relative_across_heads=true" in err and "\n" not in err


def test_cli_refuses_alibi_in_one_line_with_status_2(tiny_bpe, tmp_path, capsys):
    fields = dict(relative_positions="alibi", max_relative_position=0)
    config = TrainJobConfig(model=tiny_config(**fields))
    state = TrainingState(
        config=config, model=model_of(**fields).state_dict(), bpe_model=tiny_bpe.proto
    )
    path = save_checkpoint(state, tmp_path / "alibi.pt")
    assert export_main([str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rpr-nmt-export: error: model.relative_positions=alibi cannot be")
    assert "decoders only" in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_cli_errors_are_one_line(tiny_checkpoint, tmp_path, capsys):
    assert export_main([str(tmp_path / "missing.pt"), "-o", str(tmp_path / "out")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    assert export_main([str(tiny_checkpoint), "-o", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err.strip()
    assert "exists" in err and "--force" in err and "\n" not in err


def test_missing_ctranslate2_says_how_to_install(tiny_bpe, tmp_path, monkeypatch):
    for name in [n for n in sys.modules if n == "ctranslate2" or n.startswith("ctranslate2.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    with pytest.raises(ExportError, match=r"pip install 'rpr-nmt\[export\]'"):
        export_ctranslate2(model_of(), tiny_bpe, tmp_path / "m")


def test_force_replaces_no_folder_but_a_previous_export(
    tiny_checkpoint, tmp_path, monkeypatch, capsys
):
    # Issue 31: `-o RUN_DIR --force` replaced a whole run folder (checkpoints, logs) with the
    # export, and `-o . --force` deleted the working directory's files before crashing.
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.pt").write_bytes(b"weights")
    (run / "train.log").write_text("log\n")
    (run / "model.bin").write_bytes(b"an export's name among the run's files")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert export_main([str(tiny_checkpoint), "-o", str(run), "--force"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{run} is not a previous export" in err
    assert "checkpoints" in err and "train.log" in err
    monkeypatch.chdir(run)
    assert export_main([str(tiny_checkpoint), "-o", ".", "--force"]) == 2
    assert "is not a previous export" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("mine\n")
    assert export_main([str(tiny_checkpoint), "-o", str(tmp_path / "notes.txt"), "--force"]) == 2
    assert "not a folder" in capsys.readouterr().err
    before[tmp_path / "notes.txt"] = b"mine\n"
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
