"""rpr-nmt-evaluate and rpr-nmt-score refuse a hydra.run.dir that cannot be written in (a file, a
folder under a file, a read-only file system) in one line naming it, exit status 2, before Hydra
creates it (probe C5, C6: FileExistsError and 'Read-only file system' tracebacks)."""

from __future__ import annotations

import os

import pytest
from omegaconf import DictConfig

from rpr_nmt.cli.common import RefuseUnwritableRunFolder
from tests.conftest import compose_command
from tests.evaluate.tiny import cli


@pytest.mark.parametrize("command", ["evaluate", "score"])
@pytest.mark.parametrize("under", ["", "/run"])
def test_a_file_as_the_run_folder_is_one_line(tiny_run, tmp_path, command, under):
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    out = cli(command, f"checkpoint={tiny_run['a']}", f"hydra.run.dir={afile}{under}", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr == (
        f"rpr-nmt-{command}: error: hydra.run.dir={afile}{under}: {afile} is a file, not a "
        "folder: give a folder that can be written in (hydra.run.dir=...)\n"
    )
    assert afile.read_text() == "x\n"


def composed(command: str, run_dir: str) -> DictConfig:
    return compose_command(["checkpoint=x.pt", f"hydra.run.dir={run_dir}"], command, hydra=True)


@pytest.mark.parametrize("command", ["evaluate", "score"])
def test_a_read_only_run_folder_is_one_line(tmp_path, capsys, monkeypatch, command):
    # chmod does not stop root: a read-only mount's answer is stood in for.
    class ReadOnly:
        f_flag = os.ST_RDONLY

    ro = tmp_path / "ro"
    ro.mkdir()
    config = composed(command, str(ro / "ev"))
    callback = config.hydra.callbacks.refuse_unwritable_run_folder
    assert callback._target_ == "rpr_nmt.cli.common.RefuseUnwritableRunFolder"
    monkeypatch.setattr(os, "access", lambda path, mode: not str(path).startswith(str(ro)))
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    with pytest.raises(SystemExit) as refused:
        RefuseUnwritableRunFolder(callback.prog).on_run_start(config)
    err = capsys.readouterr().err
    assert refused.value.code == 2 and err == (
        f"rpr-nmt-{command}: error: hydra.run.dir={ro / 'ev'}: {ro} is on a read-only file "
        "system: give a folder that can be written in (hydra.run.dir=...)\n"
    )
