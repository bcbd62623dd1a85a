"""results/claims.md: every sweep's verdicts gathered claim by claim, from the files the reports
wrote (claims.json, length_claims.json), on constructed verdicts whose page is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpr_nmt.cli.report import main
from rpr_nmt.report.claims import ALL_CLAIMS, FAILS, HOLDS, UNSURE
from rpr_nmt.report.summary import claims_page, gather_verdicts
from rpr_nmt.report.verdicts import Verdict, load_verdicts, save_verdicts

COLLAPSE, FLAT, KEYS = ALL_CLAIMS[0], ALL_CLAIMS[1], ALL_CLAIMS[2]
UNSEEN = ALL_CLAIMS[-1]


def sweep(root: Path, name: str, verdicts: list[Verdict], file: str = "claims.json") -> None:
    (root / name).mkdir(exist_ok=True)
    save_verdicts(root / name / file, verdicts)


def test_verdicts_round_trip_and_none_leaves_no_file(tmp_path: Path):
    verdicts = [Verdict(COLLAPSE, HOLDS, "none: 30.3 ± 0.3, Δ -7.9, p 0.001 *")]
    save_verdicts(tmp_path / "claims.json", verdicts)
    assert load_verdicts(tmp_path / "claims.json") == verdicts
    save_verdicts(tmp_path / "claims.json", [])  # e.g. rebuilt with --significance none
    assert not (tmp_path / "claims.json").exists()


def test_the_page_groups_every_sweeps_verdict_under_its_claim(tmp_path: Path):
    sweep(tmp_path, "ablate_terms", [Verdict(COLLAPSE, HOLDS, "neither: 30.0"),
                                     Verdict(KEYS, UNSURE, "k=16 a^K: 38.0")])  # fmt: skip
    sweep(tmp_path, "ablate_k", [Verdict(FLAT, FAILS, "k=4: +0.6"), Verdict(COLLAPSE, HOLDS, "k0")])
    sweep(tmp_path, "length", [Verdict(UNSEEN, HOLDS, "long: +2")], file="length_claims.json")
    (tmp_path / "bleu_curve").mkdir()  # a results folder without verdicts is left out

    by_claim = gather_verdicts(tmp_path)
    assert list(by_claim)[: len(ALL_CLAIMS)] == list(ALL_CLAIMS)  # the paper's order
    assert [s for s, _ in by_claim[COLLAPSE]] == ["ablate_k", "ablate_terms"]
    page = claims_page(tmp_path)
    table = page.split("## Evidence")[0]
    assert f"| {COLLAPSE} | ablate_k | holds |\n|  | ablate_terms | holds |\n| {FLAT} |" in table
    assert f"| {FLAT} | ablate_k | does not hold |" in table
    assert f"| {KEYS} | ablate_terms | cannot tell at this budget |" in table
    assert f"| {UNSEEN} | length | holds |" in table
    assert f"| {ALL_CLAIMS[3]} | - | not judged: no published sweep bears on it yet |" in table
    evidence = page.split("## Evidence")[1]
    assert f"### {FLAT}\n\n- ablate_k: does not hold. k=4: +0.6\n" in evidence
    assert ALL_CLAIMS[3] not in evidence


def test_claims_without_reports_or_broken_files_are_named(tmp_path: Path, capsys):
    assert main(["--claims", str(tmp_path)]) == 2
    assert "no claims.json under" in capsys.readouterr().err
    (tmp_path / "ablate_k").mkdir()
    (tmp_path / "ablate_k" / "claims.json").write_text('{"claim": 1}')
    with pytest.raises(ValueError, match="ablate_k/claims.json: not a list of verdicts"):
        gather_verdicts(tmp_path)
    assert main(["--claims", str(tmp_path)]) == 2
    assert "rebuild it with rpr-nmt-report" in capsys.readouterr().err
