"""Shared fixtures: the real corpora's root, and deterministic, single-threaded torch; loading a
script of scripts/ as a module; a command's environment, and its config composed as Hydra does."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent

if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest -n N: N workers, one core each
    torch.set_num_threads(1)


def pytest_terminal_summary(terminalreporter) -> None:
    """The host class under the run's time: a make test time means little without it (README
    gives the time per class)."""
    from rpr_nmt.precision import bf16_support

    support = bf16_support(torch.device("cpu"))
    kind = "native bf16" if support.native else "no native bf16"
    terminalreporter.write_line(
        f"host: {torch.backends.cpu.get_cpu_capability()} CPU, {kind} ({support.reason}), "
        f"{os.cpu_count()} cores"
    )


def load_script(name: str) -> ModuleType:
    """scripts/<name>.py imported as the module <name> (scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def command_env(**extra: str) -> dict[str, str]:
    """This environment, with the repository importable by a command's process, and `extra`."""
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def compose_command(overrides: Sequence[str] = (), command: str = "train", hydra: bool = False):
    """The DictConfig rpr-nmt-<command> composes from configs/ with `overrides`; `hydra` keeps the
    hydra node (run folder, callbacks, sweep settings)."""
    from hydra import compose, initialize_config_dir

    from rpr_nmt.cli.config_store import CONFIG_DIR

    with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
        return compose(command, overrides=list(overrides), return_hydra_config=hydra)


def _shared_data_root() -> Path | None:
    for candidate in (os.environ.get("RPR_NMT_DATA"), REPO.parent / "shared" / "data"):
        if candidate and (Path(candidate) / "multi30k").is_dir():
            return Path(candidate)
    return None


@pytest.fixture
def shared_data() -> Path:
    """Parent folder of the real corpora (multi30k/, wmt14_ende/, ...), or skip with the reason."""
    root = _shared_data_root()
    if root is None:
        pytest.skip("real corpora not found: set RPR_NMT_DATA to the folder holding multi30k/")
    return root


@pytest.fixture(autouse=True)
def _deterministic_torch():
    torch.manual_seed(0)
    yield
