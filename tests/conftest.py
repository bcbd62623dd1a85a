"""Shared fixtures: the real corpora's root, and deterministic, single-threaded torch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent


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
