"""scripts/bf16_hosts.py: one host's first losses against another's, to the last bit."""

from __future__ import annotations

import json

import pytest

from ..conftest import load_script
from ..train.conftest import make_corpus

bf16_hosts = load_script("bf16_hosts")


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


def other_host(path, command="cmd", losses=(9.5, 9.3)):
    host = {"cpu": "Other CPU", "kind": "AMX-BF16", "bf16": "CPU with AMX-BF16"}
    path.write_text(json.dumps({"host": host, "command": command, "losses": list(losses)}))
    return path


def test_a_run_is_written_and_compared_with_another_hosts(tmp_path, monkeypatch, capsys):
    there = other_host(tmp_path / "there.json")
    monkeypatch.setattr(bf16_hosts, "train_losses", lambda *a: (["cmd"], [9.5, 9.25]))
    here = tmp_path / "hosts" / "here.json"
    assert bf16_hosts.main(["--updates", "2", "--json", str(here), "--against", str(there)]) == 0
    out = capsys.readouterr().out
    assert "(Other CPU (CPU with AMX-BF16)): first differs at update 2" in out
    record = json.loads(here.read_text())
    assert record["losses"] == [9.5, 9.25] and record["precision"] == "bf16"
    assert record["host"]["threads"] == 1 and record["host"]["bf16"] and "commit" in record["code"]


def test_a_file_of_another_command_is_left_out(tmp_path, monkeypatch, capsys):
    there = other_host(tmp_path / "fp32.json", command="cmd train.precision=fp32")
    monkeypatch.setattr(bf16_hosts, "train_losses", lambda *a: (["cmd"], [9.5]))
    assert bf16_hosts.main(["--updates", "1", "--against", str(there)]) == 0
    assert "another command (cmd train.precision=fp32): left out" in capsys.readouterr().out


@pytest.mark.parametrize("text", ["not json", '{"losses": [1.0]}'])
def test_a_file_it_did_not_write_is_refused_before_anything_trains(
    text, tmp_path, monkeypatch, capsys
):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    monkeypatch.setattr(bf16_hosts, "train_losses", lambda *a: pytest.fail("trained"))
    with pytest.raises(SystemExit):
        bf16_hosts.main(["--against", str(bad)])
    assert f"--against {bad}: not a file this script wrote" in capsys.readouterr().err


def test_a_real_run_on_this_host_matches_itself_to_the_last_bit(tmp_path, capsys):
    """Through rpr-nmt-train: transformer_tiny on a tiny corpus, 3 fp32 updates, twice."""
    corpus = make_corpus(tmp_path / "corpus")
    tiny = ["data=local", f"data.root={corpus}", f"data.cache_dir={tmp_path / 'cache'}",
            "data.vocab_size=200", "model=transformer_tiny", "train.max_tokens=600",
            "train.device=cpu"]  # fmt: skip
    first = tmp_path / "first.json"
    options = ["--updates", "3", "--precision", "fp32"]
    assert bf16_hosts.main([*tiny, *options, "--json", str(first)]) == 0
    record = json.loads(first.read_text())
    assert len(record["losses"]) == 3 and all(x > 0 for x in record["losses"])
    assert "model=transformer_tiny" in record["command"]
    assert bf16_hosts.main([*tiny, *options, "--against", str(first)]) == 0
    assert "same: all 3 losses equal to the last bit" in capsys.readouterr().out
