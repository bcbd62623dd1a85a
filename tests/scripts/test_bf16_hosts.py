"""scripts/bf16_hosts.py: one host's first losses against another's, to the last bit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ..conftest import REPO, load_script
from ..train.conftest import make_corpus

bf16_hosts = load_script("bf16_hosts")
RECORDED = REPO / "results" / "cpu_sittings" / "bf16_hosts"


def test_equal_losses_are_the_same_to_the_last_bit():
    said = bf16_hosts.parting([9.5, 9.25], [9.5, 9.25])
    assert said == "same: all 2 losses equal to the last bit"


def test_the_first_update_that_differs_is_named_with_both_values():
    said = bf16_hosts.parting([9.5, 9.25, 9.0], [9.5, 9.2500001, 9.1])
    assert said.startswith("first differs at update 2: 9.25 here, 9.2500001 there")
    assert "at update 3: 9.000000 against 9.100000" in said


def test_curves_of_other_lengths_are_compared_where_both_trained():
    said = bf16_hosts.parting([9.5, 9.25], [9.5, 9.25, 9.0])
    assert said == "the same for the 2 updates both trained (2 here, 3 there)"


def recipe_command(updates=2, *extra, precision="bf16"):
    """The command string a run of the script's recipe records."""
    overrides = [f"train.precision={precision}", f"train.max_steps={updates}", *extra]
    return " ".join(["rpr-nmt-train", *bf16_hosts.RECIPE, *overrides])


def record(command=None, losses=(9.5, 9.3), arithmetic=1):
    """What --json writes on another host (of this run's command with 2 updates by default)."""
    command = command or recipe_command()
    host = {"cpu": "Other CPU", "kind": "AMX-BF16", "bf16": "CPU with AMX-BF16"}
    code = {"arithmetic": arithmetic, "commit": "def", "modified": False}
    return {"host": host, "precision": "bf16", "code": code, "command": command,
            "losses": list(losses)}  # fmt: skip


def other_host(path, **fields):
    path.write_text(json.dumps(record(**fields)))
    return path


def fake_training(monkeypatch, losses, arithmetic=1):
    """rpr-nmt-train stood in for: the run folder gets `losses` (metrics.jsonl) and a session of
    `arithmetic` (sessions.jsonl); returns the training commands run. `losses=None`: fails the test
    if anything trains."""
    commands, real = [], subprocess.run

    def run(argv, *args, **kwargs):
        if "rpr_nmt.cli.train" not in argv:  # git, for the code record
            return real(argv, *args, **kwargs)
        if losses is None:
            pytest.fail("trained")
        commands.append(" ".join(argv))
        out = Path(next(w for w in argv if w.startswith("hydra.run.dir=")).split("=", 1)[1])
        out.mkdir(parents=True)
        lines = [{"kind": "train", "step": i + 1, "loss": x} for i, x in enumerate(losses)]
        (out / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        session = {"start_step": 0, "arithmetic": arithmetic, "commit": "abc", "modified": False}
        (out / "sessions.jsonl").write_text(json.dumps(session) + "\n")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(bf16_hosts.subprocess, "run", run)
    return commands


def test_a_run_is_written_and_compared_with_another_hosts(tmp_path, monkeypatch, capsys):
    there = other_host(tmp_path / "there.json")
    fake_training(monkeypatch, [9.5, 9.25])
    here = tmp_path / "hosts" / "here.json"
    assert bf16_hosts.main(["--updates", "2", "--json", str(here), "--against", str(there)]) == 0
    out = capsys.readouterr().out
    assert "(Other CPU (CPU with AMX-BF16)): first differs at update 2" in out
    written = json.loads(here.read_text())
    assert written["losses"] == [9.5, 9.25] and written["precision"] == "bf16"
    assert written["command"] == recipe_command(2)  # what ran, the update count too
    assert written["host"]["threads"] == 1 and written["host"]["bf16"]
    assert written["code"] == {"arithmetic": 1, "commit": "abc", "modified": False}  # the run's


def test_runs_of_other_update_counts_are_compared_over_the_updates_both_trained(
    monkeypatch, capsys
):
    """F5: --updates 3 against the recorded 20-update files compares their first 3 updates."""
    files = sorted(RECORDED.glob("*.json"))
    first = json.loads((RECORDED / "xeon_avx512bf16_no_amx.json").read_text())["losses"][:3]
    trained = fake_training(monkeypatch, first)
    assert bf16_hosts.main(["--updates", "3", "--against", *map(str, files)]) == 0
    assert "train.max_steps=3" in trained[0].split()
    out = capsys.readouterr().out
    assert "left out" not in out
    said = dict(line.split(" (", 1) for line in out.splitlines() if line.startswith("against"))
    same = "the same for the 3 updates both trained (3 here, 20 there)"
    for name in ["xeon_avx512bf16_no_amx", "xeon_held_to_avx512_core_bf16"]:
        assert said[f"against {RECORDED / name}.json"].endswith(same)
    parted = said[f"against {RECORDED / 'xeon_held_to_avx512_core.json'}"]
    assert "first differs at update 2" in parted


def test_a_file_of_another_command_is_left_out_naming_the_overrides_that_differ(
    tmp_path, monkeypatch, capsys
):
    fp32 = other_host(tmp_path / "fp32.json", command=recipe_command(20, precision="fp32"))
    tiny = other_host(tmp_path / "tiny.json", command=recipe_command(20, "model=transformer_tiny"))
    same = other_host(tmp_path / "same.json", command=recipe_command(20), losses=[9.5])
    fake_training(monkeypatch, [9.5])
    assert bf16_hosts.main(["--updates", "1", "--against", str(fp32), str(tiny), str(same)]) == 0
    out = capsys.readouterr().out
    assert (
        f"{fp32}: another command (only there: train.precision=fp32; "
        "only here: train.precision=bf16): left out"
    ) in out
    assert f"{tiny}: another command (only there: model=transformer_tiny): left out" in out
    assert f"against {same} (Other CPU (CPU with AMX-BF16)): same: all 1 losses" in out


def test_with_no_file_of_this_command_nothing_trains_and_it_exits_3(tmp_path, monkeypatch, capsys):
    """F5: nothing to compare with is said, and is no success."""
    fp32 = other_host(tmp_path / "fp32.json", command=recipe_command(2, precision="fp32"))
    fake_training(monkeypatch, None)
    assert bf16_hosts.main(["--updates", "2", "--against", str(fp32)]) == 3
    said = capsys.readouterr()
    assert f"{fp32}: another command (" in said.out
    assert said.err.startswith("bf16_hosts: nothing to compare: no --against file is of this")


def test_with_json_a_run_compared_with_no_file_is_written_and_exits_3(
    tmp_path, monkeypatch, capsys
):
    fp32 = other_host(tmp_path / "fp32.json", command=recipe_command(2, precision="fp32"))
    fake_training(monkeypatch, [9.5, 9.25])
    here = tmp_path / "here.json"
    assert bf16_hosts.main(["--updates", "2", "--json", str(here), "--against", str(fp32)]) == 3
    assert json.loads(here.read_text())["losses"] == [9.5, 9.25]
    assert "nothing compared: all 1 --against files left out" in capsys.readouterr().err


def test_a_file_of_another_arithmetic_is_left_out_as_such(tmp_path, monkeypatch, capsys):
    """F6: the same command and losses in another arithmetic are not 'the same'."""
    two = other_host(tmp_path / "two.json", losses=[9.5, 9.25], arithmetic=2)
    fake_training(monkeypatch, [9.5, 9.25], arithmetic=1)
    assert bf16_hosts.main(["--updates", "2", "--against", str(two)]) == 3
    out = capsys.readouterr().out
    assert f"{two}: another arithmetic (train.arithmetic=2 there, 1 here): left out" in out
    assert "same" not in out


def edited(**fields):
    """A file --json wrote with `fields` changed (None: left out), as text."""
    changed = {**record(), **fields}
    return json.dumps({k: v for k, v in changed.items() if v is not None})


@pytest.mark.parametrize(
    "text, problem",
    [
        ("not json", "not a file this script wrote (not JSON: "),
        ('{"losses": [1.0]}', "(no 'command')"),
        ("[]", "(holds a list, not an object)"),
        ('"x"', "(holds a str, not an object)"),
        (edited(command=1), "('command' is 1, not a string)"),
        (edited(losses=["9.5", "9.3"]), "('losses'[0] is '9.5', not a number)"),
        (edited(losses=[]), "('losses' is [], not a non-empty list of numbers)"),
        (edited(host="x"), "('host' is 'x', not an object)"),
        (edited(code=None), "(no 'code')"),
        (edited(code={"commit": "def"}), "not an object with an integer 'arithmetic'"),
        (None, "cannot read it (No such file or directory)"),
    ],
)
def test_a_bad_file_is_refused_in_one_line_before_anything_trains(
    text, problem, tmp_path, monkeypatch, capsys
):
    bad = tmp_path / "bad.json"
    if text is not None:
        bad.write_text(text)
    fake_training(monkeypatch, None)
    with pytest.raises(SystemExit) as refused:
        bf16_hosts.main(["--against", str(bad)])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bf16_hosts: --against {bad}: ") and err.count("\n") == 1
    assert problem in err


@pytest.mark.parametrize(
    "where, problem",
    [
        ("folder", "is a folder; name a file in it"),
        ("afile/x.json", "afile is a file, not a folder"),
        ("afile/deeper/x.json", "afile is a file, not a folder"),
    ],
)
def test_a_json_destination_it_cannot_write_is_refused_before_anything_trains(
    where, problem, tmp_path, monkeypatch, capsys
):
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile").write_text("")
    fake_training(monkeypatch, None)
    with pytest.raises(SystemExit) as refused:
        bf16_hosts.main(["--json", str(tmp_path / where)])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"bf16_hosts: --json {tmp_path / where}: ") and err.count("\n") == 1
    assert problem in err


def test_a_real_run_on_this_host_matches_itself_to_the_last_bit(tmp_path, capsys):
    """Through rpr-nmt-train: transformer_tiny on a tiny corpus, 3 fp32 updates, twice."""
    corpus = make_corpus(tmp_path / "corpus")
    tiny = ["data=local", f"data.root={corpus}", f"data.cache_dir={tmp_path / 'cache'}",
            "data.vocab_size=200", "model=transformer_tiny", "train.max_tokens=600",
            "train.device=cpu"]  # fmt: skip
    first = tmp_path / "first.json"
    options = ["--updates", "3", "--precision", "fp32"]
    assert bf16_hosts.main([*tiny, *options, "--json", str(first)]) == 0
    written = json.loads(first.read_text())
    assert len(written["losses"]) == 3 and all(x > 0 for x in written["losses"])
    assert "model=transformer_tiny" in written["command"]
    assert written["code"]["arithmetic"] == 1  # fp32 trains in arithmetic 1
    assert bf16_hosts.main([*tiny, *options, "--against", str(first)]) == 0
    assert "same: all 3 losses equal to the last bit" in capsys.readouterr().out
