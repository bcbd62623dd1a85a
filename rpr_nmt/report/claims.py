"""The claims on position methods that the reports judge, and the rules that decide them.

Each claim names its source, the setting it is judged against (its baseline) and the settings it
judges (Claim, CLAIMS): Shaw et al.'s own claims ("the paper") against their model (k = 16,
a^K + a^V, no sinusoid), later papers' claims against the sinusoid or the learned table. Each judged
setting is compared with the baseline through sacrebleu's paired test on test BLEU, one test per
seed pair, same seed against same seed (rpr_nmt.report.significance); the claims on unseen lengths
(Claim.past_cap) on the test sentences longer than any training source, and those on long sentences
(Claim.long_sentences) on the length report's last bucket (rpr_nmt.report.lengths).
rpr_nmt.report.verdicts does the judging; this module says what is claimed and how it is decided.
A setting reads against the baseline as

    worse, better   every seed pair significant at 0.05, every difference of the same sign;
    same            no seed pair significant;
    partly worse    some seed pairs significantly worse, the others not significant;
    partly better   the same, better;
    mixed           significant pairs in both directions, or no test.

A claim of a difference ("k = 0 collapses", "carries over better") holds when every seed pair finds
it; a claim of no difference ("k >= 2 is flat") holds when no seed pair finds one, and cannot be
told when the seeds disagree; a one-sided claim ("a^K alone is enough": no loss) holds when no seed
pair finds the difference it excludes. A claim whose baseline or judged settings a sweep lacks is
not judged for that sweep. A verdict on one seed rests on one training run: the evidence names the
seeds. Two models that translate nothing are "the same" by every test, and a baseline far from
translating well measures how far training got rather than its positions: a claim is judged only
when its baseline reaches QUALITY_FLOOR test BLEU and no run it compares stopped short of its
budget; else it cannot be told at this budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rpr_nmt.config import position_methods, position_stacks
from rpr_nmt.report.labels import relative_k

HOLDS, FAILS, UNSURE = "holds", "does not hold", "cannot tell at this budget"
# Test BLEU a claim's baseline must reach for its comparisons to say anything about positions (the
# published Multi30k baselines reach 37-58; a model stopped after a few dozen updates about 0).
QUALITY_FLOOR = 10.0

Model = dict[str, Any]
Predicate = Callable[[Model], bool]  # which settings (model sections) a claim names
Rule = Callable[[list[str], list[float]], str]  # outcomes, mean BLEU differences -> verdict


def _methods(model: Model) -> tuple[str, str] | None:
    """(absolute, relative) as every claim's settings have them, in both stacks; None for a model
    with its methods in one stack only (model.positions_in), which no claim names."""
    if position_stacks(model) != "both":
        return None
    return position_methods(model)


def is_reference(model: Model) -> bool:
    """The paper's base model: k = 16, a^K and a^V, no sinusoid."""
    return (
        relative_k(model) == 16
        and bool(model.get("relative_keys"))
        and bool(model.get("relative_values"))
        and _methods(model) == ("none", "shaw")
    )


# Verdict rules: the outcomes of the judged settings against the baseline -> HOLDS, FAILS, UNSURE.


def _a_loss(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed loss: holds when every row is worse; fails when one is the same or (partly)
    better."""
    if all(o == "worse" for o in outcomes):
        return HOLDS
    if any(o in ("same", "better", "partly better") for o in outcomes):
        return FAILS
    return UNSURE


def _a_gain(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed gain: holds when every row is better; fails when one is the same or (partly)
    worse (the mirror of _a_loss)."""
    if all(o == "better" for o in outcomes):
        return HOLDS
    if any(o in ("same", "worse", "partly worse") for o in outcomes):
        return FAILS
    return UNSURE


def _a_small_loss(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed small loss: as _a_loss, but no significant difference with a lower mean is too
    small to tell at this budget."""
    if all(o == "worse" for o in outcomes):
        return HOLDS
    if any(o in ("better", "partly better") for o in outcomes):
        return FAILS
    if all(o == "same" for o in outcomes) and all(d >= 0 for d in deltas):
        return FAILS
    return UNSURE


def _no_difference(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed equality: holds when no row differs; fails when one differs in every seed."""
    if all(o == "same" for o in outcomes):
        return HOLDS
    if any(o in ("worse", "better") for o in outcomes):
        return FAILS
    return UNSURE


def _no_loss(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed 'at least as good': holds when no row is worse in any seed pair; fails when one
    is worse in every pair."""
    if all(o in ("same", "better", "partly better") for o in outcomes):
        return HOLDS
    if any(o == "worse" for o in outcomes):
        return FAILS
    return UNSURE


def _no_gain(outcomes: list[str], deltas: list[float]) -> str:
    """A claimed 'no better than the baseline': holds when no row is better in any seed pair;
    fails when one is better in every pair."""
    if all(o in ("same", "worse", "partly worse") for o in outcomes):
        return HOLDS
    if any(o == "better" for o in outcomes):
        return FAILS
    return UNSURE


# Which settings a claim names, by their model section.


def _relative_only(model: Model) -> bool:  # Shaw's terms and no absolute method
    return _methods(model) == ("none", "shaw") and bool(relative_k(model))


def _no_positions(model: Model) -> bool:  # no absolute and no relative method at all
    return _methods(model) == ("none", "none")


def _flat_k(model: Model) -> bool:  # k >= 2 with both terms, no sinusoid
    both = model.get("relative_keys") and model.get("relative_values")
    return _relative_only(model) and bool(both) and relative_k(model) >= 2


def _keys_only(model: Model) -> bool:
    return _relative_only(model) and not model.get("relative_values")


def _values_only(model: Model) -> bool:
    return _relative_only(model) and not model.get("relative_keys")


def is_sinusoid(model: Model) -> bool:
    """The sinusoid alone: the absolute baseline of most claims, and of the length report."""
    return _methods(model) == ("sinusoid", "none")


def _learned(model: Model) -> bool:  # the learned table alone
    return _methods(model) == ("learned", "none")


def _relative_and_sinusoid(model: Model) -> bool:  # the paper's "both"
    return _methods(model) == ("sinusoid", "shaw") and bool(relative_k(model))


def _rope(model: Model) -> bool:  # RoPE alone, no absolute method
    return _methods(model) == ("none", "rope")


def _alibi(model: Model) -> bool:  # ALiBi alone
    return _methods(model) == ("none", "alibi")


def _t5(model: Model) -> bool:  # T5's buckets alone
    return _methods(model) == ("none", "t5")


def placed(stacks: str, setting: Predicate) -> Predicate:
    """`setting` (a predicate on the methods in both stacks) with its methods in `stacks` ("both",
    "encoder" or "decoder": model.positions_in)."""

    def predicate(model: Model) -> bool:
        return position_stacks(model) == stacks and setting({**model, "positions_in": "both"})

    return predicate


@dataclass(frozen=True)
class Claim:
    """A claim, the comparison it rests on, and how that comparison decides it.

    Attributes:
        text: the claim as the reports print it, with its source.
        baseline: the setting it is judged against (a sweep's first row it accepts).
        judged: the settings it judges, each against the baseline (the baseline's row aside).
        rule: the judged settings' outcomes and mean BLEU differences -> HOLDS, FAILS or UNSURE.
        past_cap: judged on the test sentences longer than the training cap (length_report.md),
            not on the whole test set (report.md).
        long_sentences: judged on the test sentences of the length report's last bucket, in a
            sweep without a training cap (length_report.md): the long sentences of news text.
    """

    text: str
    baseline: Predicate
    judged: Predicate
    rule: Rule
    past_cap: bool = False
    long_sentences: bool = False


# Which stack needs word order (experiment=where_positions): each method in one stack only against
# the same method in both.
PLACED_METHODS = (("the sinusoid", is_sinusoid), ("Shaw k = 16", is_reference), ("RoPE", _rope))
ENCODER_SOURCE = (
    "Haviv et al. 2022: a bidirectional masked model without positions fails to train, 147.18 "
    "against 4.06 perplexity; Shaw et al. 2018: 12.5 BLEU without any position signal"
)
CAUSAL_SOURCE = (
    "Haviv et al. 2022: causal language models without positions within about 3% of learned "
    "positions in perplexity"
)
KAZEMNEJAD_SOURCE = "Kazemnejad et al. 2023, decoder-only models"

CARRY_OVER_SOURCE = "Rosendahl et al. 2019: +4.4 to 11.9% BLEU; Neishi & Yoshinaga 2019"
LONG_SOURCE = "Rosendahl et al. 2019: relative positions gain most on long sentences"
# The relative methods whose carry-over to unseen lengths is judged, and the absolute baselines.
RELATIVE_METHODS = (
    ("Shaw k = 16", is_reference),
    ("RoPE", _rope),
    ("ALiBi", _alibi),
    ("T5 buckets", _t5),
)
ABSOLUTE_METHODS = (("the sinusoid", is_sinusoid), ("the learned table", _learned))

UNSEEN_CLAIM = (
    "relative positions carry over to sources longer than any seen in training, at least as well "
    "as absolute ones (the paper's case for clipping)"
)

# The claims in report order: Shaw et al.'s ("the paper"), then later papers' on other methods,
# then those on unseen lengths.
CLAIMS: tuple[Claim, ...] = (
    Claim("without any position information the model collapses (paper: 12.5 against 25.8)",
          is_reference, _no_positions, _a_loss),
    Claim("k >= 2 is flat: no k from 2 on differs from k = 16 (paper: 25.8 to 25.9)",
          is_reference, _flat_k, _no_difference),
    Claim("a^K alone is enough (paper: 25.8, as with both terms)", is_reference, _keys_only,
          _no_loss),
    Claim("a^V alone is a little weaker (paper: -0.5)", is_reference, _values_only,
          _a_small_loss),
    Claim("relative positions match or beat absolute ones (paper: +0.3 En-De, +0.5 En-Fr)",
          is_reference, is_sinusoid, _no_gain),
    Claim("adding the sinusoid to relative positions gains nothing", is_reference,
          _relative_and_sinusoid, _no_gain),
    Claim("RoPE matches or beats the sinusoid (Su et al., RoFormer, Table 1: 27.5 against 27.3 "
          "on WMT14 En-De)", is_sinusoid, _rope, _no_loss),
    Claim("without any position information an encoder-decoder is not viable: it falls below the "
          "sinusoid (Gumma et al. 2024)", is_sinusoid, _no_positions, _a_loss),
    Claim(UNSEEN_CLAIM, is_reference, is_sinusoid, _no_gain, past_cap=True),
    *(
        Claim(f"relative methods carry over to sources longer than any seen in training better "
              f"than absolute ones: {name} against {against} ({CARRY_OVER_SOURCE})", baseline,
              judged, _a_gain, past_cap=True)
        for name, judged in RELATIVE_METHODS
        for against, baseline in ABSOLUTE_METHODS
    ),
    Claim("ALiBi extrapolates to sources longer than any seen in training at least as well as the "
          "sinusoid (Press et al. 2022)", is_sinusoid, _alibi, _no_loss, past_cap=True),
    *(
        Claim(f"relative positions beat absolute ones on long sentences: {name} against the "
              f"sinusoid ({LONG_SOURCE})", is_sinusoid, judged, _a_gain, long_sentences=True)
        for name, judged in RELATIVE_METHODS
    ),
    *(
        Claim(f"word order is needed in the encoder: {name} in the decoder only falls below "
              f"{name} in both stacks ({ENCODER_SOURCE})", placed("both", setting),
              placed("decoder", setting), _a_loss)
        for name, setting in PLACED_METHODS
    ),
    *(
        Claim(f"the decoder's causal mask supplies its order: {name} in the encoder only matches "
              f"{name} in both stacks ({CAUSAL_SOURCE})", placed("both", setting),
              placed("encoder", setting), _no_loss)
        for name, setting in PLACED_METHODS
    ),
    *(
        Claim(f"a decoder without positions carries over to sources longer than any seen in "
              f"training at least as well as one with them: {name} in the encoder only against "
              f"{name} in both stacks ({KAZEMNEJAD_SOURCE})", placed("both", setting),
              placed("encoder", setting), _no_loss, past_cap=True)
        for name, setting in PLACED_METHODS
    ),
)  # fmt: skip
FULL_TEST_CLAIMS = tuple(c for c in CLAIMS if not (c.past_cap or c.long_sentences))  # report.md's
PAST_CAP_CLAIMS = tuple(claim for claim in CLAIMS if claim.past_cap)  # length_report.md's
LONG_CLAIMS = tuple(claim for claim in CLAIMS if claim.long_sentences)  # the same, uncapped
ALL_CLAIMS = tuple(claim.text for claim in CLAIMS)  # the order of results/claims.md
