"""The launcher presets in configs/hydra/launcher/: they compose against their plugins' schemas, and
a sweep of two 1-update runs really goes through joblib and through submitit's local executor.

    joblib_cpu           runs side by side on one machine, torch threads divided between them
    submitit_local_cpu   each run a process started by submitit (also as 2 data-parallel tasks)
    submitit_slurm_gpu   each run a SLURM job (here only its sbatch script: no cluster in tests)
"""

from __future__ import annotations

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
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from rpr_nmt.cli.config_store import CONFIG_DIR
from tests.forkrun import run_module
from tests.train.conftest import REPO, make_corpus, tiny_overrides

PRESETS = {
    "joblib_cpu": "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
    "submitit_local_cpu": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.LocalLauncher",
    "submitit_slurm_gpu": "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher",
}


def hydra_node(*overrides: str):
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        return compose("train", overrides=list(overrides), return_hydra_config=True).hydra


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_compose_against_the_plugin_schemas(preset):
    assert Path(CONFIG_DIR, "hydra", "launcher", f"{preset}.yaml").is_file()
    hydra = hydra_node(f"hydra/launcher={preset}")
    assert hydra.launcher._target_ == PRESETS[preset]
    assert hydra.runtime.choices["hydra/launcher"] == preset
    with pytest.raises(ConfigCompositionException):  # typed: a misspelt field fails
        hydra_node(f"hydra/launcher={preset}", "hydra.launcher.n_jobz=2")


def test_joblib_preset_runs_two_jobs_at_once_and_joblib_divides_the_threads(monkeypatch):
    assert hydra_node("hydra/launcher=joblib_cpu").launcher.n_jobs == 2
    # What the preset relies on: loky starts each worker with cores // n_jobs threads when the
    # shell does not choose (torch reads OMP_NUM_THREADS at import, in the worker).
    from joblib import cpu_count
    from joblib._parallel_backends import LokyBackend

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = LokyBackend()._prepare_worker_env(n_jobs=2)
    assert env["OMP_NUM_THREADS"] == str(max(cpu_count() // 2, 1))


def test_slurm_preset_maps_slurm_tasks_onto_torchrun_variables(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    hydra = hydra_node("hydra/launcher=submitit_slurm_gpu", "hydra.launcher.tasks_per_node=4")
    env = OmegaConf.to_container(hydra.job.env_set, resolve=True)
    assert env == {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}
    setup = OmegaConf.to_container(hydra.launcher.setup, resolve=True)
    assert "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}" in setup  # left to the shell


def test_slurm_preset_gives_a_valid_sbatch_script(monkeypatch, tmp_path):
    """The preset's fields as hydra-submitit-launcher hands them to submitit (its launch())."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from submitit.slurm.slurm import SlurmExecutor

    monkeypatch.setattr(SlurmExecutor, "affinity", classmethod(lambda cls: 1))  # no srun here
    hydra = hydra_node("hydra/launcher=submitit_slurm_gpu", "hydra.launcher.partition=gpu")
    params = OmegaConf.to_container(hydra.launcher, resolve=True)
    params.pop("_target_")
    params.pop("submitit_folder")
    executor = submitit.AutoExecutor(
        cluster="slurm", folder=tmp_path, slurm_max_num_timeout=params.pop("max_num_timeout")
    )
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
    script = executor._executor._make_submission_file_text("python -u -m job", "uid")
    for line in (
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=1440",
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}",
    ):
        assert line in script


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run_sweep(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, Path]:
    """rpr-nmt-train -m with 1-update runs of the tiny model; returns the process and sweep dir."""
    corpus = make_corpus(tmp_path / "corpus", n_train=100)
    overrides = tiny_overrides(corpus, tmp_path / "cache", tmp_path / "unused")
    sweep = tmp_path / "sweep"
    args = [o for o in overrides if not o.startswith("hydra.run.dir")] + [
        "train.max_steps=1", "train.evaluate_at_end=false",
        f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=seed_${train.seed}", *extra,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_PORT": _free_port()}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "rpr_nmt.cli.train", "-m", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    return done, sweep


def start_sweep(tmp_path: Path, *extra: str, seeds: str = "1,2,3") -> tuple[subprocess.Popen, Path]:
    """rpr-nmt-train -m of endless tiny runs (one per seed), a checkpoint every update, in a
    process group of its own (as a terminal runs a command)."""
    corpus = make_corpus(tmp_path / "corpus", n_train=100)
    overrides = tiny_overrides(corpus, tmp_path / "cache", tmp_path / "unused")
    sweep = tmp_path / "sweep"
    args = [o for o in overrides if not o.startswith("hydra.run.dir")] + [
        "train.max_steps=100000", "train.save_every=1", f"train.seed={seeds}",
        f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=seed_${train.seed}", *extra,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    job = subprocess.Popen(
        [sys.executable, "-m", "rpr_nmt.cli.train", "-m", *args], cwd=REPO, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    return job, sweep


def wait_for_checkpoints(job: subprocess.Popen, sweep: Path, seeds: list[int]) -> None:
    """Until each seed's run has saved a checkpoint (training under way, handlers installed)."""
    paths = [sweep / f"seed_{seed}" / "checkpoints" / "last.pt" for seed in seeds]
    for _ in range(900):
        if all(p.exists() for p in paths) or job.poll() is not None:
            break
        time.sleep(0.2)
    assert all(p.exists() for p in paths), "the runs saved no checkpoint"


def stopped(job: subprocess.Popen) -> str:
    try:
        _, stderr = job.communicate(timeout=180)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    return stderr


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("ctrl-c to the group", marks=pytest.mark.slow),  # make test: SIGTERM alone
        "sigterm to the launcher",
    ],
)
def test_a_stopped_joblib_sweep_saves_its_running_runs_and_starts_no_more(tmp_path, how):
    # Two runs side by side, a third queued: Ctrl-C reaches every process of the command; SIGTERM
    # to the launching process alone reaches the runs through the sweep's stop file.
    job, sweep = start_sweep(tmp_path, "hydra/launcher=joblib_cpu")
    wait_for_checkpoints(job, sweep, [1, 2])
    if how == "ctrl-c to the group":
        os.killpg(job.pid, signal.SIGINT)
    else:
        job.send_signal(signal.SIGTERM)
    stderr = stopped(job)
    assert job.returncode == 130, stderr[-3000:]
    assert "sweep stopped, its runs saved" in stderr
    found = summaries(sweep)
    assert sorted(found) == ["seed_1", "seed_2"], stderr[-3000:]
    assert all(s["stopped_by"] == "signal" for s in found.values())
    for seed in ("seed_1", "seed_2"):  # the checkpoint holds the update the summary names
        state = torch.load(sweep / seed / "checkpoints" / "last.pt", weights_only=True)
        assert state["step"] == found[seed]["steps"]
    assert not (sweep / "seed_3" / "checkpoints").exists()  # the queued run never trained
    assert not list(sweep.glob(".stop*"))  # rerunning the command resumes


def test_a_stop_signal_ends_a_sweep_of_the_basic_launcher(tmp_path):
    # The basic launcher runs the jobs one after another in the launching process.
    job, sweep = start_sweep(tmp_path)
    wait_for_checkpoints(job, sweep, [1])
    job.send_signal(signal.SIGTERM)
    stderr = stopped(job)
    assert job.returncode == 130, stderr[-2000:]
    assert summaries(sweep)["seed_1"]["stopped_by"] == "signal"
    assert not (sweep / "seed_2" / "checkpoints").exists()


@pytest.mark.slow  # 13 s of make test; the stop file alone is tested by the joblib sweep above
def test_two_commands_sharing_a_sweep_folder_stop_apart(tmp_path):
    # Two lanes of one sweep: stopping the first must stop neither the second nor let the first's
    # queued run start (each command has its own stop file, so neither can remove the other's).
    first, sweep = start_sweep(tmp_path, seeds="1,2")
    wait_for_checkpoints(first, sweep, [1])
    second, _ = start_sweep(tmp_path, seeds="3,4")
    wait_for_checkpoints(second, sweep, [3])
    first.send_signal(signal.SIGTERM)
    stderr = stopped(first)
    assert first.returncode == 130, stderr[-2000:]
    assert not (sweep / "seed_2" / "checkpoints").exists()
    time.sleep(3)  # the second's run would see a shared stop file within an update
    assert second.poll() is None, "stopping one command stopped the other"
    second.send_signal(signal.SIGTERM)
    stderr = stopped(second)
    assert second.returncode == 130, stderr[-2000:]
    found = summaries(sweep)
    assert sorted(found) == ["seed_1", "seed_3"], stderr[-2000:]
    assert not (sweep / "seed_4" / "checkpoints").exists()
    assert not list(sweep.glob(".stop*"))


def summaries(sweep: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sweep.glob("*/train_summary.json")}


@pytest.mark.slow  # make test starts joblib sweeps in the stop and failure tests
@pytest.mark.parametrize("preset", ["joblib_cpu", "submitit_local_cpu"])
def test_a_sweep_of_two_runs_goes_through_the_launcher(tmp_path, preset):
    done, sweep = run_sweep(tmp_path, f"hydra/launcher={preset}", "train.seed=1,2")
    assert done.returncode == 0, done.stderr[-3000:]
    found = summaries(sweep)
    assert sorted(found) == ["seed_1", "seed_2"]
    assert all(s["steps"] == 1 and s["world_size"] == 1 for s in found.values())
    assert found["seed_1"]["final_train_loss"] != found["seed_2"]["final_train_loss"]
    for seed in (1, 2):  # each job wrote its own record (rpr_nmt.cli.run_folder)
        overrides = (sweep / f"seed_{seed}" / ".hydra" / "overrides.yaml").read_text()
        assert f"train.seed={seed}" in overrides
    if preset == "submitit_local_cpu":  # the runs went through submitit's executor
        assert list((sweep / ".submitit").glob("*/*_result.pkl"))


@pytest.mark.slow  # torchrun's two ranks train data-parallel in make test (test_distributed.py)
def test_a_submitit_run_of_two_tasks_trains_data_parallel(tmp_path):
    # Like a torchrun of 2 processes: submitit's task ids become RANK / WORLD_SIZE (env_set).
    preset = ["hydra/launcher=submitit_local_cpu", "hydra.launcher.tasks_per_node=2"]
    done, sweep = run_sweep(tmp_path, *preset, "train.seed=1")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = summaries(sweep)["seed_1"]
    assert summary["steps"] == 1 and summary["world_size"] == 2


@pytest.mark.parametrize(
    "preset", ["basic", "joblib_cpu", pytest.param("submitit_local_cpu", marks=pytest.mark.slow)]
)
def test_a_run_that_fails_in_a_sweep_leaves_the_others_training(tmp_path, preset):
    # The first run keeps no pair (2 tokens a sentence at most) and is refused after its data is
    # prepared. It ended the sweep: the basic launcher never started the second run, and joblib
    # killed it mid-update. Now the second trains to its end and the command fails at the end.
    corpus = make_corpus(tmp_path / "corpus", n_train=100)
    overrides = tiny_overrides(corpus, tmp_path / "cache", tmp_path / "unused")
    sweep = tmp_path / "sweep"
    args = [o for o in overrides if not o.startswith("hydra.run.dir")] + [
        "train.max_steps=12", "train.evaluate_at_end=false", "data.max_tokens_per_sentence=2,64",
        f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=len_${data.max_tokens_per_sentence}",
    ]  # fmt: skip
    if preset != "basic":
        args.append(f"hydra/launcher={preset}")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if preset == "basic":  # in-process: forked from the test server (joblib's workers hang there)
        done = run_module("rpr_nmt.cli.train", ["-m", *args], cwd=REPO, env=env, timeout=300)
    else:
        done = subprocess.run([sys.executable, "-m", "rpr_nmt.cli.train", "-m", *args], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stderr[-3000:]
    found = summaries(sweep)
    assert sorted(found) == ["len_64"], done.stderr[-3000:]
    assert found["len_64"]["steps"] == 12 and found["len_64"]["stopped_by"] == "max_steps"
    assert "1 run of the sweep failed" in done.stderr
    assert f"{sweep / 'len_2'}: error: " in done.stderr, done.stderr[-3000:]
    assert not list(sweep.glob(".failed-*"))
