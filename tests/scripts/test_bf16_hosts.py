"""scripts/bf16_hosts.py: one host's first losses against another's, to the last bit."""

from __future__ import annotations

import json

import pytest

from ..conftest import load_script

bf16_hosts = load_script("bf16_hosts")


def test_equal_losses_are_the_same_to_the_last_bit():
    assert (
        bf16_hosts.parting([9.5, 9.25], [9.5, 9.25]) == "same: all 2 losses equal to the last bit"
    )


def test_the_first_update_that_differs_is_named_with_both_values():
    said = bf16_hosts.parting([9.5, 9.25, 9.0], [9.5, 9.2500001, 9.1])
    assert said.startswith("first differs at update 2: 9.25 here, 9.2500001 there")
    assert "at update 3: 9.000000 against 9.100000" in said


def test_curves_of_other_lengths_are_compared_where_both_trained():
    said = bf16_hosts.parting([9.5, 9.25], [9.5, 9.25, 9.0])
    assert said == "the same for the 2 updates both trained (2 here, 3 there)"


def test_a_run_is_written_and_compared_with_another_hosts(tmp_path, monkeypatch, capsys):
    there = tmp_path / "there.json"
    host = {"cpu": "Other CPU", "kind": "AMX-BF16", "bf16": "CPU with AMX-BF16"}
    there.write_text(json.dumps({"host": host, "precision": "bf16", "losses": [9.5, 9.3]}))
    monkeypatch.setattr(bf16_hosts, "train_losses", lambda n, p, out: (["cmd"], [9.5, 9.25]))
    here = tmp_path / "hosts" / "here.json"
    assert bf16_hosts.main(["--updates", "2", "--json", str(here), "--against", str(there)]) == 0
    out = capsys.readouterr().out
    assert "(Other CPU (CPU with AMX-BF16)): first differs at update 2" in out
    record = json.loads(here.read_text())
    assert record["losses"] == [9.5, 9.25] and record["precision"] == "bf16"
    assert record["host"]["threads"] == 1 and record["host"]["bf16"] and "commit" in record["code"]


def test_a_file_of_another_precision_is_left_out(tmp_path, monkeypatch, capsys):
    there = tmp_path / "fp32.json"
    there.write_text(json.dumps({"host": {}, "precision": "fp32", "losses": [9.5]}))
    monkeypatch.setattr(bf16_hosts, "train_losses", lambda n, p, out: (["cmd"], [9.5]))
    assert bf16_hosts.main(["--updates", "1", "--against", str(there)]) == 0
    assert "fp32, not bf16: left out" in capsys.readouterr().out


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
