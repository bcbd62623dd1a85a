"""Two CPU processes with gloo and DistributedDataParallel give the same update as one process
with update_freq 2 on the same batches."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rpr_nmt.train import train_step
from rpr_nmt.train.distributed import DistributedContext

from .conftest import REPO, tiny_overrides, train_curve
from .helpers import PAD, random_batch, tiny_model

WORKER = Path(__file__).resolve().parent / "ddp_worker.py"
UPDATES = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_env(tmp_path: Path) -> dict[str, str]:
    """One thread per rank, and torchrun's temporary folders (torchelastic_*, one per launch, never
    removed) under the test's own tmp_path rather than left in the system's /tmp."""
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(scratch)}


def two_gloo_ranks_against_one_process(tmp_path: Path, scope: str | None, rtol: float) -> None:
    out = tmp_path / "ddp.pt"
    port = str(_free_port())
    procs = []
    for rank in range(2):
        env = {
            **os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "OMP_NUM_THREADS": "1",
        }  # fmt: skip
        command = [sys.executable, str(WORKER), str(out), *([scope] if scope else [])]
        procs.append(subprocess.Popen(command, env=env))
    codes = [p.wait(timeout=600) for p in procs]
    assert codes == [0, 0]
    ddp = torch.load(out, weights_only=True)

    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for u in range(UPDATES):
        batches = [random_batch(2 * u + rank, n=2 + rank) for rank in range(2)]
        result = train_step(
            model, optimizer, batches, ctx=DistributedContext(), autocast=contextlib.nullcontext,
            scaler=None, pad_id=PAD, label_smoothing=0.1, clip_norm=1.0,
        )  # fmt: skip
        losses.append(result.loss)
    got, want = torch.tensor(ddp["losses"]), torch.tensor(losses)
    torch.testing.assert_close(got, want, rtol=rtol, atol=1e-5)
    for name, value in model.state_dict().items():
        torch.testing.assert_close(ddp["model"][name], value, rtol=1e-5, atol=1e-6, msg=name)


def test_two_gloo_ranks_equal_one_process_with_update_freq_2(tmp_path):
    two_gloo_ranks_against_one_process(tmp_path, scope=None, rtol=1.3e-6)
    # SGD rather than Adam: Adam's eps = 1e-9 turns float noise in exactly-zero gradients (the key
    # projection's bias cannot change the softmax) into full-size steps.
    # The batches differ in size, so a plain mean of per-rank means would not have matched.
    assert random_batch(0, n=2).n_tgt_tokens != random_batch(1, n=3).n_tgt_tokens


@pytest.mark.slow
def test_two_gloo_ranks_with_compiled_layers_equal_one_eager_process(tmp_path):
    """DistributedDataParallel around the twin with compiled layers (train.compile=true, scope
    layers): the ranks' gradients still meet, and the weights follow one eager process."""
    two_gloo_ranks_against_one_process(tmp_path, scope="layers", rtol=1e-5)


@pytest.mark.slow  # 21 s of make test; one process stopped and resumed: tests/train/test_cli.py
def test_sigterm_to_torchrun_stops_every_rank_at_one_update_and_resumes_exactly(
    corpus, cache_dir, tmp_path
):
    """SIGTERM to torchrun (two gloo ranks): one checkpoint at the update both ranks agreed on, and
    the rerun continues to the losses of an uninterrupted run, validating (loss on every rank,
    BLEU on rank 0) at its last update as the uninterrupted run does."""
    torchrun = Path(sys.executable).with_name("torchrun")
    env = torchrun_env(tmp_path)

    def command(run_dir: Path, steps: int, valid_every: int = 1000) -> list[str]:
        args = tiny_overrides(corpus, cache_dir, run_dir, "train.valid_bleu_sentences=4")
        args += ["train.evaluate_at_end=false", f"train.valid_every={valid_every}",
                 "train.save_every=1000"]  # fmt: skip
        port = ["--master_port", str(_free_port())]
        return [str(torchrun), "--nproc_per_node", "2", *port, "-m", "rpr_nmt.cli.train", *args,
                f"train.max_steps={steps}"]  # fmt: skip

    stopped = tmp_path / "stopped"
    proc = subprocess.Popen(
        command(stopped, 100000), cwd=REPO, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    metrics = stopped / "metrics.jsonl"
    deadline = time.monotonic() + 240  # waits for training to be under way; asserts nothing on time
    while time.monotonic() < deadline and proc.poll() is None:
        if metrics.exists() and metrics.read_text().count('"kind": "train"') >= 2:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    summary = json.loads((stopped / "train_summary.json").read_text())
    assert summary["stopped_by"] == "signal", err[-3000:]
    stop_step = summary["steps"]
    state = torch.load(stopped / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == stop_step and len(state["rng_per_rank"]) == 2
    assert [p.name for p in (stopped / "checkpoints").glob("step_*.pt")] == [
        f"step_{stop_step:07d}.pt"
    ]  # one checkpoint: both ranks stopped at the same update

    end = stop_step + 3
    for run_dir in (stopped, tmp_path / "straight"):
        done = subprocess.run(command(run_dir, end, valid_every=end), cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]

    assert train_curve(stopped) == train_curve(tmp_path / "straight")
    summary = json.loads((stopped / "train_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["steps"] == end
    assert summary["session_steps"] == 3 and summary["stopped_by"] == "max_steps"
    assert summary["best_valid_bleu"] is not None  # rank 0 decoded, and only it wrote the run
    state = torch.load(stopped / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == end and len(state["rng_per_rank"]) == 2


def test_bad_data_under_torchrun_is_one_line_without_a_traceback_from_the_other_rank(tmp_path):
    """A DataError while rank 0 prepares the data: rank 0 prints the one line, and rank 1, waiting
    for the data, ends quietly instead of with a gloo traceback of the lost peer; torchrun fails.
    (torchrun may still stop rank 1 with SIGTERM once rank 0 failed: its summary says so.)"""
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "train.en").write_text("a b\nc d\n", encoding="utf-8")
    (root / "train.de").write_text("a b\n", encoding="utf-8")
    for lang in ("en", "de"):
        (root / f"valid.{lang}").write_text("a b\n", encoding="utf-8")
    torchrun = Path(sys.executable).with_name("torchrun")
    args = tiny_overrides(root, tmp_path / "cache", tmp_path / "run", "train.max_steps=2")
    command = [str(torchrun), "--nproc_per_node", "2", "--master_port", str(_free_port()),
               "-m", "rpr_nmt.cli.train", *args]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=torchrun_env(tmp_path), capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("rpr-nmt-train:")]
    assert len(errors) == 1 and "is not line-aligned" in errors[0], done.stderr[-3000:]
    assert "Error executing job" not in done.stderr, done.stderr[-3000:]  # an uncaught exception
    assert "Connection closed by peer" not in done.stderr
    assert done.returncode != 0


def test_torchrun_of_one_process_joins_a_group_and_trains_as_a_plain_run(
    corpus, cache_dir, tmp_path
):
    """One rank under torchrun goes through the process group (gloo here, nccl on a GPU) and
    DistributedDataParallel, and its updates are a plain run's; a plain run joins none."""
    torchrun = Path(sys.executable).with_name("torchrun")
    env = torchrun_env(tmp_path)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    summaries = {}
    for how, launcher in (
        ("torchrun", [str(torchrun), "--nproc_per_node", "1", "--master_port", str(_free_port())]),
        ("plain", [sys.executable]),
    ):
        args = tiny_overrides(corpus, cache_dir, tmp_path / how, "train.valid_bleu=false")
        args += ["train.evaluate_at_end=false", "train.max_steps=3", "train.device=cpu"]
        cmd = [*launcher, "-m", "rpr_nmt.cli.train", *args]
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        summaries[how] = json.loads((tmp_path / how / "train_summary.json").read_text())
    assert summaries["torchrun"]["process_group"] == "gloo"
    assert summaries["plain"]["process_group"] is None
    assert summaries["torchrun"]["world_size"] == summaries["plain"]["world_size"] == 1
    assert summaries["torchrun"]["final_train_loss"] == pytest.approx(
        summaries["plain"]["final_train_loss"], rel=1e-6
    )


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ("train.lr=-1", "train.lr=-1.0 must be above 0"),
        pytest.param("data.test_split=nosuch", "nosuch", marks=pytest.mark.slow),
    ],
)
def test_an_error_every_rank_meets_is_printed_once_under_torchrun(
    corpus, cache_dir, tmp_path, setting, said
):
    """A refused setting, or a missing test split (which rank 0 alone evaluates), printed the
    same error line once per rank; rank 0 prints it and the other rank ends quietly."""
    torchrun = Path(sys.executable).with_name("torchrun")
    args = tiny_overrides(corpus, cache_dir, tmp_path / "run", "train.max_steps=2", setting)
    command = [str(torchrun), "--nproc_per_node", "2", "--master_port", str(_free_port()),
               "-m", "rpr_nmt.cli.train", *args]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=torchrun_env(tmp_path), capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("rpr-nmt-train:")]
    assert len(errors) == 1 and said in errors[0], done.stderr[-3000:]
    assert "Error executing job" not in done.stderr, done.stderr[-3000:]
    assert done.returncode != 0
