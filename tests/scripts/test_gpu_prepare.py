"""scripts/gpu_prepare.py: the spaCy stand-in is a wheel pip installs; spacy.load() refuses."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import load_script

prepare = load_script("gpu_prepare")


def test_the_spacy_stand_in_installs_offline_and_refuses_to_load(tmp_path):
    wheel = prepare.spacy_stand_in_wheel(tmp_path)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
         str(site), str(wheel)],
        check=True,
    )  # fmt: skip
    probe = (
        "import spacy\n"
        "try:\n    spacy.load('en')\nexcept ImportError as e:\n    print('refused:', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env={"PYTHONPATH": str(site)}, capture_output=True,
        text=True, check=True,
    ).stdout  # fmt: skip
    assert out.startswith("refused:") and "terminology" in out


def test_wheels_are_fetched_for_the_lent_machine_python():
    assert prepare.PLATFORM[:4] == ["--python-version", "3.12", "--implementation", "cp"]
    assert all(spec.count("==") == 1 for spec in prepare.RPR_NMT_WHEELS + prepare.ONMT_WHEELS)


def test_a_missing_source_is_refused_before_anything_is_built(tmp_path, monkeypatch, capsys):
    # A wrong --data used to build and download ~25 MiB of wheels first, then exit 1.
    built = []
    monkeypatch.setattr(prepare, "REPO", tmp_path)
    monkeypatch.setattr(prepare, "build_pure_wheels", lambda *a: built.append(a))
    monkeypatch.setattr(prepare, "download", lambda *a: built.append(a))
    (tmp_path / "peers").mkdir()
    status = prepare.main(["--data", str(tmp_path / "nope"), "--peers", str(tmp_path / "peers")])
    err = capsys.readouterr().err
    assert status == 2 and "nope/multi30k is not a folder" in err and err.count("\n") == 1
    assert built == [] and list(tmp_path.iterdir()) == [tmp_path / "peers"]
