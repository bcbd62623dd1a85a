"""rpr-nmt-average in-process on the tiny checkpoints of tests/evaluate/test_cli.py."""

from __future__ import annotations

import os

import pytest

from rpr_nmt.checkpoint import load_checkpoint
from rpr_nmt.cli.average import main


def test_an_existing_output_is_replaced_only_with_force(tiny_run, tmp_path, capsys):
    # Probe D4: -o a run's own last.pt replaced it with a weights-only file, without a word.
    out = tmp_path / "last.pt"
    out.write_bytes(tiny_run["a"].read_bytes())
    before = out.read_bytes()
    assert main([str(tiny_run["a"]), str(tiny_run["b"]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        err == f"rpr-nmt-average: error: -o {out} exists: choose another file, or pass "
        "--force to replace it\n"
    )
    assert out.read_bytes() == before
    assert main([str(tiny_run["a"]), str(tiny_run["b"]), "-o", str(out), "--force"]) == 0
    assert load_checkpoint(out).averaged_from == [str(tiny_run["a"]), str(tiny_run["b"])]


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_a_folder_as_output_is_refused(tiny_run, tmp_path, capsys, force):
    assert main([str(tiny_run["a"]), "-o", str(tmp_path), *force]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_checkpoints_of_opposite_directions_are_not_averaged(tiny_run, tmp_path, capsys):
    # Probe S2: an en->de and a de->en model that share a joint BPE model were averaged.
    from tests.checkpoint.test_inference import reversed_copy

    deen = reversed_copy(tiny_run["b"], tmp_path / "deen.pt")
    out = tmp_path / "avg.pt"
    assert main([str(tiny_run["a"]), str(deen), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: error: cannot average {tiny_run['a']} (en-de) with {deen} (de-en): "
        "they translate different language pairs; average only models of one direction\n"
    )
    assert not out.exists()


def test_an_output_under_a_file_or_on_a_read_only_folder_is_one_line(
    tiny_run,
    tmp_path,
    capsys,
    monkeypatch,
):
    # Probe C5/C6: -o under a file, or on a read-only mount, was a traceback after averaging.
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    assert main([str(tiny_run["a"]), "-o", str(afile / "avg.pt")]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"rpr-nmt-average: error: -o {afile / 'avg.pt'}: {afile} is a file, not a folder: give "
        "another -o\n"
    )

    class ReadOnly:  # chmod does not stop root: the file system's answer is stood in for
        f_flag = os.ST_RDONLY

    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: not str(path).startswith(str(ro)))
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    for out in (ro / "avg.pt", ro / "new" / "avg.pt"):
        assert main([str(tiny_run["a"]), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"{ro} is on a read-only file system: give another -o" in err
    assert list(ro.iterdir()) == []


def relabelled(path, out, **model):
    """The checkpoint at `path` with its model config changed: the same weights and BPE model."""
    from dataclasses import replace

    from rpr_nmt.checkpoint import save_checkpoint

    state = load_checkpoint(path)
    config = replace(state.config, model=replace(state.config.model, **model))
    return save_checkpoint(replace(state, config=config), out)


@pytest.mark.parametrize(
    "model, named",
    [
        ({"positions_in": "decoder"}, "model.positions_in: both vs decoder"),
        ({"relative_positions": "rope"}, "model.relative_positions: shaw vs rope"),
    ],
)
def test_models_that_differ_only_in_parameter_free_settings_are_not_averaged(
    tiny_run, tmp_path, capsys, model, named
):
    # Probe F1: RoPE in the encoder only and RoPE in the decoder only (or RoPE and the sinusoid)
    # have the same parameter names and shapes, and were averaged into a model labelled as the
    # first argument's.
    other = relabelled(tiny_run["b"], tmp_path / "other.pt", **model)
    out = tmp_path / "avg.pt"
    assert main([str(tiny_run["a"]), str(other), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"rpr-nmt-average: error: {other} holds another model than {tiny_run['a']} ({named}): "
        "cannot average; average checkpoints of one run (an ensemble combines different "
        "models)\n"
    )
    assert not out.exists()


def test_checkpoints_that_differ_only_in_dropout_are_averaged(tiny_run, tmp_path):
    # Dropout acts only in training: the same model, averaged as before.
    other = relabelled(tiny_run["b"], tmp_path / "other.pt", dropout=0.3, attention_dropout=0.0)
    out = tmp_path / "avg.pt"
    assert main([str(tiny_run["a"]), str(other), "-o", str(out)]) == 0
    assert load_checkpoint(out).averaged_from == [str(tiny_run["a"]), str(other)]
