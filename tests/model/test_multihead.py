"""RelativeMultiheadAttention: table shapes and sharing, the attention dtype."""

from __future__ import annotations

import torch

from rpr_nmt.model.multihead import RelativeMultiheadAttention


def test_module_table_sharing_shapes():
    shared = RelativeMultiheadAttention(
        16, 4, max_relative_position=3, share_relative_across_heads=True
    )
    assert tuple(shared.rel_keys.shape) == (7, 4)
    per_head = RelativeMultiheadAttention(16, 4, max_relative_position=3, relative_values=False)
    assert tuple(per_head.rel_keys.shape) == (4, 7, 4) and per_head.rel_values is None
    layer2 = RelativeMultiheadAttention(
        16, 4, max_relative_position=3, rel_keys=per_head.rel_keys, relative_values=False
    )
    assert layer2.rel_keys is per_head.rel_keys
    off = RelativeMultiheadAttention(16, 4)
    assert off.rel_keys is None and off.rel_values is None


def test_attention_dtype_sets_the_cache_dtype_and_keeps_the_output_dtype():
    torch.manual_seed(0)
    plain = RelativeMultiheadAttention(16, 4, max_relative_position=2, causal=True).eval()
    torch.manual_seed(0)
    wide = RelativeMultiheadAttention(
        16, 4, max_relative_position=2, causal=True, attention_dtype=torch.float64
    ).eval()
    assert plain.attention_dtype is None and wide.attention_dtype == torch.float64
    x = torch.randn(2, 5, 16)
    want, plain_kv = plain(x)
    got, wide_kv = wide(x)
    assert plain_kv.keys.dtype == torch.float32 and wide_kv.keys.dtype == torch.float64
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want)
