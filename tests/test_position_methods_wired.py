"""Every position method the model knows reaches the rest of the pipeline.

A method is added in its own module under rpr_nmt/model/positions/ and named in setting.py's
ABSOLUTE_METHODS or RELATIVE_METHODS; docs/architecture.md ("Adding a position method") lists the
places a study needs it besides. These tests name the place a new method was left out of: a
positions= preset, the position study's sweep, the reports' names and their row order.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from rpr_nmt.cli.config_store import CONFIG_DIR
from rpr_nmt.config import position_methods
from rpr_nmt.model.positions import ABSOLUTE_METHODS, RELATIVE_METHODS
from rpr_nmt.report.labels import METHOD_NAMES
from rpr_nmt.report.sweep import LATER_METHODS
from tests.conftest import compose_command

# The paper's own methods: Shaw's tables and the sinusoid; the reports name and order them apart.
PAPERS = ("shaw", "sinusoid")
METHODS = sorted({*ABSOLUTE_METHODS, *RELATIVE_METHODS} - {"none"})
STUDY = Path(CONFIG_DIR) / "experiment" / "compare_positions.yaml"


def study_presets() -> list[str]:
    """The positions= presets the position study sweeps (configs/experiment/compare_positions)."""
    experiment = yaml.safe_load(STUDY.read_text())
    return experiment["hydra"]["sweeper"]["params"]["positions"].split(",")


def methods_of_preset(preset: str) -> tuple[str, str]:
    """(absolute, relative) of configs/positions/<preset>.yaml over the default model."""
    cfg = compose_command([f"positions={preset}"])
    return position_methods(OmegaConf.to_container(cfg.model))


@pytest.fixture(scope="module")
def study() -> dict[str, tuple[str, str]]:
    return {preset: methods_of_preset(preset) for preset in study_presets()}


@pytest.mark.parametrize("method", METHODS)
def test_the_position_study_trains_each_method_alone(method, study):
    alone = [p for p, methods in study.items() if method in methods and "none" in methods]
    assert alone, (
        f"no preset of experiment=compare_positions ({', '.join(study)}) trains {method} alone: "
        f"add configs/positions/{method}.yaml and name it in the sweep's positions list"
    )


def test_the_position_study_trains_a_model_without_positions(study):
    assert ("none", "none") in study.values(), "compare_positions needs positions=none"


@pytest.mark.parametrize("method", [m for m in METHODS if m not in PAPERS])
def test_reports_name_each_later_method_and_place_its_rows(method):
    assert method in METHOD_NAMES, (
        f"rpr_nmt/report/labels.py METHOD_NAMES: how a reader names {method}"
    )
    assert method in LATER_METHODS, (
        f"rpr_nmt/report/sweep.py LATER_METHODS: where {method}'s rows go after the paper's"
    )
