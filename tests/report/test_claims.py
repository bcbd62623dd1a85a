"""The paper's claims judged by rpr-nmt-report: constructed sweeps whose verdicts are known."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import yaml

from rpr_nmt.cli.report import main
from rpr_nmt.config import DataConfig
from rpr_nmt.data import Tokenizer
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.report.claims import (
    FAILS,
    HOLDS,
    UNSEEN_CLAIM,
    UNSURE,
    _absolute,
    _no_positions,
    is_reference,
    judge_claims,
    outcome,
    positions,
)
from rpr_nmt.report.runs import Run
from rpr_nmt.report.significance import Comparison
from rpr_nmt.report.sweep import Row

REFERENCE = {"max_relative_position": 16, "relative_keys": True, "relative_values": True}


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


def test_positions_in_the_papers_terms():
    assert positions(REFERENCE) == "k=16 a^K+a^V"
    assert positions({**REFERENCE, "relative_values": False}) == "k=16 a^K"
    assert positions({"max_relative_position": 0, "sinusoidal": True}) == "sinusoid"
    no_terms = {**REFERENCE, "relative_keys": False, "relative_values": False}
    assert positions(no_terms) == positions({"max_relative_position": 0}) == "none"


def test_other_position_methods_are_named_and_never_none():
    """'none' is no absolute and no relative method: RoPE, ALiBi, T5, learned are named."""
    k0 = {**REFERENCE, "max_relative_position": 0}
    assert positions({**k0, "relative_positions": "rope"}) == "rope"
    assert positions({**k0, "relative_positions": "alibi", "sinusoidal": True}) == "alibi, sinusoid"
    assert positions({**k0, "relative_positions": "t5", "absolute_positions": "learned"}) == (
        "t5, learned"
    )
    assert positions({**k0, "relative_positions": "none", "absolute_positions": "none"}) == "none"
    rope = {**k0, "relative_positions": "rope"}
    assert not _no_positions(rope) and not _absolute({**rope, "sinusoidal": True})
    assert _no_positions(k0) and _absolute({**k0, "sinusoidal": True})
    assert not is_reference({**REFERENCE, "absolute_positions": "learned"})


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
    verdicts = judge_claims(rows, reference, compared)
    assert [v.verdict for v in verdicts] == [HOLDS, HOLDS]
    collapse, flat = verdicts
    assert collapse.claim.startswith("without any position information")
    assert "none: 30.0 ± 0.2 [29.7, 30.4] (3 seeds; 3 paired), Δ -8.2" in collapse.line()
    assert "p 0.001 (max 0.001) *" in collapse.line()
    assert "k=2 a^K+a^V" in flat.evidence and "k=64 a^K+a^V" in flat.evidence
    assert flat.evidence.startswith("against k=16 a^K+a^V 38.2 ± 0.3")

    compared["k64"] = paired([0.01, 0.02, 0.03], [0.9, 1.1, 1.0])  # k = 64 better in every pair
    assert judge_claims(rows, reference, compared)[1].verdict == FAILS
    compared["k64"] = paired([0.01, 0.30, 0.03], [0.9, 0.2, 1.0])  # two pairs of three
    assert judge_claims(rows, reference, compared)[1].verdict == UNSURE
    compared["k0"] = paired([0.20, 0.30, 0.50], [-0.2, -0.1, 0.1])  # no collapse
    assert judge_claims(rows, reference, compared)[0].verdict == FAILS


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
    verdicts = {v.claim.split(" (")[0]: v.verdict for v in judge_claims(rows, reference, compared)}
    assert verdicts == {
        "a^K alone is enough": HOLDS,
        "a^V alone is a little weaker": UNSURE,
        "relative positions match or beat absolute ones": HOLDS,
        "adding the sinusoid to relative positions gains nothing": HOLDS,
    }
    compared["values"] = paired([0.01, 0.04], [-0.5, -0.6])
    compared["abs"] = paired([0.01, 0.02], [1.0, 1.3])  # absolute better in every pair
    verdicts = {v.claim.split(" (")[0]: v.verdict for v in judge_claims(rows, reference, compared)}
    assert verdicts["a^V alone is a little weaker"] == HOLDS
    assert verdicts["relative positions match or beat absolute ones"] == FAILS

    # One-sided claims: a pair significant in the direction the claim allows does not unsettle it,
    # one in the direction it excludes does, and every pair there refutes it.
    def verdict(claim: str, setting: str, comparison: Comparison) -> str:
        found = judge_claims(rows, reference, {**compared, setting: comparison})
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
    assert judge_claims(rows, rows[1], {"k0": paired([0.001], [-8.0])}) == []


WORDS = "a man woman dog child rides runs sits on the red blue big small bike street park".split()


def test_the_length_report_judges_unseen_lengths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Both models translate the short sources perfectly; on the long ones (longer than the
    # training cap) the absolute model loses every second word, the relative one keeps them.
    short = [" ".join(WORDS[i : i + 4]) for i in range(12)]
    long = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(12)]
    data = tmp_path / "tiny"
    data.mkdir()
    for lang in ("en", "de"):
        (data / f"test.{lang}").write_text("\n".join(short + long) + "\n")
    proto = train_bpe(short + long + WORDS, vocab_size=40, character_coverage=1.0)
    cfg = asdict(DataConfig(root=str(data), test_split="test", max_train_source_tokens=12))
    sweep = tmp_path / "sweep"
    for positions_name, model in (
        ("relative_k16", {**REFERENCE, "sinusoidal": False}),
        ("absolute", {"max_relative_position": 0, "sinusoidal": True}),
    ):
        for seed in (1, 2):
            run = sweep / f"positions={positions_name},train.seed={seed}"
            (run / ".hydra").mkdir(parents=True)
            overrides = [f"positions={positions_name}", f"train.seed={seed}"]
            (run / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
            config = {"data": cfg, "model": model, "train": {"seed": seed}}
            (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
            (run / "train_summary.json").write_text(json.dumps({"test_bleu": 50.0}))
            (run / "checkpoints").mkdir()
            torch.save({"model": {}, "bpe_model": proto}, run / "checkpoints" / "last.pt")
            hyps = short + (
                long if model["sinusoidal"] is False else [" ".join(s.split()[::2]) for s in long]
            )
            (run / "hyp_test.txt").write_text("\n".join(hyps) + "\n")

    assert main(["--by-length", "--samples", "300", str(sweep)]) == 0
    report = (sweep / "length_report.md").read_text()
    past = report.split("## Past the training lengths")[1].split("## The paper's claims")[0]
    table = [line for line in past.splitlines() if line.startswith("| model.")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    rows = {row[1]: row[2:] for row in cells}  # by positions: seeds, BLEU, Δ, p per seed pair
    assert rows["sinusoid"] == ["2", "6.9 ± 0.0 [6.9, 6.9]", "(baseline)", ""]
    relative = rows["k=16 a^K+a^V"]
    assert relative[:3] == ["2", "100.0 ± 0.0 [100.0, 100.0]", "+93.1"]
    assert [float(p) < 0.05 for p in relative[3].split(" / ")] == [True, True]  # each seed pair
    claim = report.split("## The paper's claims")[1]
    assert "relative positions carry over to sources longer than any seen in training" in claim
    tokenizer = Tokenizer.from_proto(proto)
    unseen = sum(len(tokenizer.encode(s)) > 12 for s in short + long)
    assert unseen >= 12  # the long ones at least
    assert f": holds. BLEU on the {unseen} test sentences longer than 12 BPE tokens: " in claim
    assert "sinusoid 6.9 against k=16 a^K+a^V 100.0 (2 seed pairs), Δ -93.1, p " in claim
    main_report = (sweep / "report.md").read_text()  # the full test set: absolute is worse too
    assert "relative positions match or beat absolute ones" in main_report
    # Both reports wrote their verdicts as data; the page over sweeps gathers them, claim by claim.
    assert main(["--claims", str(tmp_path)]) == 0
    page = (tmp_path / "claims.md").read_text()
    assert (
        "| relative positions match or beat absolute ones (paper: +0.3 En-De, +0.5 En-Fr) "
        "| sweep | holds |" in page
    )
    assert f"| {UNSEEN_CLAIM} | sweep | holds |" in page
    assert "| a^K alone is enough (paper: 25.8, as with both terms) | - | not judged" in page
    assert f"- sweep: holds. BLEU on the {unseen} test sentences longer than 12 BPE tokens" in page
