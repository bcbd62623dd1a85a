"""RelativeMultiheadAttention, RelativePositions: table shapes and sharing, the attention dtype."""

from __future__ import annotations

import pytest
import torch

from rpr_nmt.model.multihead import RelativeMultiheadAttention, RelativePositions, RelativeTables


def test_module_table_sharing_shapes():
    shared = RelativeMultiheadAttention(
        16, 4, relative=RelativePositions(k=3, share_across_heads=True)
    )
    assert tuple(shared.rel_keys.shape) == (7, 4)
    keys_only = RelativePositions(k=3, values=False)
    per_head = RelativeMultiheadAttention(16, 4, relative=keys_only)
    assert tuple(per_head.rel_keys.shape) == (4, 7, 4) and per_head.rel_values is None
    layer2 = RelativeMultiheadAttention(
        16, 4, relative=keys_only, tables=RelativeTables(per_head.rel_keys, None)
    )
    assert layer2.rel_keys is per_head.rel_keys
    off = RelativeMultiheadAttention(16, 4)
    assert off.rel_keys is None and off.rel_values is None and off.relative.k == 0


def test_relative_positions_enabled_and_checks():
    assert RelativePositions(k=2).enabled
    assert not RelativePositions().enabled  # k = 0
    assert not RelativePositions(k=2, keys=False, values=False).enabled
    assert RelativePositions(k=0).new_tables(4, 4) == RelativeTables(None, None)
    with pytest.raises(ValueError, match="max_relative_position must be >= 0"):
        RelativePositions(k=-1)
    per_head = RelativePositions(k=3).new_tables(4, 4)  # (H, R, Dh) each
    with pytest.raises(ValueError, match="shared relative tables"):  # wrong shape
        RelativeMultiheadAttention(
            16, 4, relative=RelativePositions(k=3, share_across_heads=True), tables=per_head
        )
    with pytest.raises(ValueError, match="shared relative tables"):  # a w^V the setting lacks
        RelativeMultiheadAttention(
            16, 4, relative=RelativePositions(k=3, values=False), tables=per_head
        )


def test_attention_dtype_sets_the_cache_dtype_and_keeps_the_output_dtype():
    torch.manual_seed(0)
    relative = RelativePositions(k=2)
    plain = RelativeMultiheadAttention(16, 4, relative=relative, causal=True).eval()
    torch.manual_seed(0)
    wide = RelativeMultiheadAttention(
        16, 4, relative=relative, causal=True, attention_dtype=torch.float64
    ).eval()
    assert plain.attention_dtype is None and wide.attention_dtype == torch.float64
    x = torch.randn(2, 5, 16)
    want, plain_kv = plain(x)
    got, wide_kv = wide(x)
    assert plain_kv.keys.dtype == torch.float32 and wide_kv.keys.dtype == torch.float64
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)
