"""quote_path_overrides: run-folder paths ('=' and ',' in their names) reach Hydra quoted."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from rpr_nmt.cli.path_overrides import quote_path_overrides

KEYS = ("checkpoint", "ensemble", "input")


@pytest.fixture
def runs(tmp_path, monkeypatch) -> list[str]:
    """Two sweep run folders' checkpoints, named as a sweep names them, relative to the cwd."""
    monkeypatch.chdir(tmp_path)
    paths = []
    for seed in (1, 2):
        run = Path(f"sweeps/ablate_k/model.max_relative_position=16,train.seed={seed}")
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "last.pt").write_bytes(b"")
        paths.append(str(run / "checkpoints" / "last.pt"))
    return paths


def parsed(argv: list[str]) -> dict[str, object]:
    """What Hydra makes of the arguments: key -> value."""
    overrides = OverridesParser.create().parse_overrides(argv[1:])
    return {o.key_or_group: o.value() for o in overrides}


def test_a_run_folder_path_is_quoted_and_reaches_hydra_whole(runs):
    argv = quote_path_overrides(["prog", f"checkpoint={runs[0]}", "split=val"], KEYS)
    assert argv == ["prog", f"checkpoint='{runs[0]}'", "split=val"]
    assert parsed(argv) == {"checkpoint": runs[0], "split": "val"}
    argv = quote_path_overrides(["prog", f"checkpoint={Path(runs[0]).parents[1]}"], KEYS)
    assert parsed(argv) == {"checkpoint": str(Path(runs[0]).parents[1])}  # a run folder


def test_a_list_is_cut_where_the_text_names_an_existing_path(runs):
    argv = quote_path_overrides(["prog", f"ensemble=[{runs[0]},{runs[1]}]"], KEYS)
    assert parsed(argv) == {"ensemble": runs}
    argv = quote_path_overrides(["prog", f"ensemble=[{runs[0]}, {runs[1]}]"], KEYS)  # a space
    assert parsed(argv) == {"ensemble": runs}
    # The longest text that names a path wins: here "sweeps/ablate_k" is a folder too.
    argv = quote_path_overrides(["prog", f"ensemble=[sweeps/ablate_k,{runs[1]}]"], KEYS)
    assert parsed(argv) == {"ensemble": ["sweeps/ablate_k", runs[1]]}
    Path("sweeps/ablate_k,x=1").mkdir()
    argv = quote_path_overrides(["prog", "ensemble=[sweeps/ablate_k,x=1,sweeps/ablate_k]"], KEYS)
    assert parsed(argv) == {"ensemble": ["sweeps/ablate_k,x=1", "sweeps/ablate_k"]}
    # A piece that names nothing is cut at every comma, as Hydra cuts it: the error names it.
    argv = quote_path_overrides(["prog", f"ensemble=[{runs[0]},gone/a=1,b=2.pt]"], KEYS)
    assert parsed(argv) == {"ensemble": [runs[0], "gone/a=1", "b=2.pt"]}


def test_what_hydra_reads_right_is_passed_on_unchanged(runs):
    plain = [
        "prog", "checkpoint=a.pt", "ensemble=[a.pt,b.pt]", "input=-", "decode.beam_size=4",
        f"checkpoint='{runs[0]}'", f'ensemble=["{runs[0]}"]',  # quoted already
        "input=${oc.env:HOME}/x=1",  # Hydra's interpolation: left to it
        "split=a=b",  # not a path setting
    ]  # fmt: skip
    assert quote_path_overrides(plain, KEYS) == plain
    assert quote_path_overrides(["prog", "+checkpoint=x=1.pt"], KEYS) == [
        "prog",
        "+checkpoint='x=1.pt'",
    ]


@pytest.mark.parametrize(
    "name",
    ["ünïcödé", "quo'te", 'dq"uote', "br[ack]et", "semi;colon", "brace{x}", "hash#x",
     "dollar${x}", "back\\slash", "trail\\", "1.0", "sp ace,a=b"],
)  # fmt: skip
def test_any_existing_path_reaches_hydra_whole(tmp_path, monkeypatch, name):
    # Probe U1: such paths failed with Hydra's lexer error unless the user quoted them.
    monkeypatch.chdir(tmp_path)
    path = Path("paths") / name / "checkpoints" / "last.pt"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    run = str(path.parents[1])
    other = tmp_path / "other.pt"
    other.write_bytes(b"")
    argv = quote_path_overrides(
        ["prog", f"checkpoint={path}", f"input={run}", f"ensemble=[{run},{other}]"], KEYS
    )
    values = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(argv[1:])}
    resolved = OmegaConf.to_container(OmegaConf.create(values), resolve=True)  # as Hydra's config
    assert resolved == {"checkpoint": str(path), "input": run, "ensemble": [run, str(other)]}


@pytest.mark.parametrize("name", ["out-ü.txt", "out,v2.txt", "o]ut.txt", "hash#x", "x=1", "1.0"])
def test_a_path_to_write_reaches_hydra_whole_before_it_exists(tmp_path, monkeypatch, name):
    # Probe: output=out-ü.txt, out,v2.txt, o]ut.txt crashed in Hydra's parser (exit 1) unless the
    # file existed already; a path to write is quoted by the same rule either way.
    monkeypatch.chdir(tmp_path)
    for key in ("output", "hydra.run.dir"):
        argv = quote_path_overrides(["prog", f"{key}={name}", "input=in,x"], KEYS, (key,))
        assert parsed(argv[:2]) == {key: name} and argv[2] == "input=in,x"  # input: as before
        Path(name).write_text("")  # existing: quoted the same
        assert quote_path_overrides(["prog", f"{key}={name}"], KEYS, (key,)) == argv[:2]
        Path(name).unlink()


def test_a_path_to_write_hydra_reads_right_or_quoted_by_hand_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plain = [
        "prog", "output=-", "output=out.de", "output=/dev/null", "output=a b.de", "output=",
        "output='out,v2.txt'", "output=${oc.env:HOME}/x,y",
    ]  # fmt: skip
    assert quote_path_overrides(plain, KEYS, ("output",)) == plain
    # Under -m commas are a sweep: the value is read as a path to read (a,b does not exist).
    sweep = ["prog", "-m", "output=a.de,b.de"]
    assert quote_path_overrides(sweep, KEYS, ("output",)) == sweep
