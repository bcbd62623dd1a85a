"""sacrebleu's paired tests via rpr_nmt.report.significance, on systems whose answer is known."""

from __future__ import annotations

import random

import pytest

from rpr_nmt.report.significance import Comparison, compare_seedwise, paired_p_values

WORDS = [f"w{i}" for i in range(60)]


def corpus(n: int = 60, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12))) for _ in range(n)]


def degrade(sentences: list[str], every: int) -> list[str]:
    """Replace every `every`-th word of each sentence: worse on every sentence."""
    return [
        " ".join("zz" if i % every == 0 else w for i, w in enumerate(s.split())) for s in sentences
    ]


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_identical_systems_are_not_significant(test):
    refs = corpus()
    hyps = degrade(refs, 3)
    (result,) = paired_p_values(hyps, [list(hyps)], refs, test=test, n_samples=200)
    for metric in ("BLEU", "chrF"):
        assert result[metric].p_value == 1.0
        assert result[metric].delta == 0.0


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_two_different_outputs_with_the_same_score_are_not_significant(test):
    """Two untrained models repeat one word each: BLEU 0 for both on every resample, which
    sacrebleu's count (resampled differences strictly above the observed 0) calls p = 1/(n+1)."""
    refs = corpus()
    first = ["qq " * 10 for _ in refs]
    second = ["yy " * 12 for _ in refs]
    (result,) = paired_p_values(first, [second], refs, test=test, n_samples=200)
    assert result["BLEU"].score == result["BLEU"].baseline_score == 0.0
    assert result["BLEU"].p_value == 1.0


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_a_system_better_on_every_sentence_is_significant(test):
    refs = corpus()
    baseline, better = degrade(refs, 2), degrade(refs, 4)
    (result,) = paired_p_values(baseline, [better], refs, test=test, n_samples=500)
    for metric in ("BLEU", "chrF"):
        assert result[metric].p_value < 0.05
        assert result[metric].delta > 0


def test_systems_must_cover_the_test_set():
    refs = corpus(10)
    with pytest.raises(ValueError, match="9 hypotheses for 10 references"):
        paired_p_values(refs, [refs[:9]], refs)
    with pytest.raises(ValueError, match="significance test 'x'"):
        paired_p_values(refs, [refs], refs, test="x")


def test_seeds_are_paired_with_the_same_seed_of_the_baseline():
    refs = corpus()
    baseline = [(1, degrade(refs, 2), refs, "de"), (2, degrade(refs, 3), refs, "de")]
    settings = {
        # seed 1 better than the baseline's seed 1; seed 2 identical to the baseline's seed 2
        "mixed": [(1, degrade(refs, 4), refs, "de"), (2, degrade(refs, 3), refs, "de")],
        "better": [(1, degrade(refs, 5), refs, "de"), (2, degrade(refs, 5), refs, "de")],
        "unpaired": [(7, refs, refs, "de")],
        "other test set": [(1, refs[:-1], refs[:-1], "de")],
    }
    compared = compare_seedwise(baseline, settings, n_samples=300)
    mixed = compared["mixed"]
    assert mixed.seeds == [1, 2]
    assert mixed.p_values["BLEU"][0] < 0.05 and mixed.p_values["BLEU"][1] == 1.0
    assert mixed.max_p("BLEU") == 1.0 and not mixed.significant("BLEU")
    assert mixed.cell("BLEU").endswith("(max 1.000)")
    assert compared["better"].significant("BLEU") and compared["better"].significant("chrF")
    assert compared["better"].cell("chrF").endswith(" *")
    assert compared["unpaired"].note == "no seed in common with the baseline"
    assert compared["other test set"].note == "another test set than the baseline's"
    assert Comparison().cell("BLEU") == "-"


def test_kept_sentence_statistics_give_sacrebleus_own_p_values():
    # The report keeps each sentence's statistics across tests (significance._metric): what it
    # gives must be what sacrebleu's PairedTest gives with fresh metrics, test after test, also
    # when a later test holds some sentences seen before and some not.
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    refs = corpus(80, seed=1)
    base, first, second = degrade(refs, 2), degrade(refs, 3), degrade(refs, 5)
    second[::7] = corpus(len(second[::7]), seed=2)  # sentences the first test did not see
    for system in (first, second, first):
        kept = paired_p_values(base, [system], refs, tgt_lang="de", n_samples=300)[0]
        named = [("baseline", base), ("system", system)]
        metrics = {"BLEU": BLEU(trg_lang="de"), "chrF": CHRF()}
        _, fresh = PairedTest(named, metrics, [refs], test_type="bs", n_samples=300)()
        for metric, column in zip(("BLEU", "chrF"), ("BLEU", "chrF2")):
            assert kept[metric].p_value == fresh[column][1].p_value
            assert kept[metric].score == fresh[column][1].score
            assert kept[metric].baseline_score == fresh[column][0].score


@pytest.mark.parametrize("test", ["bs", "ar"])
def test_settings_tested_together_get_the_p_values_of_tests_alone(test):
    # compare_seedwise tests every setting of one seed against the baseline in one PairedTest:
    # each must get what a test of it alone gives, in its own order of seeds.
    refs = corpus(50, seed=3)
    baseline = [(1, degrade(refs, 3), refs, "de"), (2, degrade(refs, 4), refs, "de")]
    settings = {
        "a": [(2, degrade(refs, 2), refs, "de"), (1, degrade(refs, 5), refs, "de")],
        "b": [(1, degrade(refs, 6), refs, "de")],
    }
    compared = compare_seedwise(baseline, settings, test=test, n_samples=200)
    base = {seed: hyps for seed, hyps, _, _ in baseline}
    for name, outputs in settings.items():
        assert compared[name].seeds == [seed for seed, *_ in outputs]
        for i, (seed, hyps, _, _) in enumerate(outputs):
            (alone,) = paired_p_values(base[seed], [hyps], refs, test=test, n_samples=200)
            for metric in ("BLEU", "chrF"):
                assert compared[name].p_values[metric][i] == alone[metric].p_value
                assert compared[name].scores[metric][i] == alone[metric].score


def test_report_bleu_is_corpus_bleu_on_any_grouping_of_sentences():
    # The report scores the same sentences whole, per length bucket and past the cap from kept
    # statistics and references: each must be what rpr_nmt.evaluate.corpus_bleu gives afresh.
    from rpr_nmt.evaluate import corpus_bleu
    from rpr_nmt.report.significance import report_bleu

    refs = corpus(70, seed=4)
    hyps = degrade(refs, 3)
    hyps[::5] = corpus(len(hyps[::5]), seed=5)
    for members in (range(70), range(0, 70, 2), range(35, 70), range(70)):
        h, r = [hyps[i] for i in members], [refs[i] for i in members]
        for lang in ("", "de"):
            assert report_bleu(h, r, lang) == corpus_bleu(h, r, lang)
    with pytest.raises(ValueError, match="69 hypotheses for 70 references"):
        report_bleu(hyps[1:], refs, "")


@pytest.mark.parametrize("seed", [None, "7"], ids=["default-seed", "seed-7"])
def test_the_bootstrap_gives_sacrebleus_paired_test_for_several_systems(seed, monkeypatch):
    # rpr_nmt.report.bootstrap sums the resamples in one matrix product and scores the
    # baseline's resamples once: every system's score and p-value must be PairedTest's.
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    if seed is None:
        monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    else:
        monkeypatch.setenv("SACREBLEU_SEED", seed)
    refs = corpus(90, seed=6)
    base = degrade(refs, 3)
    systems = [degrade(refs, 2), degrade(refs, 4), corpus(90, seed=7), list(base)]
    ours = paired_p_values(base, systems, refs, tgt_lang="de", n_samples=250)
    named = [("baseline", base)] + [(f"s{i}", s) for i, s in enumerate(systems)]
    metrics = {"BLEU": BLEU(trg_lang="de"), "chrF": CHRF()}
    _, fresh = PairedTest(named, metrics, [refs], test_type="bs", n_samples=250)()
    for i, result in enumerate(ours[:3], start=1):  # the 4th is the baseline itself: p 1
        for metric, column in zip(("BLEU", "chrF"), ("BLEU", "chrF2")):
            assert result[metric].p_value == fresh[column][i].p_value
            assert result[metric].score == fresh[column][i].score
    assert ours[3]["BLEU"].p_value == 1.0


def test_the_bootstrap_draws_afresh_without_a_seed_and_leaves_wide_sums_to_sacrebleu(monkeypatch):
    from rpr_nmt.report import bootstrap

    refs = corpus(60, seed=8)
    base, better = degrade(refs, 2), degrade(refs, 5)
    monkeypatch.setenv("SACREBLEU_SEED", "none")
    assert bootstrap.sacrebleu_seed() is None
    (result,) = paired_p_values(base, [better], refs, n_samples=200)
    assert 0 < result["BLEU"].p_value < 0.05
    # Sums that float32 could not hold exactly, or statistics that are not counts: PairedTest.
    assert not bootstrap.fits([[2.0**24, 1.0]] * 2) and not bootstrap.fits([[0.5, 1.0]])
    assert bootstrap.fits([[3, 4], [5, 6]])
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    monkeypatch.setattr(bootstrap, "EXACT_FLOAT32", 1)  # nothing fits: sacrebleu's own test
    (alone,) = paired_p_values(base, [better], refs, n_samples=200)
    monkeypatch.undo()
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    (fast,) = paired_p_values(base, [better], refs, n_samples=200)
    assert alone["BLEU"].p_value == fast["BLEU"].p_value and alone["chrF"] == fast["chrF"]


def test_resample_counts_are_sacrebleus_draws():
    import numpy as np

    from rpr_nmt.report.bootstrap import resample_counts

    counts = resample_counts(7, 5, seed=3)
    idxs = np.random.default_rng(3).choice(7, size=(5, 7), replace=True)
    assert counts.shape == (5, 7) and (counts.sum(1) == 7).all()
    for row, drawn in zip(counts, idxs):
        assert list(row) == [list(drawn).count(i) for i in range(7)]


def test_metrics_with_one_tokenizer_share_their_sentence_statistics():
    from sacrebleu.metrics import BLEU

    from rpr_nmt.evaluate import corpus_bleu
    from rpr_nmt.report.significance import _metric, report_bleu

    plain, german, chinese = _metric(BLEU, ""), _metric(BLEU, "de"), _metric(BLEU, "zh")
    assert plain is not german and plain._memo is german._memo  # both 13a
    assert chinese._memo is not plain._memo  # the zh tokenizer splits otherwise
    refs = ["他 骑 自行车。", "一只狗在跑"]
    hyps = ["他骑自行车。", "一只狗 在跑"]
    assert report_bleu(hyps, refs, "zh") == corpus_bleu(hyps, refs, "zh")
    assert report_bleu(hyps, refs, "") == corpus_bleu(hyps, refs, "")
