"""Every experiment file in configs/experiment/ composes and trains one update.

Each runs in-process on the tiny corpus with transformer_tiny; a sweep contributes its first value
of every swept key, as the first job of its multirun would.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.train import train
from tests.conftest import compose_command

from .conftest import tiny_overrides

EXPERIMENTS = sorted(p.stem for p in (Path(CONFIG_DIR) / "experiment").glob("*.yaml"))


def first_sweep_values(name: str) -> list[str]:
    """`key=first value` for each key the experiment sweeps over."""
    text = (Path(CONFIG_DIR) / "experiment" / f"{name}.yaml").read_text()
    params = ((yaml.safe_load(text) or {}).get("hydra") or {}).get("sweeper", {}).get("params", {})
    return [f"{key}={str(value).split(',')[0].strip()}" for key, value in params.items()]


@pytest.mark.skipif(not EXPERIMENTS, reason="configs/experiment/ holds no experiments")
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_trains_one_step(experiment, corpus, cache_dir, tmp_path):
    overrides = [o for o in tiny_overrides(corpus, cache_dir, tmp_path) if "hydra." not in o]
    overrides += [
        f"experiment={experiment}", *first_sweep_values(experiment), "train.max_steps=1",
        "train.max_tokens=400", "train.update_freq=1", "train.valid_bleu_sentences=4",
        "train.evaluate_at_end=false", "train.device=cpu",
    ]  # fmt: skip
    cfg = compose_command(overrides)
    summary = train(to_job_config(cfg), tmp_path / "run")
    assert summary["steps"] == 1
    assert summary["final_train_loss"] > 0
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()
