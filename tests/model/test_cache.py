"""KeyValueCache: appends in place after index_select, without touching the old cache."""

from __future__ import annotations

import torch

from rpr_nmt.model.cache import KeyValueCache


def test_cache_append_writes_into_the_room_index_select_left_and_keeps_the_old_cache():
    keys, values = torch.randn(3, 2, 4, 5), torch.randn(3, 2, 4, 5)
    cache = KeyValueCache(keys, values).index_select(torch.tensor([2, 0, 0]))
    torch.testing.assert_close(cache.keys, keys[[2, 0, 0]], rtol=0, atol=0)
    new_k, new_v = torch.randn(3, 2, 1, 5), torch.randn(3, 2, 1, 5)
    first = cache.append(new_k, new_v)
    second = cache.append(-new_k, -new_v)  # the room is used: this one copies
    for got, sign in ((first, 1), (second, -1)):
        assert got.length == 5
        want_k = torch.cat([keys[[2, 0, 0]], sign * new_k], dim=2)
        torch.testing.assert_close(got.keys, want_k, rtol=0, atol=0)
        want_v = torch.cat([values[[2, 0, 0]], sign * new_v], dim=2)
        torch.testing.assert_close(got.values, want_v, rtol=0, atol=0)
    torch.testing.assert_close(cache.keys, keys[[2, 0, 0]], rtol=0, atol=0)  # unchanged
    block = new_k.repeat(1, 1, 2, 1), new_v.repeat(1, 1, 2, 1)
    two = KeyValueCache(keys, values).index_select(torch.arange(3)).append(*block)
    assert two.length == 6  # a block of several positions is appended by copying
