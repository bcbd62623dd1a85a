"""The relative terms built per diagonal (attention_kernels.Diagonals, CUDA's path) against gather
and scatter_add (the CPU's): the same values, forward and backward, for Shaw's a^K and a^V and
T5's bias. Run on the CPU by adding it to DIAGONAL_DEVICES, from two queries on
(DIAGONALS_ABOVE)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.model import attention_kernels, build_model, relative_attention
from rpr_nmt.model.attention import relative_position_index, shaw_pairs
from rpr_nmt.model.attention_kernels import Diagonals, TableWindow, diagonals_apply
from rpr_nmt.model.positions.t5 import T5Bias

B, H, DH = 2, 3, 4


def forms(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Gather, then per diagonal on the CPU for any query length of two or more."""
    monkeypatch.setattr(attention_kernels, "DIAGONALS_ABOVE", 1)
    for devices in [("cuda",), ("cuda", "cpu")]:
        monkeypatch.setattr(attention_kernels, "DIAGONAL_DEVICES", devices)
        yield


def test_the_cpu_keeps_gather_and_cuda_takes_diagonals_for_long_sequences(monkeypatch):
    assert not diagonals_apply(torch.device("cpu"), 500)
    assert not diagonals_apply(torch.device("cuda"), attention_kernels.DIAGONALS_ABOVE)
    assert diagonals_apply(torch.device("cuda"), attention_kernels.DIAGONALS_ABOVE + 1)
    monkeypatch.setattr(attention_kernels, "DIAGONALS_ABOVE", 0)
    assert diagonals_apply(torch.device("cuda"), 2)
    assert not diagonals_apply(torch.device("cuda"), 1)  # one query: one row, nothing to spread


@pytest.mark.parametrize("tq,tk", [(2, 2), (5, 3), (3, 7), (9, 9)])
def test_spread_and_collect_place_pair_i_j_on_diagonal_j_minus_i(tq, tk):
    d = Diagonals(tq, tk)
    per_diagonal = torch.randn(B, tq, d.length)
    pairs = torch.randn(B, tq, tk)
    spread, collected = d.spread(per_diagonal), d.collect(pairs)
    for i in range(tq):
        for j in range(tk):
            assert spread[:, i, j].equal(per_diagonal[:, i, j - i + tq - 1])
            assert collected[:, i, j - i + tq - 1].equal(pairs[:, i, j])
    on_a_diagonal = torch.zeros(tq, d.length, dtype=torch.bool)
    for i in range(tq):
        on_a_diagonal[i, tq - 1 - i : tq - 1 - i + tk] = True
    assert collected[:, ~on_a_diagonal].eq(0).all()  # nothing else written


def shaw_index(tq, tk, k, q_offset, causal, monkeypatch, *, per_diagonal=False):
    monkeypatch.setattr(attention_kernels, "DIAGONALS_ABOVE", 1)
    monkeypatch.setattr(attention_kernels, "DIAGONAL_DEVICES", ("cpu",) if per_diagonal else ())
    pairs = shaw_pairs(tq, tk, k, q_offset, causal=causal, device=torch.device("cpu"))
    assert isinstance(pairs.rows, Diagonals) == per_diagonal
    window = pairs.window
    return window.last - window.first + 1, pairs.of_batch(B, H)  # table rows in the window, r_ij


SHAPES = [  # (Tq, Tk, k, q_offset, causal): training squares, clipped or not, and cached blocks
    (7, 7, 2, 0, False), (7, 7, 16, 0, False), (12, 12, 3, 0, True), (4, 9, 2, 5, True),
    (3, 10, 16, 7, True), (6, 4, 1, 0, False), (2, 2, 1, 0, False), (5, 5, 0, 0, False),
]  # fmt: skip


@pytest.mark.parametrize("tq,tk,k,q_offset,causal", SHAPES)
def test_pick_equals_gather_bit_for_bit_and_bucket_sum_equals_scatter_add(
    tq, tk, k, q_offset, causal, monkeypatch
):
    rows, gather = shaw_index(tq, tk, k, q_offset, causal, monkeypatch)
    _, diagonals = shaw_index(tq, tk, k, q_offset, causal, monkeypatch, per_diagonal=True)
    per_row = torch.randn(B, H, tq, rows)
    assert diagonals.pick(per_row).equal(gather.pick(per_row))
    weights = torch.rand(B, H, tq, tk, dtype=torch.float64)
    torch.testing.assert_close(
        diagonals.bucket_sum(weights, rows), gather.bucket_sum(weights, rows), rtol=1e-14, atol=0
    )


def rows_by_diagonal(tq, tk, k, q_offset, window: TableWindow) -> torch.Tensor:
    """The table row of every diagonal, read off the pairs: (L,)."""
    rows = window.shift(relative_position_index(tq, tk, k, q_offset))  # (Tq, Tk)
    by_diagonal = torch.full((tq + tk - 1,), -1)
    for i in range(tq):
        for j in range(tk):
            assert by_diagonal[j - i + tq - 1] in (-1, rows[i, j])  # one row per diagonal
            by_diagonal[j - i + tq - 1] = rows[i, j]
    return by_diagonal


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_offset", [0, 3])
@pytest.mark.parametrize("tq,tk", [(2, 2), (2, 9), (5, 8), (9, 9), (12, 20)])
@pytest.mark.parametrize("k", [0, 1, 3, 16])
def test_diagonals_count_the_diagonals_of_each_edge_row(tq, tk, k, q_offset, causal):
    window = TableWindow.of(tq, tk, k, q_offset, causal=causal)
    d = Diagonals.of_window(tq, tk, k, q_offset, window)
    rows = rows_by_diagonal(tq, tk, k, q_offset, window)
    last = window.last - window.first
    assert rows[0] == 0 and rows[-1] == last
    assert d.lo == int((rows == 0).sum())
    assert d.hi == (int((rows == last).sum()) if last else 0)
    assert torch.equal(rows.diff().clamp(0, 1), rows.diff())  # steps of 0 or 1: one per row between


def test_the_whole_table_takes_diagonals_only_where_every_row_occurs():
    whole = TableWindow.whole(3)  # what torch.compile traces
    assert Diagonals.of_window(9, 9, 3, 0, whole) == Diagonals.of_window(
        9, 9, 3, 0, TableWindow.of(9, 9, 3, 0, causal=False)
    )
    with pytest.raises(ValueError, match="do not all occur"):
        Diagonals.of_window(3, 3, 3, 0, whole)  # |j - i| <= 2: rows 0 and 6 never occur
    with pytest.raises(ValueError, match="at least 2 queries"):
        Diagonals.of_window(1, 3, 3, 0, whole)


def attention_in_forms(
    shape: tuple[int, int, int, int, bool],
    per_head: bool,
    forms_in_turn: Iterator[None],
    terms: str = "both",
) -> list[list[torch.Tensor]]:
    """For each form forms_in_turn switches to: relative_attention's output and every gradient,
    float64, with padding where the queries still see a key (terms: both, keys or values)."""
    tq, tk, k, q_offset, causal = shape
    g = torch.Generator().manual_seed(tq * 100 + tk)
    table = (H, 2 * k + 1, DH) if per_head else (2 * k + 1, DH)
    shapes = [(B, H, tq, DH), (B, H, tk, DH), (B, H, tk, DH), table, table]
    inputs = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    padding = torch.zeros(B, tk, dtype=torch.bool)
    padding[1, tk - 1 :] = not causal
    results = []
    for _ in forms_in_turn:
        leaves = [t.clone().requires_grad_() for t in inputs]
        z = relative_attention(
            *leaves[:3], rel_keys=leaves[3] if terms != "values" else None,
            rel_values=leaves[4] if terms != "keys" else None, max_relative_position=k,
            causal=causal, key_padding_mask=padding, q_offset=q_offset,
        )  # fmt: skip
        (z * torch.linspace(-1, 1, z.numel(), dtype=z.dtype).view_as(z)).sum().backward()
        results.append([z] + [t.grad for t in leaves if t.grad is not None])
    assert len({len(r) for r in results}) == 1
    return results


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("per_head", [True, False], ids=["per_head", "shared"])
def test_relative_attention_by_diagonals_equals_gather_forward_and_backward(
    shape, per_head, monkeypatch
):
    gathered, by_diagonal = attention_in_forms(shape, per_head, forms(monkeypatch))
    for want, got in zip(gathered, by_diagonal):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bidirectional", [True, False], ids=["encoder", "decoder"])
@pytest.mark.parametrize("tq,tk,q_offset", [(9, 9, 0), (3, 11, 8), (2, 2, 0), (40, 40, 0)])
def test_t5_bias_by_diagonals_equals_indexing_bit_for_bit(
    bidirectional, tq, tk, q_offset, monkeypatch
):
    torch.manual_seed(0)
    t5 = T5Bias(n_heads=H, num_buckets=8, max_distance=12, bidirectional=bidirectional)
    out = torch.randn(H, tq, tk)
    values, grads = [], []
    for _ in forms(monkeypatch):
        t5.weight.grad = None
        bias = t5.bias(tq, tk, q_offset, torch.device("cpu"))  # (H, Tq, Tk)
        (bias * out).sum().backward()
        values.append(bias.detach())
        grads.append(t5.weight.grad.double())
    assert values[1].equal(values[0])
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-6)


def model_runs(positions: str, forms_in_turn: Iterator[None]) -> list[list[torch.Tensor]]:
    """For each form forms_in_turn switches to: a whole model's logits and every gradient, its
    cached decoding checked against the forward on the way (4 queries, then queries after a cache).
    """
    fields = dict(
        d_model=16,
        n_heads=2,
        d_ff=32,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        attention_dropout=0.0,
        sinusoidal=False,
        max_relative_position=3,
    )
    if positions == "t5":
        fields.update(relative_positions="t5", max_relative_position=0, t5_num_buckets=8,
                      t5_max_distance=10, absolute_positions="none")  # fmt: skip
    src = torch.randint(4, 30, (3, 14), generator=torch.Generator().manual_seed(1))
    src[1, -4:] = 0
    tgt = torch.randint(4, 30, (3, 13), generator=torch.Generator().manual_seed(2))
    runs = []
    for _ in forms_in_turn:
        torch.manual_seed(0)
        model = build_model(ModelConfig(**fields), vocab_size=30, pad_id=0).double()
        logits = model(src, tgt)  # (B, T, V)
        logits.square().mean().backward()
        with torch.no_grad():
            memory = model.encode(src)
            head, cache = model.decode_step(tgt[:, :4], memory, None)  # a block of 4 queries
            tail, _ = model.decode_step(tgt[:, 4:], memory, cache)  # queries after a cache
        torch.testing.assert_close(
            torch.cat([head, tail], 1), logits.detach(), rtol=1e-10, atol=1e-10
        )
        runs.append([logits.detach()] + [p.grad for p in model.parameters()])
    return runs


@pytest.mark.parametrize("positions", ["shaw", "t5"])
def test_a_model_by_diagonals_trains_and_decodes_as_by_gather(positions, monkeypatch):
    """Forward, backward and cached decoding of a whole model: diagonals against gather."""
    gathered, by_diagonal = model_runs(positions, forms(monkeypatch))
    for want, got in zip(gathered, by_diagonal):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_compiled_layers_by_diagonals_equal_eager(monkeypatch):
    """Traced with symbolic lengths without a graph break (no tensor read for the edge rows): one
    graph per layer kind, eager's outputs and gradients."""
    from tests.train.test_compile import check_compiled_layers

    monkeypatch.setattr(attention_kernels, "DIAGONALS_ABOVE", 1)
    monkeypatch.setattr(attention_kernels, "DIAGONAL_DEVICES", ("cpu",))
    check_compiled_layers("shaw")
