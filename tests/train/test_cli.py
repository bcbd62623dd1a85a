"""rpr-nmt-train end to end on a tiny corpus: run-dir artifacts, checkpoints, errors, and
rpr-nmt-average. (Stopping on SIGTERM is tested in-process in test_trainer.py; here only Ctrl-C
followed by SIGTERM, which must still save.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rpr_nmt.checkpoint import load_checkpoint
from rpr_nmt.cli import average

from .conftest import REPO, run_train, tiny_overrides

STEPS = 8
SUMMARY_KEYS = {
    "steps", "final_train_loss", "best_valid_loss", "best_valid_bleu", "train_tokens_per_sec",
    "wall_seconds", "peak_memory_mb", "last_checkpoint", "best_checkpoint", "valid_bleu",
    "test_bleu", "test_chrf",
}  # fmt: skip
CHECKPOINT_KEYS = {
    "model", "config", "bpe_model", "bpe_sha256", "step", "optimizer", "scheduler", "scaler",
    "data_state", "rng", "best",
}  # fmt: skip


@pytest.fixture(scope="module")
def run(corpus, cache_dir, tmp_path_factory) -> Path:
    """One short CLI run with validation BLEU, averaging and the final evaluation."""
    run_dir = tmp_path_factory.mktemp("run") / "run"
    args = tiny_overrides(corpus, cache_dir, run_dir, f"train.max_steps={STEPS}")
    done = run_train([*args, "train.average_last=2", "train.keep_last=1"])
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


def test_run_dir_holds_every_artifact(run):
    assert (run / ".hydra" / "config.yaml").is_file()
    assert "step 8 | valid" in (run / "train.log").read_text()
    events = list((run / "tb").glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    names = {p.name for p in (run / "checkpoints").iterdir()}
    # keep_last 1, but average_last 2 keeps two step checkpoints
    assert names == {"step_0000004.pt", "step_0000008.pt", "last.pt", "best.pt", "averaged.pt"}
    for name in ("hyp_valid.txt", "hyp_test.txt"):
        assert len((run / name).read_text().splitlines()) == 16
    summary = json.loads((run / "train_summary.json").read_text())
    assert SUMMARY_KEYS <= set(summary)
    assert summary["steps"] == STEPS and summary["stopped_by"] == "max_steps"
    assert summary["evaluated_checkpoint"].endswith("averaged.pt")
    assert summary["train_tokens_per_sec"] > 0 and summary["peak_memory_mb"] > 0


def test_loss_decreases(run):
    train = [r for r in map(json.loads, (run / "metrics.jsonl").open()) if r["kind"] == "train"]
    assert [r["step"] for r in train] == list(range(1, STEPS + 1))
    first, last = train[0]["loss"], train[-1]["loss"]
    assert last < first - 0.5, (first, last)
    summary = json.loads((run / "train_summary.json").read_text())
    assert summary["final_train_loss"] == pytest.approx(last)


def test_checkpoints_load_with_weights_only_and_leave_no_temporaries(run):
    folder = run / "checkpoints"
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")]
    state = torch.load(folder / "last.pt", weights_only=True)
    assert CHECKPOINT_KEYS <= set(state)
    assert state["step"] == STEPS and state["config"]["train"]["max_steps"] == STEPS
    assert isinstance(state["bpe_model"], bytes) and state["data_state"]["position"] >= 0
    assert load_checkpoint(folder / "best.pt").step in (4, 8)


def test_average_cli(run, tmp_path, capsys):
    out = tmp_path / "avg.pt"
    assert average.main([str(run), "--last", "2", "-o", str(out)]) == 0
    averaged = load_checkpoint(out).model
    a, b = (load_checkpoint(run / "checkpoints" / f"step_000000{s}.pt").model for s in (4, 8))
    for name, value in averaged.items():
        if value.is_floating_point():
            torch.testing.assert_close(value, (a[name] + b[name]) / 2)
    assert average.main([str(tmp_path / "missing"), "--last", "2", "-o", str(out)]) == 2
    assert "error:" in capsys.readouterr().err


def test_mistyped_override_fails_at_composition(tmp_path):
    done = run_train(["train.max_step=5", f"hydra.run.dir={tmp_path}/run"], timeout=60)
    assert done.returncode != 0
    assert "max_step" in done.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_bad_data_is_one_line_and_exit_2(cache_dir, tmp_path):
    args = tiny_overrides(tmp_path / "nowhere", cache_dir, tmp_path / "run")
    done = run_train(args, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("rpr-nmt-train: error:") and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "bad",
    ["decode.max_sentences=0", "decode.precision=fp16", "train.valid_bleu_sentences=0",
     "decode.beam_size=0", "decode.nbest=5", "train.max_time_minutes=0"],
)  # fmt: skip
def test_a_setting_used_only_later_fails_before_the_data_is_prepared(corpus, tmp_path, bad):
    # Each of these used to train and then fail at the first validation or the final evaluation.
    cache = tmp_path / "cache"
    args = tiny_overrides(corpus, cache, tmp_path / "run", "train.max_steps=20", bad)
    done = run_train([*args, "train.valid_every=10", "train.save_every=10"], timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("rpr-nmt-train: error:") and "Traceback" not in done.stderr
    assert bad.split("=")[0] in done.stderr
    assert not cache.exists()  # nothing prepared


def test_a_refused_rerun_leaves_the_runs_record_as_it_was(corpus, cache_dir, tmp_path):
    # Probe S1: a rerun refused for another model config (or a refused setting) still rewrote
    # .hydra/, and rpr-nmt-report then labelled the run with the refused settings.
    run_dir = tmp_path / "sweep" / "one"
    args = tiny_overrides(corpus, cache_dir, run_dir, "train.evaluate_at_end=false")
    done = run_train([*args, "train.max_steps=1", "train.arithmetic=1"])
    assert done.returncode == 0, done.stderr[-3000:]
    record = {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()}
    assert set(record) == {"config.yaml", "hydra.yaml", "overrides.yaml"}
    sessions = (run_dir / "sessions.jsonl").read_bytes()
    sweep = ["-m", *(o for o in args if "hydra." not in o)]
    sweep += [f"hydra.sweep.dir={run_dir.parent}", "hydra.sweep.subdir=one"]
    # It trained in arithmetic 1 (fp32 or bf16 as train.precision=auto resolves); the reruns give
    # the presets' train.arithmetic=null, which resumes it in 1.
    arithmetic_2 = ("train.precision=bf16", "train.arithmetic=2")
    for refused, why in [
        ([*args, "train.max_steps=2", "model.max_relative_position=2"], "another model config"),
        ([*args, "train.max_steps=2", "positions=rope", "model.rope_dims=3"], "rope_dims=3"),
        ([*sweep, "train.max_steps=2", "model.max_relative_position=2"], "another model config"),
        ([*args, "train.max_steps=2", *arithmetic_2], "last.pt trained in arithmetic 1 so far"),
    ]:
        done = run_train(refused)
        assert done.returncode == 2, done.stderr[-3000:]
        assert why in done.stderr and "Traceback" not in done.stderr
        # One line; a sweep names its failed run again at its end (two lines more).
        assert done.stderr.count("\n") == (3 if refused[0] == "-m" else 1), done.stderr
        assert {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()} == record
        assert (run_dir / "sessions.jsonl").read_bytes() == sessions  # no session began
    done = run_train([*args, "train.max_steps=2"])  # a rerun that trains: its record
    assert done.returncode == 0, done.stderr[-3000:]
    assert "train.max_steps=2" in (run_dir / ".hydra" / "overrides.yaml").read_text()
    fresh = tmp_path / "fresh"  # refused before it trained: no record of settings never trained
    bad = ("positions=rope", "model.rope_dims=3")
    done = run_train(tiny_overrides(corpus, cache_dir, fresh, *bad))
    assert done.returncode == 2 and not (fresh / ".hydra").exists()
    assert not fresh.exists()  # nor a folder of its lock and an empty log (probe F7)


def test_sigterm_after_ctrl_c_still_saves_the_last_update(corpus, cache_dir, tmp_path):
    """Ctrl-C, then SIGTERM (a time limit, docker stop, SLURM preemption) before the update ends:
    the run finishes the update, saves it and exits 130, instead of dying with nothing saved."""
    run_dir = tmp_path / "run"
    quiet = ("train.valid_bleu=false", "train.evaluate_at_end=false", "train.save_every=100000")
    args = tiny_overrides(corpus, cache_dir, run_dir, "train.max_steps=100000", *quiet)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    job = subprocess.Popen(
        [sys.executable, "-m", "rpr_nmt.cli.train", *args], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        metrics = run_dir / "metrics.jsonl"
        for _ in range(900):  # until training is under way (the handlers are installed)
            if metrics.exists() and metrics.read_text().count('"kind": "train"') >= 2:
                break
            if job.poll() is not None:
                break
            time.sleep(0.2)
        job.send_signal(signal.SIGINT)
        job.send_signal(signal.SIGTERM)
        _, stderr = job.communicate(timeout=180)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 130, stderr[-3000:]
    summary = json.loads((run_dir / "train_summary.json").read_text())
    assert summary["stopped_by"] == "signal"
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt").step == summary["steps"] > 0
