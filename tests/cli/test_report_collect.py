"""rpr-nmt-report --collect: where it copies to is checked before anything is read or copied."""

from __future__ import annotations

import pytest

from rpr_nmt.cli import report


def collect(capsys, *argv: str) -> str:
    """rpr-nmt-report --collect ARGV's stderr; it must exit with status 2 and one line."""
    assert report.main(["--collect", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rpr-nmt-report: ") and err.count("\n") == 1, err
    return err


@pytest.fixture
def sweep(tmp_path):
    run = tmp_path / "results" / "sweep" / "train.seed=1"
    (run / ".hydra").mkdir(parents=True)
    (run / "train_summary.json").write_text("{}")
    return tmp_path / "results" / "sweep"


def test_collecting_into_a_file_is_one_line(sweep, tmp_path, capsys):
    # Probe C10: NotADirectoryError traceback.
    afile = tmp_path / "afile"
    afile.write_text("x\n")
    for into in (afile, afile / "results"):
        err = collect(capsys, str(sweep), "--into", str(into))
        assert f"--into {into}: {afile} is a file, not a folder" in err


def test_collecting_into_the_collected_folder_is_one_line(sweep, tmp_path, capsys, monkeypatch):
    # Probe C10: shutil.SameFileError traceback.
    run = sweep / "train.seed=1"
    for source, into in [(sweep, sweep), (sweep, sweep / "results"), (run, sweep)]:
        err = collect(capsys, str(source), "--into", str(into))
        assert f"--into {into} is (or holds) the collected folder {source}" in err
    monkeypatch.chdir(tmp_path)  # the default, results/<name>, is the sweep itself
    err = collect(capsys, "results/sweep")
    assert "the default --into, results/sweep, is (or holds) the collected folder" in err
