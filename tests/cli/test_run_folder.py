"""rpr-nmt-train's run folders from Hydra's side (rpr_nmt.cli.run_folder): sweeps that would
collapse into one folder, folder names, and the refusals that come before Hydra writes."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict, read_write

from rpr_nmt.cli.config_store import CONFIG_DIR
from rpr_nmt.cli.run_folder import RefuseCollapsingSweep, collapsing_sweep_overrides
from tests.train.conftest import run_train, tiny_overrides


def multirun_config(command_line: list[str], composed: tuple[str, ...] = ()) -> DictConfig:
    """The config a multirun's callbacks get: `composed` (no sweeps) composed, and the command
    line as Hydra records it (with its sweep overrides, unparsed)."""
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        config = compose("train", overrides=list(composed), return_hydra_config=True)
    with read_write(config), open_dict(config):
        config.hydra.overrides.task = command_line
    return config


@pytest.mark.parametrize(
    "sweep",
    ["train.max_steps=10,20", "train.max_time_minutes=range(10,30,10)", "train.device=cpu,cuda"],
)
def test_a_sweep_over_a_key_left_out_of_the_folder_name_is_refused(sweep, capsys):
    # Probe D2: train.max_steps=10,20 trained both values in one folder, the second continuing.
    config = multirun_config(["train.seed=1,2", sweep])
    assert collapsing_sweep_overrides(config) == [sweep]
    with pytest.raises(SystemExit) as refused:
        RefuseCollapsingSweep().on_multirun_start(config)
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("rpr-nmt-train: error: ") and err.count("\n") == 1
    assert sweep in err and "hydra.sweep.dir" in err


def test_experiment_sweeps_and_single_values_are_not_refused():
    # where_positions sweeps positions and model.positions_in (both name folders); a single
    # train.max_steps on the command line of a sweep is no sweep of it.
    command_line = ["experiment=where_positions", "train.seed=1,2,3", "train.max_steps=1400"]
    config = multirun_config(command_line, ("experiment=where_positions",))
    assert "positions" in config.hydra.sweeper.params
    assert collapsing_sweep_overrides(config) == []
    RefuseCollapsingSweep().on_multirun_start(config)  # returns
    config = multirun_config(["experiment=ablate_k,ablate_terms", "hydra.sweep.dir=a,b"])
    assert collapsing_sweep_overrides(config) == []  # they place runs, in other folders


def test_the_refusal_comes_before_anything_trains(tmp_path):
    sweep, cache = tmp_path / "sweep", tmp_path / "cache"
    args = [o for o in tiny_overrides(tmp_path, cache, tmp_path / "unused") if "hydra." not in o]
    done = run_train(["-m", *args, "train.max_steps=1,2", f"hydra.sweep.dir={sweep}"], timeout=60)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.startswith("rpr-nmt-train: error: the sweep varies train.max_steps=1,2")
    assert "Traceback" not in done.stderr
    assert not sweep.exists() and not cache.exists()
