"""scripts/bench_dropout_mask.py: its split masks keep dropout's contract and its seeding."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch

from ..conftest import load_script

bench = load_script("bench_dropout_mask")


def test_a_split_mask_drops_at_the_rate_and_repeats_under_the_same_seed():
    pool = ThreadPoolExecutor(2)
    torch.manual_seed(3)
    first = bench.split_mask((400, 1000), 0.1, pool, 2)
    torch.manual_seed(3)
    again = bench.split_mask((400, 1000), 0.1, pool, 2)
    assert first.shape == (400, 1000) and first.dtype == torch.bool
    assert torch.equal(first, again)  # the seeds come from the default generator
    assert abs((~first).float().mean().item() - 0.1) < 0.003  # 400k draws: sd 0.0005
    # both halves drawn: neither part is left as torch.empty found it
    halves = first.view(-1).tensor_split(2)
    assert all(abs((~h).float().mean().item() - 0.1) < 0.004 for h in halves)
    torch.manual_seed(4)
    assert not torch.equal(bench.split_mask((400, 1000), 0.1, pool, 2), first)


def test_the_compiled_forms_mask_keeps_at_the_rate():
    torch.manual_seed(0)
    keep = bench.rand_mask(torch.empty(400_000, dtype=torch.bfloat16), 0.1)
    assert keep.dtype == torch.bool and abs(keep.float().mean().item() - 0.9) < 0.003


def test_numpy_masks_drop_at_the_rate_and_follow_torchs_seed():
    torch.manual_seed(7)
    first = bench.numpy_mask((400, 1000), 0.1)
    torch.manual_seed(7)
    assert torch.equal(bench.numpy_mask((400, 1000), 0.1), first)
    assert abs((~first).float().mean().item() - 0.1) < 0.003
