"""The benchmarks refuse a count of rounds or updates that times nothing before any timing (exit 2,
naming the option), as argparse refuses the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.forkrun import run_script

SCRIPTS = Path(__file__).parents[2] / "scripts"


@pytest.mark.parametrize(
    ("script", "args", "named"),
    [
        ("bench_train.py", ["--rounds", "0"], "--rounds 0"),
        ("bench_train.py", ["--steps", "0"], "--steps 0"),
        ("bench_train.py", ["--precisions", "fp32", "bf61"], "--precisions bf61"),
        ("bench_dispatch.py", ["--updates", "0"], "--updates 0"),
        ("bench_rope_rotation.py", ["--rounds", "0"], "--rounds 0"),
        ("bench_dropout_mask.py", ["--rounds", "-1"], "--rounds -1"),
        ("bench_attention.py", ["--layer-rounds", "0"], "--layer-rounds 0"),
        ("bench_gemm_shapes.py", ["--rounds", "0"], "--rounds 0"),
        ("bench_products_in_place.py", ["--rounds", "0"], "--rounds 0"),
        ("profile_train.py", ["--steps", "0"], "--steps 0"),
        ("bench_decode.py", ["--sentences", "0"], "--sentences 0"),
        ("bench_decode.py", ["--sentences", "-5"], "--sentences -5"),
        ("bench_decode.py", ["--repeats", "0"], "--repeats 0"),
        ("bench_decode.py", ["--uncached-sentences", "-1"], "--uncached-sentences -1"),
        ("bench_data.py", ["--lines", "-1"], "--lines -1"),
        ("bench_data.py", ["--batches", "0"], "--batches 0"),
        ("bench_data.py", ["--max-tokens", "0"], "--max-tokens 0"),
        ("bench_prepare.py", ["--pairs", "1000", "0", "-3"], "--pairs 0 -3"),
    ],
)
def test_a_count_that_times_nothing_is_refused_before_the_benchmark(script, args, named):
    # These used to warm up (minutes) and then end in a traceback (statistics of no rounds), or
    # exit 1 where argparse's errors exit 2.
    done = run_script(SCRIPTS / script, args, cwd=SCRIPTS.parent, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == "" and f"error: {named}" in done.stderr.splitlines()[-1]
