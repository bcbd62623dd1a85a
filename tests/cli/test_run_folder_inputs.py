"""rpr-nmt-export and rpr-nmt-inspect take a run folder as rpr-nmt-evaluate's checkpoint= does:
its kept step checkpoints, averaged."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import torch

from rpr_nmt.checkpoint import load_checkpoint, save_checkpoint
from rpr_nmt.checkpoint.run_folder import load_checkpoint_or_run
from rpr_nmt.cli import export, inspect


def run_folder(tmp_path, checkpoint):
    """A run folder with two kept step checkpoints: the tiny model, and it with weights x 3."""
    state = load_checkpoint(checkpoint)
    folder = tmp_path / "run" / "checkpoints"
    save_checkpoint(replace(state, step=100), folder / "step_0000100.pt")
    tripled = {n: t * 3 if t.is_floating_point() else t for n, t in state.model.items()}
    save_checkpoint(replace(state, model=tripled, step=120), folder / "step_0000120.pt")
    shutil.copyfile(folder / "step_0000120.pt", folder / "last.pt")
    return folder.parent, state


def test_a_run_folder_is_its_kept_checkpoints_averaged(tmp_path, tiny_checkpoint):
    run, state = run_folder(tmp_path, tiny_checkpoint)
    for item in (run, run / "checkpoints", str(run)):
        averaged = load_checkpoint_or_run(item)
        assert averaged.step == 120 and len(averaged.averaged_from) == 2
        for name, tensor in state.model.items():
            if tensor.is_floating_point():
                torch.testing.assert_close(averaged.model[name], tensor * 2)
    assert load_checkpoint_or_run(tiny_checkpoint).averaged_from is None  # a file as it is


def test_export_and_inspect_take_a_run_folder(tmp_path, tiny_checkpoint, capsys):
    # Probe U2: both said "checkpoint not found: RUN_FOLDER" though the folder exists.
    run, _ = run_folder(tmp_path, tiny_checkpoint)
    assert export.main([str(run), "-o", str(tmp_path / "exported")]) == 0, capsys.readouterr().err
    info = json.loads((tmp_path / "exported" / "rpr_nmt_export.json").read_text())
    assert info["checkpoint"] == str(run) and info["step"] == 120
    assert len(info["averaged_from"]) == 2
    args = [str(run), "-o", str(tmp_path / "inspected"), "--sentences", "4"]
    assert inspect.main(args) == 0, capsys.readouterr().err
    assert (tmp_path / "inspected" / "index.md").is_file()
    assert export.main([str(tmp_path / "empty"), "-o", str(tmp_path / "x")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err


def test_an_output_folder_under_a_file_is_one_line(tmp_path, tiny_checkpoint, capsys):
    # Probe C5/C6 for these commands: -o on a read-only mount or under a file was a traceback.
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    for main, extra in ((export.main, []), (inspect.main, ["--sentences", "2"])):
        assert main([str(tiny_checkpoint), "-o", str(afile / "out"), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{afile} is a file, not a folder: give another -o" in err
