"""The notes under a sweep's table (rpr_nmt/report/notes.py): which hosts its tokens per second
come from, and whether bf16 runs from different hosts differ by rounding."""

from __future__ import annotations

import json

from rpr_nmt.report.sweep import find_runs, group_runs, markdown_table

from .run_folders import write_shaw_run


def test_the_table_says_which_hosts_its_tokens_per_second_come_from(tmp_path):
    # A sweep's rows trained on different hosts (the lengths study: AMX, then AVX512-BF16 without
    # AMX) read as 4x apart in tokens/s, with nothing to say the rates are not comparable.
    amx = {"device": "cpu", "cpu": "Xeon A", "kind": "AMX-BF16", "threads": 1}
    other = dict(amx, cpu="Xeon B", kind="AVX512-BF16")
    for k, seed, hosts in [(16, 1, [amx]), (16, 2, [amx, other]), (4, 1, [other]), (8, 1, [])]:
        write_shaw_run(tmp_path, k, seed, 27.0)
        path = tmp_path / f"model.max_relative_position={k},train.seed={seed}/train_summary.json"
        summary = json.loads(path.read_text())
        sessions = [{"start_step": 100 * i, "host": h} for i, h in enumerate(hosts)]
        path.write_text(json.dumps(summary | ({"sessions": sessions} if sessions else {})))
    note = markdown_table(group_runs(find_runs(tmp_path))).split("\n\n")[1]
    assert note.startswith("tokens/s: each run's own training rate")
    hosts = note.split("Hosts: ")[1].split(".")[0]  # up to the end of its sentence
    hosts = dict(h.split(": ") for h in hosts.split("; "))
    assert hosts == {
        "Xeon A (AMX-BF16), 1 thread": "Shaw k = 16",
        "Xeon B (AVX512-BF16), 1 thread": "Shaw k = 4, Shaw k = 16",  # and a resumed run's
        "not recorded": "Shaw k = 8",
    }
    (only,) = group_runs(find_runs(tmp_path / "model.max_relative_position=8,train.seed=1"))
    assert "Hosts: not recorded (runs trained before 2026-11-28)." in markdown_table([only])
    assert "rounding" not in note  # fp32 runs: hosts differ in speed only


def test_bf16_runs_from_different_hosts_are_said_to_differ_by_rounding(tmp_path):
    # Kernels decide bf16 rounding (scripts/bf16_hosts.py): one host held below its bf16
    # instructions parted from itself at update 2.
    amx = {"device": "cpu", "cpu": "Xeon A", "kind": "AMX-BF16", "threads": 1}
    for k, hosts in [(16, [amx]), (4, [])]:
        write_shaw_run(tmp_path, k, 1, 27.0)
        path = tmp_path / f"model.max_relative_position={k},train.seed=1/train_summary.json"
        sessions = [{"start_step": 0, "host": h} for h in hosts]
        path.write_text(
            json.dumps(json.loads(path.read_text()) | {"precision": "bf16", "sessions": sessions})
        )
    rows = group_runs(find_runs(tmp_path))
    assert "runs from different hosts differ by that rounding too" in markdown_table(rows)
    assert "rounding" not in markdown_table(rows[:1])  # one host: nothing to say


def test_fp32_runs_on_another_host_beside_bf16_runs_on_one_say_nothing_of_rounding(tmp_path):
    # Probe F4: every bf16 run on one host and an fp32 run on another brought the note, which
    # speaks of bf16 runs from more than one host. A resumed run's sessions count one by one.
    amx = {"device": "cpu", "cpu": "Xeon A", "kind": "AMX-BF16", "threads": 1}
    avx2 = {"device": "cpu", "cpu": "EPYC B", "kind": "AVX2", "threads": 2}
    runs = {16: ("bf16", [amx, amx]), 4: ("fp32", [avx2])}
    for k, (precision, hosts) in runs.items():
        write_shaw_run(tmp_path, k, 1, 27.0)
        path = tmp_path / f"model.max_relative_position={k},train.seed=1/train_summary.json"
        sessions = [{"start_step": 0, "host": h, "precision": precision} for h in hosts]
        path.write_text(
            json.dumps(
                json.loads(path.read_text()) | {"precision": precision, "sessions": sessions}
            )
        )
    table = markdown_table(group_runs(find_runs(tmp_path)))
    assert "Hosts: " in table and "EPYC B" in table
    assert "rounding" not in table
    # The bf16 run resumed on the other host: now bf16 came from two.
    path = tmp_path / "model.max_relative_position=16,train.seed=1/train_summary.json"
    summary = json.loads(path.read_text())
    summary["sessions"][1] = {"start_step": 50, "host": avx2, "precision": "bf16"}
    path.write_text(json.dumps(summary))
    assert "differ by that rounding too" in markdown_table(group_runs(find_runs(tmp_path)))
