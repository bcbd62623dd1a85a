"""scripts/sitting_table.py: the sitting's table divides each row by the peer's mean steady rate."""

from __future__ import annotations

import json
import re

import pytest

from ..conftest import load_script

table = load_script("sitting_table")

ROW = dict(
    positions="relative_k16", time_ratio_to_sinusoid=0.95, time_ratio_range=[0.9, 1.1],
    mflop_per_token=23.6, ceiling_share=0.58, peak_memory_mib=2311.8,
)  # fmt: skip


def write_sitting(folder, peers=(3600.0, 3400.0), rows=None):
    rows = rows or [
        dict(ROW, label="Shaw k = 16", precision="fp32", arithmetic=1, tokens_per_sec=4200.0),
        dict(ROW, label="Shaw k = 16", precision="bf16", arithmetic=2, tokens_per_sec=8750.0),
    ]
    bench = dict(
        command="python scripts/bench_train.py ...", date="2026-11-28 10:00 UTC",
        host="host: test", ceilings_gflops={"fp32": 200.0, "bf16": 700.0}, rows=rows,
    )  # fmt: skip
    (folder / "bench.json").write_text(json.dumps(bench))
    for name, rate in zip(table.PEER_LOGS, peers):
        summary = dict(steady_tok_s=rate, peak_rss_MiB=2195.0, exit_status="0")
        (folder / name).write_text(f"step 60 ... tok/s {rate}\n{json.dumps(summary)}\n")


def refused(capsys, pattern: str) -> None:
    """main() refuses in one line on stderr matching `pattern`, with exit status 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        table.main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and re.search(pattern, err) and err.count("\n") == 1, err


def test_each_row_is_divided_by_the_mean_of_the_peers_two_runs(tmp_path):
    write_sitting(tmp_path)
    text = table.sitting_table(
        json.loads((tmp_path / "bench.json").read_text()),
        [table.peer_summary(tmp_path / name) for name in table.PEER_LOGS],
    )
    rows = [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in text.splitlines()
        if line.startswith(("| fp32 |", "| bf16 |"))
    ]
    assert "mean 3,500" in text
    by_label = {row[1]: row for row in rows}
    assert by_label["Shaw k = 16"][5] == "1.20"  # 4,200 / 3,500
    assert by_label["Shaw k = 16, arithmetic 2"][5] == "2.50"  # 8,750 / 3,500
    assert by_label["OpenNMT-py 3.5.1, Shaw k 16 (before)"][5] == "1.03"
    assert by_label["Shaw k = 16"][3] == "58%" and by_label["Shaw k = 16"][6] == "2,312 MiB"


def test_the_command_writes_the_table_and_names_a_missing_file(tmp_path, monkeypatch, capsys):
    write_sitting(tmp_path)
    monkeypatch.setattr(
        "sys.argv", ["sitting_table.py", str(tmp_path), "--out", str(tmp_path / "t.md")]
    )
    table.main()
    assert (tmp_path / "t.md").read_text() == capsys.readouterr().out
    (tmp_path / "onmt_after.log").write_text('{"steady_tok_s": null, "peak_rss_MiB": 2157.2}\n')
    refused(capsys, "onmt_after.log: no steady rate")
    (tmp_path / "onmt_after.log").write_text("onmt_train failed (rc=1)\n")
    refused(capsys, "onmt_after.log: no summary line")
    (tmp_path / "bench.json").unlink()
    refused(capsys, "bench.json: missing")


@pytest.mark.parametrize(
    ("env", "named"),
    [({"METHODS": "relative shaw"}, "'shaw' is not a method"), ({"PRECISIONS": "fp16"}, "'fp16'")],
)
def test_the_sitting_refuses_a_bad_list_before_the_peer_runs(tmp_path, env, named):
    # A misspelt method used to stop the sitting only after OpenNMT-py's first run (minutes).
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parents[2] / "scripts" / "cpu_sitting.sh"
    peer = tmp_path / "peer"
    peer.mkdir()
    (peer / "train_bench.sh").write_text("echo ran > ran.txt\n")
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(script), str(out)],
        env={
            **os.environ,
            **env,
            "PEER": str(peer),
            "PEERS": str(tmp_path / "peers"),
            "PY": sys.executable,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert named in done.stderr and done.stderr.count("\n") == 1
    assert not out.exists() and not (peer / "ran.txt").exists()


@pytest.mark.parametrize(
    ("name", "text"), [("bench.json", '{"rows": ['), ("onmt_after.log", '{"steady_tok_s": 3400\n')]
)
def test_a_cut_short_json_file_is_named_in_one_line(tmp_path, monkeypatch, capsys, name, text):
    write_sitting(tmp_path)
    (tmp_path / name).write_text(text)
    monkeypatch.setattr("sys.argv", ["sitting_table.py", str(tmp_path)])
    refused(capsys, f"{name}: .*not JSON")


@pytest.mark.parametrize(
    ("name", "text", "named"),
    [
        ("bench.json", '{"date": "d", "host": "h", "command": "c"}', "bench.json: no 'rows'"),
        ("bench.json", "[]", "bench.json: holds a list, not an object"),
        ("onmt_before.log", '{"steady_tok_s": 3400}\n', "onmt_before.log: .*no 'peak_rss_MiB'"),
    ],
)
def test_json_without_a_key_the_table_reads_names_the_file_and_the_key(
    tmp_path, monkeypatch, capsys, name, text, named
):
    # Valid JSON without a key it reads used to end in a KeyError traceback.
    write_sitting(tmp_path)
    (tmp_path / name).write_text(text)
    monkeypatch.setattr("sys.argv", ["sitting_table.py", str(tmp_path)])
    refused(capsys, named)


def test_a_row_without_a_key_is_named_by_its_index(tmp_path, monkeypatch, capsys):
    row = dict(ROW, label="Shaw k = 16", precision="fp32", tokens_per_sec=4200.0)
    write_sitting(tmp_path, rows=[row, {k: v for k, v in row.items() if k != "tokens_per_sec"}])
    monkeypatch.setattr("sys.argv", ["sitting_table.py", str(tmp_path)])
    refused(capsys, r"bench.json: rows\[1\] no 'tokens_per_sec'")


@pytest.mark.parametrize("peers", [(0.0, 0.0), (3600.0, 0), (3600.0, -5.0), (3600.0, "fast")])
def test_a_peer_without_a_positive_rate_is_named(tmp_path, monkeypatch, capsys, peers):
    # Both at 0 used to end in a ZeroDivisionError; one at 0 halved the mean every row divides by.
    write_sitting(tmp_path, peers=peers)
    monkeypatch.setattr("sys.argv", ["sitting_table.py", str(tmp_path)])
    refused(capsys, r"onmt_(before|after).log: steady_tok_s is .*, not a positive rate")
