"""The rpr-nmt-train commands that configs/train.yaml and the experiments' headers give as
examples compose into settings a run accepts: the files a reader opens first stay true."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from rpr_nmt.cli.config_store import CONFIG_DIR, to_job_config
from rpr_nmt.cli.sweep_settings import sweep_jobs, sweep_problem
from rpr_nmt.train.setup import check_job_settings
from tests.cli.test_run_folder import multirun_config

HEADERS = [
    Path(CONFIG_DIR) / "train.yaml",
    *sorted((Path(CONFIG_DIR) / "experiment").glob("*.yaml")),
]


def header_commands(path: Path) -> list[str]:
    """The `rpr-nmt-train ...` example lines of a config's comments, continuations joined and
    trailing comments dropped."""
    commands, lines = [], iter(path.read_text().splitlines())
    for line in lines:
        match = re.match(r"#\s+rpr-nmt-train(\s.*|)$", line)
        if not match or match.group(1).startswith(":"):
            continue
        command = match.group(1).split(" # ")[0].strip()
        while command.endswith("\\"):
            command = command[:-1] + next(lines).lstrip("#").split(" # ")[0].strip()
        commands.append(command)
    return commands


EXAMPLES = [(path.name, command) for path in HEADERS for command in header_commands(path)]


def test_the_first_files_give_examples():
    assert {name for name, _ in EXAMPLES} >= {"train.yaml", "where_positions.yaml"}
    assert "model.positions_in=encoder" in {c for name, c in EXAMPLES if name == "train.yaml"}


@pytest.mark.parametrize(("name", "command"), EXAMPLES)
def test_each_example_composes_into_settings_a_run_accepts(name, command):
    overrides = [o for o in command.split() if o != "-m"]
    # Every job of a sweep (its own values, and an experiment's hydra.sweeper.params), as the
    # sweep's own check before training lists and checks them (rpr_nmt.cli.sweep_settings).
    fixed = [o for o in overrides if "," not in o]
    jobs = sweep_jobs(multirun_config(overrides, tuple(fixed)))
    assert jobs
    assert sweep_problem(jobs) is None
    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):  # and the command as one run
        config = to_job_config(compose("train", overrides=[o.split(",")[0] for o in overrides]))
    check_job_settings(config)
