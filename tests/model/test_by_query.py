"""Shaw's terms as the paper computes them (attention_kernels.ByQuery: the rows w[r_ij] gathered
per pair, each term a matmul batched over the queries) against gather and scatter_add: the same
values to rounding, forward and backward, in attention, a whole model, cached decoding and
compiled layers. Run on the CPU by adding it to BY_QUERY_DEVICES."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.model import attention_kernels, relative_attention
from rpr_nmt.model.attention import shaw_pairs
from rpr_nmt.model.attention_kernels import ByQuery, Diagonals, PairRows

from .test_diagonals import SHAPES, attention_in_forms, model_runs

B, H, DH = 2, 3, 4
CPU = torch.device("cpu")


def gather_then_by_query(monkeypatch: pytest.MonkeyPatch):
    """Gather (the CPU's form), then the paper's form on the CPU."""
    for devices in [("cuda",), ("cuda", "cpu")]:
        monkeypatch.setattr(attention_kernels, "BY_QUERY_DEVICES", devices)
        yield


def test_the_form_follows_the_device_and_diagonals_keep_long_sequences(monkeypatch):
    def form(n: int) -> type:
        return type(shaw_pairs(n, n, 4, 0, causal=False, device=CPU).of_batch(B, H))

    assert form(9) is PairRows  # BY_QUERY_DEVICES names no device yet
    monkeypatch.setattr(attention_kernels, "BY_QUERY_DEVICES", ("cpu",))
    assert form(9) is ByQuery
    monkeypatch.setattr(attention_kernels, "DIAGONAL_DEVICES", ("cpu",))
    monkeypatch.setattr(attention_kernels, "DIAGONALS_ABOVE", 8)
    assert form(9) is Diagonals and form(8) is ByQuery


def test_rows_of_pairs_are_the_table_rows_r_ij():
    index = torch.tensor([[1, 2, 2], [0, 1, 2]])  # r_ij of 2 queries and 3 keys, k = 1
    table = torch.randn(H, 3, DH)
    rows = ByQuery(index).rows_of_pairs(table)  # (H, Tq, Tk, Dh)
    for i in range(2):
        for j in range(3):
            assert rows[:, i, j].equal(table[:, index[i, j]])
    assert ByQuery(index).rows_of_pairs(table[0]).equal(rows[:1])  # shared: one "head"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
@pytest.mark.parametrize("terms", ["both", "keys", "values"])
def test_relative_attention_by_query_equals_gather_forward_and_backward(
    shape, per_head, terms, monkeypatch
):
    runs = attention_in_forms(shape, per_head, gather_then_by_query(monkeypatch), terms)
    for want, got in zip(*runs):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_float32_by_query_stays_within_rounding_of_gather(monkeypatch):
    g = torch.Generator().manual_seed(0)
    q, key, v = (torch.randn(4, 8, 30, 64, generator=g) for _ in range(3))
    wk, wv = (torch.randn(8, 33, 64, generator=g) for _ in range(2))
    out = [
        relative_attention(q, key, v, rel_keys=wk, rel_values=wv, max_relative_position=16)
        for _ in gather_then_by_query(monkeypatch)
    ]
    torch.testing.assert_close(out[1], out[0], rtol=1e-5, atol=1e-5)


def test_a_model_by_query_trains_and_decodes_as_by_gather(monkeypatch):
    """Forward, backward and cached decoding (one block, then queries after a cache)."""
    gathered, by_query = model_runs("shaw", gather_then_by_query(monkeypatch))
    for want, got in zip(gathered, by_query):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_compiled_layers_by_query_equal_eager(monkeypatch):
    """Traced with symbolic lengths: one graph per layer kind, eager's outputs and gradients."""
    from tests.train.test_compile import check_compiled_layers

    monkeypatch.setattr(attention_kernels, "BY_QUERY_DEVICES", ("cpu",))
    check_compiled_layers("shaw")
