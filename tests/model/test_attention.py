"""relative_attention against the paper's equations, written as a naive per-(i, j) loop."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from rpr_nmt.model.attention import relative_attention, relative_position_index, shaw_pairs
from rpr_nmt.model.attention_kernels import FEW_QUERIES, TableWindow

B, H, DH = 2, 3, 4


def naive_attention(q, k, v, *, rel_keys, rel_values, max_rel, causal, padding, q_offset):
    """Eq. 3 and 4 of the paper, one (batch, head, i, j) at a time."""
    Bq, Hq, Tq, Dh = q.shape
    Tk = k.size(2)
    z = torch.zeros_like(q)
    for b, h, i in itertools.product(range(Bq), range(Hq), range(Tq)):
        logits, visible = [], []
        for j in range(Tk):
            r = max(-max_rel, min(max_rel, j - (i + q_offset))) + max_rel
            key = k[b, h, j].clone()
            if rel_keys is not None:
                key = key + (rel_keys[r] if rel_keys.dim() == 2 else rel_keys[h, r])
            logits.append(q[b, h, i] @ key / math.sqrt(Dh))
            hidden = (causal and j > i + q_offset) or (padding is not None and bool(padding[b, j]))
            visible.append(not hidden)
        logits = torch.stack(logits)
        logits = logits.masked_fill(~torch.tensor(visible), float("-inf"))
        alpha = torch.softmax(logits, dim=0)
        for j in range(Tk):
            r = max(-max_rel, min(max_rel, j - (i + q_offset))) + max_rel
            value = v[b, h, j]
            if rel_values is not None:
                value = value + (rel_values[r] if rel_values.dim() == 2 else rel_values[h, r])
            z[b, h, i] = z[b, h, i] + alpha[j] * value
    return z


def make_inputs(tq, tk, max_rel, *, per_head, dtype=torch.float64, requires_grad=False):
    shape = (H, 2 * max_rel + 1, DH) if per_head else (2 * max_rel + 1, DH)
    tensors = [torch.randn(B, H, tq, DH), torch.randn(B, H, tk, DH), torch.randn(B, H, tk, DH)]
    tensors += [torch.randn(shape), torch.randn(shape)]
    return [t.to(dtype).requires_grad_(requires_grad) for t in tensors]


def test_index_matrix_matches_hand_written():
    expected = torch.tensor(
        [
            [2, 3, 4, 4, 4],
            [1, 2, 3, 4, 4],
            [0, 1, 2, 3, 4],
        ]
    )
    assert torch.equal(relative_position_index(3, 5, 2), expected)
    # Query offset 2 (decoding): queries at positions 2, 3 against keys 0..4, k = 1.
    expected = torch.tensor([[0, 0, 1, 2, 2], [0, 0, 0, 1, 2]])
    assert torch.equal(relative_position_index(2, 5, 1, q_offset=2), expected)


@pytest.mark.parametrize("use_keys,use_values", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize(
    "causal,padded,q_offset,tq",
    [
        (False, False, 0, 5),
        (False, True, 0, 5),
        (True, False, 0, 5),
        (True, True, 0, 5),
        (True, True, 3, 2),
        (False, True, 2, 3),
    ],
)
def test_matches_naive_loop_float64(use_keys, use_values, per_head, causal, padded, q_offset, tq):
    Tk, max_rel = 5, 2
    q, k, v, wk, wv = make_inputs(tq, Tk, max_rel, per_head=per_head)
    padding = torch.tensor([[False] * Tk, [False] * (Tk - 2) + [True] * 2]) if padded else None
    kwargs = dict(causal=causal, q_offset=q_offset)
    rel_keys, rel_values = (wk if use_keys else None), (wv if use_values else None)
    got = relative_attention(
        q,
        k,
        v,
        rel_keys=rel_keys,
        rel_values=rel_values,
        max_relative_position=max_rel,
        key_padding_mask=padding,
        **kwargs,
    )
    want = naive_attention(
        q,
        k,
        v,
        rel_keys=rel_keys,
        rel_values=rel_values,
        max_rel=max_rel,
        padding=padding,
        **kwargs,
    )
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "causal,padded,tq",
    [(False, False, 4), (True, True, 4), (False, True, 1), (True, False, 1)]
    + [(False, False, 10), (False, True, 10), (True, False, 10), (True, True, 10)],
)
def test_no_relative_terms_matches_naive_loop(causal, padded, tq):
    # tq = 10 takes PyTorch's SDPA; up to FEW_QUERIES queries (a decoding step) the manual path.
    assert (tq > FEW_QUERIES) == (tq == 10)
    tk = max(4, tq)
    q, k, v, _, _ = make_inputs(tq, tk, 1, per_head=False)
    q_offset = tk - tq
    padding = torch.tensor([[False] * tk, [False] * (tk - 1) + [True]]) if padded else None
    got = relative_attention(q, k, v, causal=causal, key_padding_mask=padding, q_offset=q_offset)
    want = naive_attention(
        q,
        k,
        v,
        rel_keys=None,
        rel_values=None,
        max_rel=1,
        causal=causal,
        padding=padding,
        q_offset=q_offset,
    )
    torch.testing.assert_close(got, want)


def test_float32_matches_float64_reference():
    q, k, v, wk, wv = make_inputs(6, 6, 3, per_head=True)
    padding = torch.zeros(B, 6, dtype=torch.bool)
    padding[1, -1] = True
    want = naive_attention(
        q, k, v, rel_keys=wk, rel_values=wv, max_rel=3, causal=True, padding=padding, q_offset=0
    )
    got = relative_attention(
        *(t.float() for t in (q, k, v)),
        rel_keys=wk.float(),
        rel_values=wv.float(),
        max_relative_position=3,
        causal=True,
        key_padding_mask=padding,
    )
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("per_head", [False, True])
def test_gradcheck_into_both_tables(per_head):
    inputs = make_inputs(3, 4, 1, per_head=per_head, requires_grad=True)
    padding = torch.tensor([[False] * 4, [False, False, False, True]])

    def fn(q, k, v, wk, wv):
        return relative_attention(
            q,
            k,
            v,
            rel_keys=wk,
            rel_values=wv,
            max_relative_position=1,
            key_padding_mask=padding,
            q_offset=1,
            causal=True,
        )

    assert torch.autograd.gradcheck(fn, inputs)


def test_table_gradients_match_reference():
    q, k, v, wk, wv = make_inputs(5, 5, 2, per_head=True, requires_grad=True)
    kwargs = dict(rel_keys=wk, rel_values=wv, causal=False, q_offset=0)
    out = relative_attention(q, k, v, max_relative_position=2, key_padding_mask=None, **kwargs)
    grads = torch.autograd.grad(out.square().sum(), (wk, wv))
    ref = naive_attention(q, k, v, max_rel=2, padding=None, **kwargs)
    ref_grads = torch.autograd.grad(ref.square().sum(), (wk, wv))
    for got, want in zip(grads, ref_grads):
        assert got.abs().sum() > 0
        torch.testing.assert_close(got, want)


def test_zero_tables_equal_plain_attention():
    q, k, v, wk, wv = make_inputs(5, 5, 2, per_head=True)
    zeros = torch.zeros_like(wk)
    got = relative_attention(
        q, k, v, rel_keys=zeros, rel_values=zeros, max_relative_position=2, causal=True
    )
    plain = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(got, plain)


def test_padded_keys_get_zero_weight():
    q, k, v, wk, wv = make_inputs(4, 6, 2, per_head=False)
    padding = torch.zeros(B, 6, dtype=torch.bool)
    padding[:, 4:] = True
    kwargs = dict(rel_keys=wk, rel_values=wv, max_relative_position=2, key_padding_mask=padding)
    base = relative_attention(q, k, v, **kwargs)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 4:] = 1e3 * torch.randn_like(k2[:, :, 4:])
    v2[:, :, 4:] = 1e3 * torch.randn_like(v2[:, :, 4:])
    torch.testing.assert_close(relative_attention(q, k2, v2, **kwargs), base)
    # The same as cutting the padded keys off: also no position-term weight on them.
    cut = relative_attention(q, k[:, :, :4], v[:, :, :4], **{**kwargs, "key_padding_mask": None})
    torch.testing.assert_close(cut, base)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("q_len,k_len,q_offset", [(5, 5, 0), (1, 7, 6), (2, 9, 7), (12, 12, 0)])
def test_table_window_holds_every_visible_row(causal, q_len, k_len, q_offset):
    k = 3
    window = TableWindow.of(q_len, k_len, k, q_offset, causal=causal)
    index = relative_position_index(q_len, k_len, k, q_offset)  # (Tq, Tk)
    visible = torch.ones(q_len, k_len, dtype=torch.bool)
    if causal:
        visible = torch.arange(k_len)[None, :] <= torch.arange(q_offset, q_offset + q_len)[:, None]
    rows = index[visible]
    assert (window.first, window.last) == (int(rows.min()), int(rows.max()))
    shifted = window.shift(index)
    assert torch.equal(shifted[visible], rows - window.first)
    table = torch.randn(2 * k + 1, DH)
    assert torch.equal(window.rows(table)[shifted[visible]], table[rows])
    assert window.rows(None) is None


def test_table_window_of_a_decoding_step_is_the_rows_up_to_zero():
    # The newest query at position 6 of a causal decoder, k = 2: rows j - i = -2 .. 0 only.
    assert TableWindow.of(1, 7, 2, 6, causal=True) == (0, 2)
    assert TableWindow.of(1, 7, 2, 6, causal=False) == (0, 2)
    assert TableWindow.of(1, 2, 2, 1, causal=True) == (1, 2)  # a short prefix: -1 .. 0


def test_pair_rows_built_for_other_lengths_are_refused():
    q, k, v = (torch.randn(2, 2, 5, DH) for _ in range(3))
    table = torch.randn(2 * 3 + 1, DH)
    pairs = shaw_pairs(5, 6, 3, 0, causal=False, device=torch.device("cpu"))
    wrong = r"built for .* = \(5, 6, 3, 0, False\), used for \(5, 5, 3, 0, False\)"
    with pytest.raises(ValueError, match=wrong):
        relative_attention(q, k, v, rel_keys=table, max_relative_position=3, pairs=pairs)
    fitting = shaw_pairs(5, 5, 3, 0, causal=False, device=torch.device("cpu"))
    given = relative_attention(q, k, v, rel_keys=table, max_relative_position=3, pairs=fitting)
    assert given.equal(relative_attention(q, k, v, rel_keys=table, max_relative_position=3))


def test_a_table_of_another_size_than_2k_plus_1_is_refused():
    """A table longer than 2k + 1 rows was read silently with its rows misaligned to r_ij."""
    q, k, v = (torch.randn(B, H, 5, DH) for _ in range(3))
    table = torch.randn(H, 2 * 2 + 3, DH)
    for name in ("rel_keys", "rel_values"):
        with pytest.raises(ValueError, match=rf"{name} \(3, 7, 4\).*R = 2k \+ 1 = 5"):
            relative_attention(q, k, v, max_relative_position=2, **{name: table})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("rel_keys", torch.randn(H + 1, 5, DH)),
        ("rel_keys", torch.randn(5, DH + 1)),
        ("rel_keys", torch.randn(H, 5, DH, dtype=torch.float64)),
        ("rel_values", torch.randn(1, H, 5, DH)),
        ("key_padding_mask", torch.zeros(B, 5)),
        ("key_padding_mask", torch.zeros(B, 6, dtype=torch.bool)),
        ("bias", torch.randn(H, 5, 6)),
        ("q_offset", -1),
    ],
)
def test_a_wrong_argument_is_named(name, value):
    q, k, v = (torch.randn(B, H, 5, DH) for _ in range(3))
    with pytest.raises(ValueError, match=name):
        relative_attention(q, k, v, max_relative_position=2, causal=True, **{name: value})
