"""scripts/bench_attention.py: each named form of the relative terms is the form that runs."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.model import attention_kernels
from rpr_nmt.model.attention import shaw_pairs

from ..conftest import load_script

bench = load_script("bench_attention")
CPU = torch.device("cpu")


def form_of_pairs(n: int) -> type:
    rows = shaw_pairs(n, n, 16, 0, causal=False, device=CPU).rows
    return type(rows)


@pytest.mark.parametrize(
    "suffix,form",
    [
        (" by gather", torch.Tensor),  # the (Tq, Tk) index of gather and scatter_add
        (" per diagonal", attention_kernels.Diagonals),
        (" by query", attention_kernels.ByQuery),
    ],
)
def test_a_named_form_runs_on_any_device_and_the_models_choice_comes_back(suffix, form):
    before = form_of_pairs(64)
    with bench.relative_form("aK+aV" + suffix):
        assert form_of_pairs(64) is form
        assert bench.form_the_model_takes(CPU, 64) == suffix.strip()
    assert form_of_pairs(64) is before
    assert bench.form_the_model_takes(CPU, 64) == "by gather"  # the CPU's, as published


def test_part_two_times_shaw_by_query_only_where_its_rows_fit():
    assert "shaw by query" in bench.by_form(bench.BY_QUERY_MAX_N)
    assert "shaw by query" not in bench.by_form(2 * bench.BY_QUERY_MAX_N)


@pytest.mark.parametrize("suffix,diagonals", [(" by gather", False), (" per diagonal", True)])
def test_part_three_builds_t5s_bias_in_the_form_it_names(suffix, diagonals):
    with bench.relative_form("t5" + suffix):
        assert attention_kernels.diagonals_apply(CPU, 64) is diagonals
    assert not attention_kernels.diagonals_apply(CPU, 64)
