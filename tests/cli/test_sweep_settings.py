"""A sweep whose jobs a run would refuse is refused whole, before any job trains (probe F7)."""

from __future__ import annotations

import pytest

from rpr_nmt.cli.sweep_settings import RefuseInvalidSweep, job_problem, sweep_jobs
from tests.cli.test_run_folder import multirun_config
from tests.train.conftest import run_train, tiny_overrides


def test_the_jobs_are_listed_as_the_basic_sweeper_launches_them():
    config = multirun_config(["positions=absolute,none", "train.seed=1,2"])
    assert sweep_jobs(config) == [
        ["positions=absolute", "train.seed=1"],
        ["positions=absolute", "train.seed=2"],
        ["positions=none", "train.seed=1"],
        ["positions=none", "train.seed=2"],
    ]
    # An experiment's own sweep (hydra.sweeper.params) comes first, as the sweeper reads it.
    command_line = ["experiment=where_positions", "train.seed=1,2"]
    config = multirun_config(command_line, ("experiment=where_positions",))
    jobs = sweep_jobs(config)
    assert len(jobs) == 3 * 2 * 2
    assert jobs[0][:2] == ["positions=absolute", "model.positions_in=encoder"]


@pytest.mark.parametrize("order", ["absolute,none", "none,absolute"])
def test_a_job_a_run_would_refuse_refuses_the_sweep(order, capsys):
    # Probe F7: in the order absolute,none the sinusoid trained and the sweep then died at none;
    # in the other order it died first, leaving a run folder, and the sinusoid never trained.
    config = multirun_config([f"positions={order}", "model.positions_in=encoder"])
    with pytest.raises(SystemExit) as refused:
        RefuseInvalidSweep().on_multirun_start(config)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    number = order.split(",").index("none")
    assert err.startswith(f"rpr-nmt-train: error: job {number} of the sweep (positions=none): ")
    assert "model.positions_in=encoder places no position method" in err
    assert err.endswith("nothing trained: leave that value out of the sweep\n")


def test_a_sweep_of_shaws_terms_in_one_stack_is_refused_at_both_off(capsys):
    # experiment=ablate_terms in the encoder alone: its last job (neither a^K nor a^V) has, like
    # positions=none, no position method to place.
    command_line = ["experiment=ablate_terms", "model.positions_in=encoder"]
    config = multirun_config(command_line, ("experiment=ablate_terms",))
    with pytest.raises(SystemExit) as refused:
        RefuseInvalidSweep().on_multirun_start(config)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("rpr-nmt-train: error: job 3 of the sweep (model.relative_keys=")
    assert "model.positions_in=encoder places no position method" in err
    assert err.count("\n") == 1


def test_a_bpe_setting_sentencepiece_refuses_refuses_the_sweep(capsys):
    # Checked only at each job's BPE before: the 1.0 job trained, the 0.5 job then failed.
    config = multirun_config(["data.bpe_character_coverage=1.0,0.5"])
    with pytest.raises(SystemExit) as refused:
        RefuseInvalidSweep().on_multirun_start(config)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("rpr-nmt-train: error: job 1 of the sweep (data.bpe_character_coverage")
    assert "data.bpe_character_coverage=0.5 must be in [0.98, 1]" in err and err.count("\n") == 1


def test_sweeps_of_valid_settings_pass(capsys):
    for command_line, composed in [
        (["experiment=where_positions", "train.seed=1,2,3"], ("experiment=where_positions",)),
        (["positions=absolute,none,rope", "train.seed=1,2"], ()),
    ]:
        RefuseInvalidSweep().on_multirun_start(multirun_config(command_line, composed))
    assert capsys.readouterr().err == ""
    assert job_problem(["train.lr=nan"]) == "train.lr=nan must be a finite number"


def test_the_refusal_comes_before_any_folder_is_made(tmp_path):
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    args = [o for o in tiny_overrides(tmp_path, cache, tmp_path / "unused") if "hydra." not in o]
    command = ["-m", *args, "positions=none,absolute", "model.positions_in=decoder"]
    done = run_train([*command, f"hydra.sweep.dir={sweep}"], timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith("rpr-nmt-train: error: job 0 of the sweep (positions=none): ")
    assert "Traceback" not in done.stderr
    assert not sweep.exists() and not cache.exists()


def test_a_joblib_sweep_of_no_jobs_at_once_is_refused_in_one_line(capsys):
    # joblib raised "n_jobs == 0 in Parallel has no meaning" with a traceback, exit status 1.
    launcher = ("hydra/launcher=joblib_cpu", "hydra.launcher.n_jobs=0")
    config = multirun_config(["train.seed=1,2", *launcher], launcher)
    with pytest.raises(SystemExit) as refused:
        RefuseInvalidSweep().on_multirun_start(config)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("rpr-nmt-train: error: hydra.launcher.n_jobs=0") and err.count("\n") == 1
