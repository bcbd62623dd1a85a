"""The published sweeps under results/: every committed report.md (and length_report.md) with its
verdicts is what `rpr-nmt-report results/<sweep>` rebuilds from the committed run files and the
corpus alone, and results/claims.md is what `rpr-nmt-report --claims results` gathers from them."""

from __future__ import annotations

import shutil

import pytest

from rpr_nmt.report import claims_page, write_length_report, write_report
from rpr_nmt.report.lengths import LENGTH_CLAIMS_FILE
from rpr_nmt.report.sweep import CLAIMS_FILE
from tests.conftest import REPO

PUBLISHED = sorted(p.parent for p in (REPO / "results").glob("*/report.md"))
# make test rebuilds one sweep of each kind of report (the k plot, the settings plot, the length
# report with its placement table); pytest -m slow rebuilds every published folder.
IN_MAKE_TEST = {
    "ablate_k_multi30k_en_de",
    "compare_positions_multi30k_en_de",
    "where_positions_lengths_multi30k_en_de",
}
SWEEPS = [
    pytest.param(p, id=p.name, marks=[] if p.name in IN_MAKE_TEST else [pytest.mark.slow])
    for p in PUBLISHED
]


@pytest.mark.parametrize("sweep", SWEEPS)
def test_the_committed_report_is_rebuilt(sweep, shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("RPR_NMT_DATA", str(shared_data))
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)  # sacrebleu's default seed, as published
    copy = tmp_path / sweep.name
    written = ("*.md", "*.png", CLAIMS_FILE, LENGTH_CLAIMS_FILE)
    shutil.copytree(sweep, copy, ignore=shutil.ignore_patterns(*written))
    text, _ = write_report(copy)
    assert text == (sweep / "report.md").read_text(), f"rerun: rpr-nmt-report {sweep}"
    if (sweep / "length_report.md").is_file():
        lengths = write_length_report(copy)
        assert lengths == (sweep / "length_report.md").read_text()
    for verdicts in (CLAIMS_FILE, LENGTH_CLAIMS_FILE):
        assert (copy / verdicts).is_file() == (sweep / verdicts).is_file(), verdicts
        if (copy / verdicts).is_file():
            assert (copy / verdicts).read_text() == (sweep / verdicts).read_text()


def test_the_committed_claims_page_is_gathered():
    page = REPO / "results" / "claims.md"
    assert page.read_text() == claims_page(REPO / "results"), "rerun: make results"


def _files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("options", [[], ["--by-length"]], ids=["report", "by-length"])
def test_a_report_without_its_corpus_fails_and_writes_nothing(
    options, tmp_path, monkeypatch, capsys
):
    # Issue 31: without the corpus every p-value became "-" and "holds" became "cannot tell",
    # written over the committed report with exit status 0.
    from rpr_nmt.cli.report import main

    sweep = tmp_path / "ablate_k_multi30k_en_de"
    shutil.copytree(REPO / "results" / sweep.name, sweep)
    before = _files(sweep)
    monkeypatch.delenv("RPR_NMT_DATA", raising=False)
    monkeypatch.chdir(tmp_path)  # the data root falls back to data/multi30k, not here
    assert main([*options, str(sweep)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rpr-nmt-report: the corpus of ")
    assert "data/multi30k" in err and "set RPR_NMT_DATA to the folder holding multi30k/" in err
    assert _files(sweep) == before
