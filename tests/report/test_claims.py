"""The claims judged by rpr-nmt-report, each against the baseline it names: constructed sweeps
whose verdicts are known."""

from __future__ import annotations

from pathlib import Path

from rpr_nmt.report.claims import (
    FAILS,
    FULL_TEST_CLAIMS,
    HOLDS,
    PAST_CAP_CLAIMS,
    UNSEEN_CLAIM,
    UNSURE,
    _no_positions,
    is_reference,
    is_sinusoid,
)
from rpr_nmt.report.labels import method_label
from rpr_nmt.report.runs import Run
from rpr_nmt.report.significance import Comparison
from rpr_nmt.report.sweep import Row
from rpr_nmt.report.verdicts import comparisons_needed, judge_claims, outcome

REFERENCE = {"max_relative_position": 16, "relative_keys": True, "relative_values": True}


def judge(rows: list[Row], reference: Row, compared: dict[str, Comparison]) -> list:
    """The full-test claims, every comparison made against the paper's model."""
    return judge_claims(FULL_TEST_CLAIMS, rows, {reference.setting: compared})


def row(name: str, bleu: list[float], **model) -> Row:
    model = {**REFERENCE, "sinusoidal": False, **model}
    runs = [Run(Path(name), [], {"model": model}, {"test_bleu": b}) for b in bleu]
    return Row(name, model, runs)


def paired(p_values: list[float], deltas: list[float]) -> Comparison:
    return Comparison(
        seeds=list(range(1, len(p_values) + 1)),
        p_values={"BLEU": p_values},
        deltas={"BLEU": deltas},
    )


def test_outcome_of_a_setting_against_the_reference():
    assert outcome(paired([0.001, 0.01, 0.02], [-8.0, -7.5, -8.2])) == "worse"
    assert outcome(paired([0.001, 0.01], [1.0, 0.5])) == "better"
    assert outcome(paired([0.4, 0.2, 0.9], [-0.3, 0.2, 0.0])) == "same"
    assert outcome(paired([0.001, 0.3], [-1.0, -0.2])) == "partly worse"  # one pair of two
    assert outcome(paired([0.03, 0.09, 0.2], [0.9, 0.6, -0.1])) == "partly better"
    assert outcome(paired([0.001, 0.001], [-1.0, 1.0])) == "mixed"  # opposite directions
    assert outcome(paired([0.001, 0.3, 0.01], [-1.0, 0.2, 0.8])) == "mixed"
    assert outcome(None) == outcome(Comparison(note="no hypotheses")) == "mixed"


def test_the_predicates_tell_the_methods_apart():
    """'none' is no absolute and no relative method: RoPE, ALiBi, T5, learned are named."""
    k0 = {**REFERENCE, "max_relative_position": 0}
    rope = {**k0, "relative_positions": "rope"}
    assert method_label(rope) == "RoPE"
    assert not _no_positions(rope) and not is_sinusoid({**rope, "sinusoidal": True})
    assert _no_positions(k0) and is_sinusoid({**k0, "sinusoidal": True})
    assert not is_reference({**REFERENCE, "absolute_positions": "learned"})


def test_no_claim_names_a_method_in_one_stack_only():
    """model.positions_in=encoder or decoder is another model than the claims speak of: the
    encoder-only Shaw is not the baseline, the decoder-only sinusoid not the sinusoid."""
    assert is_reference({**REFERENCE, "positions_in": "both"})
    assert not is_reference({**REFERENCE, "positions_in": "encoder"})
    sinusoid = {**REFERENCE, "max_relative_position": 0, "sinusoidal": True}
    assert is_sinusoid(sinusoid) and not is_sinusoid({**sinusoid, "positions_in": "decoder"})


def test_an_ablate_k_sweep_in_the_papers_shape():
    reference = row("k16", [38.0, 38.5, 38.2])
    rows = [
        row("k0", [30.0, 30.2, 29.9], max_relative_position=0),
        row("k2", [38.1, 38.2, 37.9], max_relative_position=2),
        row("k64", [38.3, 38.0, 38.4], max_relative_position=64),
        reference,
    ]
    compared = {
        "k0": paired([0.001, 0.001, 0.001], [-8.0, -8.3, -8.3]),
        "k2": paired([0.40, 0.35, 0.60], [0.1, -0.3, -0.3]),
        "k64": paired([0.30, 0.45, 0.20], [0.3, -0.5, 0.2]),
    }
    verdicts = judge(rows, reference, compared)
    assert [v.verdict for v in verdicts] == [HOLDS, HOLDS]
    collapse, flat = verdicts
    assert collapse.claim.startswith("without any position information")
    assert "none: 30.0 ± 0.2 [29.7, 30.4] (3 seeds; 3 paired), Δ -8.2" in collapse.line()
    assert "p 0.001 (max 0.001) *" in collapse.line()
    assert "Shaw k = 2: 38.1" in flat.evidence and "Shaw k = 64: 38.2" in flat.evidence
    assert flat.evidence.startswith("against Shaw k = 16 (38.2 ± 0.3")

    compared["k64"] = paired([0.01, 0.02, 0.03], [0.9, 1.1, 1.0])  # k = 64 better in every pair
    assert judge(rows, reference, compared)[1].verdict == FAILS
    compared["k64"] = paired([0.01, 0.30, 0.03], [0.9, 0.2, 1.0])  # two pairs of three
    assert judge(rows, reference, compared)[1].verdict == UNSURE
    compared["k0"] = paired([0.20, 0.30, 0.50], [-0.2, -0.1, 0.1])  # no collapse
    assert judge(rows, reference, compared)[0].verdict == FAILS


def test_terms_and_absolute_claims():
    reference = row("both", [38.0, 38.5])
    keys = row("keys", [38.0, 38.1], relative_values=False)
    values = row("values", [37.5, 37.9], relative_keys=False)
    absolute = row("abs", [37.0, 37.2], max_relative_position=0, sinusoidal=True)
    mixed_in = row("both+sin", [38.1, 38.4], sinusoidal=True)
    rows = [keys, values, absolute, mixed_in, reference]
    compared = {
        "keys": paired([0.5, 0.3], [0.0, -0.4]),
        "values": paired([0.2, 0.4], [-0.5, -0.6]),  # lower, not significant: too small to tell
        "abs": paired([0.01, 0.02], [-1.0, -1.3]),
        "both+sin": paired([0.6, 0.7], [0.1, -0.1]),
    }
    verdicts = {v.claim.split(" (")[0]: v.verdict for v in judge(rows, reference, compared)}
    assert verdicts == {
        "a^K alone is enough": HOLDS,
        "a^V alone is a little weaker": UNSURE,
        "relative positions match or beat absolute ones": HOLDS,
        "adding the sinusoid to relative positions gains nothing": HOLDS,
    }
    compared["values"] = paired([0.01, 0.04], [-0.5, -0.6])
    compared["abs"] = paired([0.01, 0.02], [1.0, 1.3])  # absolute better in every pair
    verdicts = {v.claim.split(" (")[0]: v.verdict for v in judge(rows, reference, compared)}
    assert verdicts["a^V alone is a little weaker"] == HOLDS
    assert verdicts["relative positions match or beat absolute ones"] == FAILS

    # One-sided claims: a pair significant in the direction the claim allows does not unsettle it,
    # one in the direction it excludes does, and every pair there refutes it.
    def verdict(claim: str, setting: str, comparison: Comparison) -> str:
        found = judge(rows, reference, {**compared, setting: comparison})
        return next(v.verdict for v in found if v.claim.startswith(claim))

    enough = "a^K alone is enough"
    assert verdict(enough, "keys", paired([0.03, 0.09], [0.9, 0.6])) == HOLDS  # partly better
    assert verdict(enough, "keys", paired([0.03, 0.09], [-0.9, -0.6])) == UNSURE  # partly worse
    assert verdict(enough, "keys", paired([0.03, 0.01], [-0.9, -0.6])) == FAILS
    gains = "adding the sinusoid to relative positions gains nothing"
    assert verdict(gains, "both+sin", paired([0.01, 0.6], [-0.8, -0.1])) == HOLDS
    assert verdict(gains, "both+sin", paired([0.01, 0.6], [0.8, 0.1])) == UNSURE
    weaker = "a^V alone is a little weaker"
    assert verdict(weaker, "values", paired([0.01, 0.6], [0.8, 0.1])) == FAILS  # partly better
    assert verdict(weaker, "values", paired([0.01, 0.6], [-0.8, -0.1])) == UNSURE


def test_no_claims_without_the_papers_model():
    rows = [row("k0", [30.0], max_relative_position=0), row("k4", [38.0], max_relative_position=4)]
    assert judge(rows, rows[1], {"k0": paired([0.001], [-8.0])}) == []


# Claims of later papers: each judged against the baseline it names, not against Shaw k = 16.

SINUSOID = {"max_relative_position": 0, "sinusoidal": True}
ALONE = {"max_relative_position": 0, "sinusoidal": False, "absolute_positions": "none"}


def study_rows(*names: str) -> dict[str, Row]:
    """Rows of a position study with two seeds each, by name (the test BLEU is only shown)."""
    models = {
        "sinusoid": SINUSOID,
        "learned": {**ALONE, "absolute_positions": "learned"},
        "shaw": {**REFERENCE, "sinusoidal": False},
        "rope": {**ALONE, "relative_positions": "rope"},
        "alibi": {**ALONE, "relative_positions": "alibi"},
        "t5": {**ALONE, "relative_positions": "t5"},
        "none": {**ALONE, "relative_positions": "none"},
    }
    return {name: row(name, [30.0, 31.0], **models[name]) for name in names}


def verdict_of(verdicts: list, start: str) -> str | None:
    """The verdict of the claim beginning with `start`; None when it was not judged."""
    return next((v.verdict for v in verdicts if v.claim.startswith(start)), None)


ROPE = "RoPE matches or beats the sinusoid (Su et al., RoFormer, Table 1"
GUMMA = "without any position information an encoder-decoder is not viable"


def test_rope_is_judged_against_the_sinusoid_not_the_papers_model():
    rows = study_rows("sinusoid", "shaw", "rope", "none")
    ordered = list(rows.values())
    against_shaw = {  # RoPE worse than Shaw k = 16 in every pair: no bearing on the RoPE claim
        "sinusoid": paired([0.3, 0.4], [-0.1, 0.1]),
        "rope": paired([0.001, 0.002], [-2.0, -1.5]),
        "none": paired([0.001, 0.001], [-8.0, -8.0]),
    }
    against_sinusoid = {
        "rope": paired([0.01, 0.02], [1.2, 0.9]),  # better in every seed pair
        "none": paired([0.001, 0.001], [-7.9, -8.1]),
    }
    compared = {"shaw": against_shaw, "sinusoid": against_sinusoid}
    verdicts = judge_claims(FULL_TEST_CLAIMS, ordered, compared)
    assert verdict_of(verdicts, ROPE) == HOLDS
    assert verdict_of(verdicts, GUMMA) == HOLDS
    assert verdict_of(verdicts, "without any position information the model collapses") == HOLDS
    rope = next(v for v in verdicts if v.claim.startswith(ROPE))
    assert rope.evidence.startswith("against sinusoid (30.5 ± 0.7 [24.1, 36.9]): RoPE: 30.5")
    assert "(2 seeds; 2 paired), Δ +1.1, p 0.015 (max 0.020) *" in rope.evidence

    def rope_verdict(comparison: Comparison) -> str | None:
        found = {**compared, "sinusoid": {**against_sinusoid, "rope": comparison}}
        return verdict_of(judge_claims(FULL_TEST_CLAIMS, ordered, found), ROPE)

    assert rope_verdict(paired([0.3, 0.6], [-0.2, 0.1])) == HOLDS  # the same
    assert rope_verdict(paired([0.01, 0.6], [-0.8, 0.1])) == UNSURE  # partly worse
    assert rope_verdict(paired([0.01, 0.02], [-0.8, -0.9])) == FAILS  # worse in every pair


def test_claims_whose_settings_a_sweep_lacks_are_not_judged():
    # En-Fr's study has no learned table and no 'none'; a sweep without the sinusoid judges no
    # claim against it, one without RoPE no claim on RoPE.
    compared = {"shaw": {"sinusoid": paired([0.3, 0.4], [0.1, -0.1])}, "sinusoid": {}}
    verdicts = judge_claims(
        FULL_TEST_CLAIMS, list(study_rows("sinusoid", "shaw").values()), compared
    )
    assert [v.claim.split(" (")[0] for v in verdicts] == [
        "relative positions match or beat absolute ones"
    ]
    no_sinusoid = list(study_rows("shaw", "rope", "none").values())
    verdicts = judge_claims(FULL_TEST_CLAIMS, no_sinusoid, {"shaw": {}})
    assert verdict_of(verdicts, ROPE) is verdict_of(verdicts, GUMMA) is None
    assert verdict_of(verdicts, "without any position information the model collapses")
    assert comparisons_needed(FULL_TEST_CLAIMS, no_sinusoid).keys() == {"shaw"}
    rows = list(study_rows("sinusoid", "learned", "shaw", "rope", "none").values())
    needed = comparisons_needed(FULL_TEST_CLAIMS, rows)
    assert {base: [r.setting for r in group] for base, group in needed.items()} == {
        "shaw": ["shaw", "none", "sinusoid"],  # the baseline first, then the rows it is tested on
        "sinusoid": ["sinusoid", "rope", "none"],  # no claim tests the learned table on all BLEU
    }


def past_cap(p_values: list[float], deltas: list[float], base: float = 20.0) -> Comparison:
    """A paired test on the sentences past the cap, with the setting's BLEU on them."""
    comparison = paired(p_values, deltas)
    comparison.scores["BLEU"] = [base + d for d in deltas]
    return comparison


def test_each_relative_method_carries_over_against_the_sinusoid_and_the_learned_table():
    rows = list(study_rows("sinusoid", "learned", "shaw", "rope", "alibi", "t5").values())
    better, same = past_cap([0.001, 0.004], [3.0, 2.5]), past_cap([0.4, 0.7], [0.2, -0.1])
    partly = past_cap([0.01, 0.3], [1.0, 0.4])  # better in one seed pair of two
    compared = {
        "shaw": {"sinusoid": past_cap([0.001, 0.002], [-3.0, -2.0], 23.0)},
        "sinusoid": {"shaw": better, "rope": better, "alibi": same, "t5": same},
        "learned": {"shaw": better, "rope": same, "alibi": better, "t5": partly},
    }
    scope = "BLEU on the 312 test sentences longer than 15 BPE tokens"
    verdicts = judge_claims(PAST_CAP_CLAIMS, rows, compared, scope)
    carry = "relative methods carry over to sources longer than any seen in training better than "
    found = {v.claim.removeprefix(carry).split(" (")[0]: v.verdict for v in verdicts}
    assert found == {
        UNSEEN_CLAIM.split(" (")[0]: HOLDS,  # the sinusoid no better than Shaw k = 16
        "absolute ones: Shaw k = 16 against the sinusoid": HOLDS,
        "absolute ones: Shaw k = 16 against the learned table": HOLDS,
        "absolute ones: RoPE against the sinusoid": HOLDS,
        "absolute ones: RoPE against the learned table": FAILS,  # no seed pair finds a gain
        "absolute ones: ALiBi against the sinusoid": FAILS,
        "absolute ones: ALiBi against the learned table": HOLDS,
        "absolute ones: T5 buckets against the sinusoid": FAILS,
        "absolute ones: T5 buckets against the learned table": UNSURE,
        "ALiBi extrapolates to sources longer than any seen in training at least as well as the "
        "sinusoid": HOLDS,
    }
    alibi = next(v for v in verdicts if "ALiBi against the learned table" in v.claim)
    assert alibi.evidence == (
        f"{scope}: ALiBi at 22.8 against learned at 20.0 (2 seed pairs), Δ +2.8, "
        "p 0.003 (max 0.004) *"
    )
    assert alibi.claim.endswith(
        "(Rosendahl et al. 2019: +4.4 to 11.9% BLEU; Neishi & Yoshinaga 2019)"
    )
    # Without the learned table (the En-Fr study) its four claims are not judged.
    without = [r for r in rows if r.setting != "learned"]
    judged = [v.claim for v in judge_claims(PAST_CAP_CLAIMS, without, compared, scope)]
    assert len(judged) == 6 and not any("learned table" in claim for claim in judged)


def test_no_verdict_on_models_that_do_not_translate():
    """Probe S3: two degenerate models (30 updates, 'Ein Ein Ein ...') are 'the same' by every
    test; the claim cannot be told until the baseline reaches the quality floor."""
    reference = row("k16", [0.1, 0.1])
    rows = [row("k2", [0.1, 0.1], max_relative_position=2), reference]
    compared = {"k2": paired([0.9, 0.8], [0.0, 0.0])}
    (flat,) = judge(rows, reference, compared)
    assert flat.verdict == UNSURE
    assert "test BLEU 0.1, below the floor of 10" in flat.evidence
    for run in reference.runs + rows[0].runs:
        run.summary["test_bleu"] = 30.0
    assert judge(rows, reference, compared)[0].verdict == HOLDS


def test_no_verdict_while_a_compared_run_is_unfinished():
    reference = row("k16", [30.0, 30.0])
    rows = [row("k2", [30.0, 30.0], max_relative_position=2), reference]
    rows[0].runs[1].summary["stopped_by"] = "signal"
    (flat,) = judge(rows, reference, {"k2": paired([0.9, 0.8], [0.0, 0.0])})
    assert flat.verdict == UNSURE and "stopped before their budget" in flat.evidence
