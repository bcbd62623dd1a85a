"""train.compile=true on a CPU without a C++ compiler: one line before any data is prepared."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.train import train
from rpr_nmt.train.compiler import check_compiler
from rpr_nmt.train.errors import SettingsError

from .conftest import compose_config


@pytest.fixture
def no_compiler():
    """Inductor's compiler search pointed at a program that does not exist."""
    from torch._inductor import config
    from torch._inductor.cpp_builder import cpp_compiler_search

    cpp_compiler_search.cache_clear()
    with config.patch({"cpp.cxx": (None, "no-such-c++-compiler")}):
        yield
    cpp_compiler_search.cache_clear()


def test_a_missing_compiler_is_one_line_before_the_data(no_compiler, corpus, tmp_path):
    cache = tmp_path / "cache"
    cfg = compose_config(corpus, cache, "train.compile=true", "train.max_steps=1")
    with pytest.raises(SettingsError) as error:
        train(cfg, tmp_path / "run")
    text = str(error.value)
    assert "\n" not in text and "no-such-c++-compiler" in text
    assert text.endswith("install one, e.g. g++, or set train.compile=false")
    assert not cache.exists() or not any(cache.rglob("*.model"))  # no BPE model trained


def test_the_check_asks_only_where_it_matters(no_compiler):
    check_compiler(False, torch.device("cpu"))  # compile off: nothing to build
    check_compiler(True, torch.device("cuda"))  # Triton, not a C++ compiler
    with pytest.raises(SettingsError):
        check_compiler(True, torch.device("cpu"))
