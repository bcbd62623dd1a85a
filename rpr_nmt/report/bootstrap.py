"""sacrebleu's paired bootstrap resampling, with each resample's sums taken in one matrix product.

sacrebleu's `_paired_bs_test` (sacrebleu.significance, 2.x) draws `n_samples` resamples of the test
sentences from a generator seeded by $SACREBLEU_SEED, sums each system's per-sentence statistics
over every resample (`stats[idxs]`, a copy of n_samples x n sentences x statistics, then one sum per
resample), scores each sum with the metric, and counts how often the centred resampled difference
exceeds the observed one. It does this for the baseline again for every system it tests. A report
runs hundreds of such tests, and the copy and the sums were most of its time.

Here the same resamples are drawn from the same seed, each sentence's count in each resample is
taken once, and the sums are one product (resamples x sentences) @ (sentences x statistics). The
statistics are integer counts, so each sum is exact in float64 and exact again in float32 while
below 2**24, as sacrebleu's float32 sums are: both give the same numbers to the bit, and the scores
and p-values follow from sacrebleu's own metric and p-value code. Where a sum could pass 2**24
(`fits` is False) the caller runs sacrebleu's PairedTest itself.
tests/report/test_significance.py holds this equal to sacrebleu's PairedTest.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

EXACT_FLOAT32 = 2**24  # integers up to here are exact in float32


def sacrebleu_seed() -> int | None:
    """The seed of sacrebleu's paired tests: $SACREBLEU_SEED, default 12345; 'none' or 0: none."""
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    value = None if seed.lower() == "none" else int(seed)
    return value if value else None  # PairedTest passes `self._seed if self._seed else None`


def resample_counts(n_sentences: int, n_samples: int, seed: int | None) -> np.ndarray:
    """How often each sentence is drawn in each resample: (n_samples, n_sentences) float64, from
    the draws sacrebleu's `_paired_bs_test` makes with the same seed."""
    rng = np.random.default_rng(seed)
    idxs = rng.choice(n_sentences, size=(n_samples, n_sentences), replace=True)
    flat = idxs + n_sentences * np.arange(n_samples)[:, None]
    counts = np.bincount(flat.ravel(), minlength=n_samples * n_sentences)
    return counts.reshape(n_samples, n_sentences).astype(np.float64)


def fits(stats: Sequence[Sequence[float]]) -> bool:
    """Whether every resampled sum of `stats` (at most n times the largest) is exact in float32."""
    array = np.asarray(stats, dtype=np.float64)
    return bool(np.all(array == np.round(array))) and (
        float(np.abs(array).max(initial=0.0)) * len(array) < EXACT_FLOAT32
    )


def resampled_scores(metric, stats: Sequence[Sequence[float]], counts: np.ndarray) -> np.ndarray:
    """The metric's score of each resample: sacrebleu's `_compute_score_from_stats` of each sum."""
    sums = (counts @ np.asarray(stats, dtype=np.float64)).astype(np.float32)
    return np.array([metric._compute_score_from_stats(row).score for row in sums])


def paired_bootstrap(
    metric,
    baseline_stats: Sequence[Sequence[float]],
    systems_stats: Sequence[Sequence[Sequence[float]]],
    n_samples: int,
) -> tuple[float, list[tuple[float, float]]]:
    """sacrebleu's paired bootstrap p-value of each system against the baseline on one metric.

    Args:
        metric: a sacrebleu Metric (BLEU, CHRF), whose statistics these are.
        baseline_stats: the baseline's per-sentence statistics (metric._extract_corpus_statistics).
        systems_stats: each system's, aligned with the baseline's sentences.
        n_samples: resamples (sacrebleu's 1000 when asked for 0).

    Returns:
        The baseline's score, and for each system (score, p-value), as sacrebleu's `Result.score`
        and `Result.p_value`.
    """
    from sacrebleu.significance import _compute_p_value

    seed = sacrebleu_seed()
    n = len(baseline_stats)
    counts = resample_counts(n, n_samples, seed)
    baseline_score = metric._aggregate_and_compute(baseline_stats).score
    baseline_scores = resampled_scores(metric, baseline_stats, counts)
    results = []
    for stats in systems_stats:
        if seed is None:  # sacrebleu draws afresh for each system then
            counts = resample_counts(n, n_samples, None)
            baseline_scores = resampled_scores(metric, baseline_stats, counts)
        score = metric._aggregate_and_compute(stats).score
        sample_diffs = np.abs(resampled_scores(metric, stats, counts) - baseline_scores)
        p = _compute_p_value(sample_diffs - sample_diffs.mean(), abs(baseline_score - score))
        results.append((score, p))
    return baseline_score, results
