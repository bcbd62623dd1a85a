"""scripts/tuning_table.py: one row per tuning run, best validation BLEU first, the shared
overrides said once; a run that scored its test split, or a folder without runs, is exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from ..conftest import load_script

tuning = load_script("tuning_table")

SHARED = ["experiment=tune_news", "train.max_steps=2200", "model.n_heads=4"]


def make_run(sweep: Path, name: str, changed: list[str], summary: dict | None) -> Path:
    run = sweep / name
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(SHARED + changed))
    (run / "train.log").write_text("[t][rpr_nmt.train][INFO] - step 50 | loss 7.1\n"
                                   "[t][rpr_nmt.train][INFO] - step 100 | loss 6.2\n")  # fmt: skip
    if summary is not None:
        (run / "train_summary.json").write_text(json.dumps(summary))
    return run


def summary(bleu: float, **extra) -> dict:
    return {
        "steps": 2200, "train_seconds": 3000.0, "train_tokens_per_sec": 9000.0,
        "best_valid_loss": 4.5, "valid_bleu": bleu, "valid_tokenized_bleu": bleu + 0.4,
        "peak_memory_mb": 3072.0,
        "sessions": [{"host": {"threads": 1, "allocator": "jemalloc"}}, {"host": {"threads": 2}}],
        **extra,
    }  # fmt: skip


def test_rows_are_ranked_by_valid_bleu_and_say_only_what_they_change(tmp_path, capsys):
    make_run(tmp_path, "a", ["model.dropout=0.1"], summary(10.5))
    make_run(tmp_path, "b", ["model.dropout=0.3"], summary(12.25))
    make_run(tmp_path, "c", ["data.vocab_size=4000"], None)  # still training
    out = tmp_path / "table.md"
    assert tuning.main([str(tmp_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == out.read_text()
    lines = printed.splitlines()
    assert lines[0] == "Shared by every run: model.n_heads=4"  # experiment and budget left out
    rows = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert rows == [
        "| model.dropout=0.3 | 2,200 | 50 (1,2) | 9,000 | 3.0 (jemalloc) | 4.5000 | 12.25 "
        "| 12.65 |",
        "| model.dropout=0.1 | 2,200 | 50 (1,2) | 9,000 | 3.0 (jemalloc) | 4.5000 | 10.50 "
        "| 10.90 |",
        "| data.vocab_size=4000 | 100 (running or stopped) | | | | | | |",
    ]


def test_a_run_that_scored_its_test_set_is_refused(tmp_path, capsys):
    run = make_run(tmp_path, "a", [], summary(10.0, test_bleu=9.0))
    assert tuning.main([str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"tuning_table: {run}: the run scored its test split")
    assert "train.evaluate_test=false" in error and error.count("\n") == 1


def test_a_folder_without_runs_is_named(tmp_path, capsys):
    assert tuning.main([str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err == (
        f"tuning_table: {tmp_path / 'nothing'}: no run folder (one with a train.log) in it\n"
    )


def test_a_collected_copy_without_its_log_is_a_run(tmp_path, capsys):
    run = make_run(tmp_path, "a", ["model.dropout=0.3"], summary(12.25))
    (run / "train.log").unlink()  # rpr-nmt-report --collect copies no logs
    make_run(tmp_path, "b", ["model.dropout=0.1"], summary(10.5))
    assert tuning.main([str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "| model.dropout" in line]
    assert [r.split(" | ")[0] for r in rows] == ["| model.dropout=0.3", "| model.dropout=0.1"]


def test_the_memory_column_names_the_primitive_cache_where_sessions_recorded_it(tmp_path, capsys):
    sessions = [
        {"host": {"threads": 1, "allocator": "system"}},  # before the record
        {"host": {"threads": 1, "allocator": "system", "primitive_cache": 0}},
        {"host": {"threads": 1, "allocator": "system", "primitive_cache": 128}},
    ]
    make_run(tmp_path, "a", ["train.lr=0.003"], summary(12.5, sessions=sessions))
    make_run(tmp_path, "b", ["train.lr=0.002"], summary(11.5, sessions=sessions[:1]))
    assert tuning.main([str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "| train.lr" in line]
    assert "| 3.0 (system, cache ?,0,128) |" in rows[0]
    assert "| 3.0 (system) |" in rows[1]
