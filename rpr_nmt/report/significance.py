"""Paired significance tests of a sweep's settings against a baseline, with sacrebleu's own tests.

The tests are sacrebleu's (`sacrebleu.significance`):
- "bs" (default): paired bootstrap resampling (Koehn, 2004), 1000 resamples of the test sentences,
  with the resampled sums taken as one matrix product (rpr_nmt.report.bootstrap: the same draws,
  scores and p-values as sacrebleu's PairedTest, to the bit, in a fraction of its time);
- "ar": paired approximate randomization (Riezler & Maxwell, 2005), 10000 trials, by PairedTest.
Both test whether two systems' corpus BLEU (chrF) on the same test set differ more than resampling
the sentences would make them differ; the p-value is sacrebleu's. The random draws are seeded by
$SACREBLEU_SEED (sacrebleu's default 12345), so a report is reproducible.

How seeds enter: each seed of a setting is tested against the *same seed* of the baseline (runs
paired by train.seed, which also fixes initialisation and batch order), one test per seed pair;
the report gives the median and the largest p-value over the pairs. "Significant at 0.05" in the
report means every seed pair is (the largest p < 0.05), so a difference that only some seeds show
is not called significant. Seeds without a partner in the baseline are left out.

One exception to taking sacrebleu's number as is: where the two corpus scores are equal (identical
outputs, or two untrained models that both score BLEU 0 on every resample), sacrebleu's count of
resampled differences strictly above the observed one (zero) can be 0 and its p-value 1/(n+1), which
would read as significant. A difference of zero is no evidence of one: its p-value is reported as 1.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

TESTS = {"bs": "paired bootstrap resampling", "ar": "paired approximate randomization"}
METRICS = ("BLEU", "chrF")  # the order of the p-values of paired_p_values
ALPHA = 0.05  # the level at which the report calls a difference significant
DEFAULT_SAMPLES = {"bs": 1000, "ar": 10000}  # sacrebleu's resamples / trials when n_samples = 0


@dataclass(frozen=True)
class PairedResult:
    """One metric of one system against the baseline: sacrebleu's p-value and the two scores."""

    p_value: float
    score: float
    baseline_score: float

    @property
    def delta(self) -> float:
        """System minus baseline."""
        return self.score - self.baseline_score


def paired_p_values(
    baseline: Sequence[str],
    systems: Sequence[Sequence[str]],
    references: Sequence[str],
    *,
    test: str = "bs",
    tgt_lang: str = "",
    n_samples: int = 0,
) -> list[dict[str, PairedResult]]:
    """sacrebleu's paired test of each system against the baseline, on BLEU and chrF.

    Args:
        baseline: the baseline's detokenised hypotheses, one per test sentence.
        systems: the hypotheses of each system compared with it, aligned with `baseline`.
        references: one reference per test sentence.
        test: "bs" (paired bootstrap resampling) or "ar" (approximate randomization).
        tgt_lang: target language code: sacreBLEU's tokenizer, as in rpr_nmt.evaluate.
        n_samples: resamples ("bs") or trials ("ar"); 0 = sacrebleu's default (1000 / 10000).

    Returns:
        For each system, {"BLEU": PairedResult, "chrF": PairedResult}.
    """
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    if test not in TESTS:
        raise ValueError(f"significance test {test!r} is not one of {sorted(TESTS)}")
    for hyps in (baseline, *systems):
        if len(hyps) != len(references):
            raise ValueError(
                f"{len(hyps)} hypotheses for {len(references)} references: "
                "each system must translate the whole test set"
            )
    if not systems:
        return []
    metrics = {"BLEU": _metric(BLEU, tgt_lang), "chrF": _metric(CHRF, "")}
    found = _bootstrap(metrics, baseline, systems, references, n_samples) if test == "bs" else None
    if found is None:
        named = [("baseline", list(baseline))]
        named += [(f"system {i}", list(hyps)) for i, hyps in enumerate(systems, start=1)]
        refs = [list(references)]
        _, scores = PairedTest(named, metrics, refs, test_type=test, n_samples=n_samples)()
        columns = [name for name in scores if name != "System"]  # 'BLEU', 'chrF2', in order
        found = {
            metric: [(result.score, result.p_value) for result in scores[column]]
            for metric, column in zip(METRICS, columns)
        }
    results = []
    for i in range(1, len(systems) + 1):
        result = {}
        for metric in METRICS:
            (score, p_value), baseline_score = found[metric][i], found[metric][0][0]
            result[metric] = PairedResult(
                p_value=1.0 if score == baseline_score else float(p_value),  # module docstring
                score=float(score),
                baseline_score=float(baseline_score),
            )
        results.append(result)
    return results


def _bootstrap(
    metrics: dict, baseline: Sequence[str], systems, references: Sequence[str], n_samples: int
) -> dict[str, list[tuple[float, float | None]]] | None:
    """Per metric, (score, p-value) of the baseline (p None) and of each system, from
    rpr_nmt.report.bootstrap: sacrebleu's paired bootstrap to the bit. None where a resampled sum
    could leave float32's exact integers: sacrebleu's PairedTest then runs itself."""
    from rpr_nmt.report.bootstrap import fits, paired_bootstrap

    refs = [list(references)]
    samples = n_samples if n_samples > 0 else DEFAULT_SAMPLES["bs"]  # as PairedTest
    found = {}
    for name, metric in metrics.items():
        base = metric._extract_corpus_statistics(list(baseline), refs)
        stats = [metric._extract_corpus_statistics(list(hyps), refs) for hyps in systems]
        if not all(fits(s) for s in (base, *stats)):
            return None
        base_score, tested = paired_bootstrap(metric, base, stats, samples)
        found[name] = [(base_score, None), *tested]
    return found


def report_bleu(hyps: Sequence[str], refs: Sequence[str], tgt_lang: str) -> float:
    """Corpus sacreBLEU as rpr_nmt.evaluate.corpus_bleu gives it, from the kept sentence statistics
    that the paired tests share (_metric): a report scores each run's sentences in several
    groupings (all, each length bucket, past the cap), and each sentence is now read once."""
    from sacrebleu.metrics import BLEU

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references: not line-aligned")
    return float(_metric(BLEU, tgt_lang).corpus_score(list(hyps), [list(refs)]).score)


_METRICS: dict[tuple[type, str], object] = {}
_MEMOS: dict[tuple[type, str], tuple[dict, dict]] = {}  # kept statistics, per kind and tokenizer


def _metric(kind: type, tgt_lang: str):
    """One sacrebleu metric per kind and target language, keeping its sentences' statistics.

    A report tests each baseline against every setting, and sacrebleu's PairedTest extracts the
    baseline's (and the references') statistics again each time: most of a report's time. A
    sentence's statistics depend only on its hypothesis, its references and the tokenizer, so they
    are computed once, and shared by the metrics of target languages with the same tokenizer (a
    length table's BLEU without a language and the tests' BLEU of "de" both tokenize by 13a); the
    scores and p-values are sacrebleu's, to the bit (tests/report/test_published.py).
    """
    key = (kind, tgt_lang)
    if key not in _METRICS:
        memoised = type(f"Memoised{kind.__name__}", (_SentenceMemo, kind), {})
        metric = memoised(trg_lang=tgt_lang) if tgt_lang else memoised()
        tokenizer = getattr(metric, "tokenizer_signature", "")
        metric._memo, metric._reference_memo = _MEMOS.setdefault((kind, tokenizer), ({}, {}))
        _METRICS[key] = metric
    return _METRICS[key]


class _SentenceMemo:
    """Mixin for a sacrebleu Metric: each (hypothesis, references) pair's statistics once, and
    each sentence's references read once (every run of a report is scored on the same ones)."""

    def _cache_references(self, references):
        memo = self.__dict__.setdefault("_reference_memo", {})
        rows = list(zip(*references))
        todo = list(dict.fromkeys(row for row in rows if row not in memo))
        if todo:
            streams = [[row[j] for row in todo] for j in range(len(references))]
            memo.update(zip(todo, super()._cache_references(streams)))
        return [memo[row] for row in rows]  # num_refs: set by _extract_corpus_statistics below

    def _extract_corpus_statistics(self, hypotheses, references):
        if not references:  # sacrebleu's cached references: nothing to key on
            return super()._extract_corpus_statistics(hypotheses, references)
        memo = self.__dict__.setdefault("_memo", {})
        rows = list(zip(*references))
        keys = list(zip(hypotheses, rows))
        todo = list(dict.fromkeys(k for k in keys if k not in memo))
        if todo:
            streams = [[refs[j] for _, refs in todo] for j in range(len(references))]
            fresh = super()._extract_corpus_statistics([hyp for hyp, _ in todo], streams)
            memo.update(zip(todo, fresh))
        counts = {sum(ref is not None for ref in refs) for refs in rows}
        self.num_refs = counts.pop() if len(counts) == 1 else -1  # as _cache_references sets it
        return [memo[k] for k in keys]


@dataclass
class Comparison:
    """One setting against the baseline: a test per seed pair.

    Attributes:
        seeds: the train.seed values tested (paired with the baseline's run of the same seed).
        p_values: per metric ("BLEU", "chrF"), one p-value per seed in `seeds`.
        deltas: per metric, setting minus baseline corpus score per seed.
        scores: per metric, the setting's corpus score per seed (on the sentences tested).
        note: why no test was made (no hypotheses, another test set, no seed in common).
    """

    seeds: list[int | None] = field(default_factory=list)
    p_values: dict[str, list[float]] = field(default_factory=dict)
    deltas: dict[str, list[float]] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)
    note: str = ""

    def median_p(self, metric: str) -> float | None:
        """The median p-value over the seed pairs; None when nothing was tested."""
        values = self.p_values.get(metric) or []
        return statistics.median(values) if values else None

    def max_p(self, metric: str) -> float | None:
        """The largest p-value over the seed pairs; None when nothing was tested."""
        values = self.p_values.get(metric) or []
        return max(values) if values else None

    def significant(self, metric: str, alpha: float = ALPHA) -> bool:
        """Every seed pair's p-value below alpha."""
        worst = self.max_p(metric)
        return worst is not None and worst < alpha

    def cell(self, metric: str) -> str:
        """'p 0.003 (max 0.010) *' for several seeds, 'p 0.003 *' for one; '-' for no test."""
        median, worst = self.median_p(metric), self.max_p(metric)
        if median is None or worst is None:
            return "-"
        star = " *" if self.significant(metric) else ""
        if len(self.seeds) == 1:
            return f"p {median:.3f}{star}"
        return f"p {median:.3f} (max {worst:.3f}){star}"


# A system's test output: (seed, hypotheses, references, target language).
SeedOutput = tuple[int | None, list[str], list[str], str]


def compare_seedwise(
    baseline: Sequence[SeedOutput],
    settings: dict[str, Sequence[SeedOutput]],
    *,
    test: str = "bs",
    n_samples: int = 0,
) -> dict[str, Comparison]:
    """Test every setting against the baseline seed by seed (see the module docstring).

    Args:
        baseline: the baseline's outputs, one per seed.
        settings: each setting's outputs, one per seed.
        test, n_samples: as paired_p_values.

    Returns:
        A Comparison per setting (in the order of `settings`).
    """
    by_seed = {seed: (hyps, refs) for seed, hyps, refs, _ in baseline}
    # Every setting's run of one seed against the baseline's in one paired_p_values call: the
    # baseline's statistics and resampled scores once per seed, not once per setting. Each system's
    # test draws the same resamples from the same seed, so its p-value is what a test alone gives.
    tested: dict[tuple[int | None, str], list[tuple[str, int, list[str]]]] = {}
    notes: dict[str, str] = {}
    for name, outputs in settings.items():
        for position, (seed, hyps, refs, lang) in enumerate(outputs):
            if seed not in by_seed:
                continue
            if refs != by_seed[seed][1]:
                notes[name] = "another test set than the baseline's"
                continue
            tested.setdefault((seed, lang), []).append((name, position, list(hyps)))
    found: dict[tuple[str, int], dict[str, PairedResult]] = {}
    for (seed, lang), systems in tested.items():
        base_hyps, refs = by_seed[seed]
        results = paired_p_values(
            base_hyps, [hyps for *_, hyps in systems], refs,
            test=test, tgt_lang=lang, n_samples=n_samples,
        )  # fmt: skip
        for (name, position, _), p in zip(systems, results):
            found[name, position] = p
    compared: dict[str, Comparison] = {}
    for name, outputs in settings.items():
        result = Comparison(note=notes.get(name, ""))
        for position, (seed, *_) in enumerate(outputs):  # in the setting's order of seeds
            if (name, position) not in found:
                continue
            p = found[name, position]
            result.seeds.append(seed)
            for metric in METRICS:
                result.p_values.setdefault(metric, []).append(p[metric].p_value)
                result.deltas.setdefault(metric, []).append(p[metric].delta)
                result.scores.setdefault(metric, []).append(p[metric].score)
        if not result.seeds and not result.note:
            result.note = "no seed in common with the baseline"
        compared[name] = result
    return compared
