"""The published runs' hypotheses re-score to the scores they claim: each hyp_<split>.txt under
results/<sweep>/<run>/, scored afresh against the references of the run's corpus, gives the BLEU,
chrF and tokenised BLEU of its eval_<split>.json and of its train_summary.json (which the reports
table), one hypothesis per reference; and OpenNMT-py's hypotheses in results/peer_wmt_news_en_de
re-score to the two-decimal BLEU and chrF of its score_<set>.json (scripts/peer_news.sh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sacrebleu.metrics import CHRF

from rpr_nmt.data.textfile import read_lines
from rpr_nmt.evaluate import corpus_bleu, tokenized_bleu
from rpr_nmt.report.runs import CorpusText, find_runs
from tests.conftest import REPO

# make test re-scores the two newstest2014 figures the README quotes: the news preset's own run and
# the peer's chosen run (3,003 sentences each); pytest -m slow every published run.
PRESET_RUN = (
    "ablate_k_wmt_news_en_de/data=wmt_news_en_de,model.max_relative_position=16,train.seed=1"
)
PEER_CHOICE = "P4/score_newstest2014"
RUNS = sorted(
    {p.parent for p in (REPO / "results").glob("*/*/hyp_*.txt") if (p.parent / ".hydra").is_dir()}
)


def _param(path: Path, name: str, in_make_test: bool):
    return pytest.param(path, id=name, marks=[] if in_make_test else [pytest.mark.slow])


PUBLISHED = [
    _param(p, f"{p.parent.name}/{p.name}", f"{p.parent.name}/{p.name}".startswith(PRESET_RUN + ","))
    for p in RUNS
]


def _scores(hyps: list[str], refs: list[str], tgt_lang: str) -> dict[str, float]:
    """BLEU, chrF and tokenised BLEU as rpr_nmt.evaluate.score_corpus gives them (without TER)."""
    return {
        "bleu": corpus_bleu(hyps, refs, tgt_lang),
        "chrf": float(CHRF().corpus_score(hyps, [refs]).score),
        "tokenized_bleu": tokenized_bleu(hyps, [refs])[0],
    }


@pytest.mark.parametrize("folder", PUBLISHED)
def test_published_hypotheses_rescore_to_their_claimed_scores(
    folder: Path, shared_data, monkeypatch
):
    monkeypatch.setenv("RPR_NMT_DATA", str(shared_data))
    (run,) = find_runs(folder)
    data, text = run.data_config(), CorpusText()
    prefixes = {data.valid_split: "valid_", data.test_split: "test_"}  # train_summary.json's
    for hyp_file in sorted(run.path.glob("hyp_*.txt")):
        split = hyp_file.stem.removeprefix("hyp_")
        refs, hyps = text.references(run, split), read_lines(hyp_file)
        assert len(hyps) == len(refs), f"{hyp_file}: {len(hyps)} lines, {len(refs)} references"
        scores = _scores(hyps, refs, data.tgt_lang)
        where = f"{hyp_file} re-scored"
        claimed = json.loads((run.path / f"eval_{split}.json").read_text())
        assert claimed["sentences"] == len(refs), where
        for key, value in scores.items():
            assert claimed[key] == pytest.approx(value, abs=1e-9), f"{where}: {key}"
        prefix = prefixes.get(split)
        if prefix and f"{prefix}bleu" in run.summary:
            for key, value in scores.items():
                assert run.summary[f"{prefix}{key}"] == pytest.approx(value, abs=1e-9), where


PEER_RUNS = [
    _param(p, f"{p.parent.name}/{p.stem}", f"{p.parent.name}/{p.stem}" == PEER_CHOICE)
    for p in sorted((REPO / "results" / "peer_wmt_news_en_de").glob("*/score_*.json"))
]


@pytest.mark.parametrize("score", PEER_RUNS)
def test_the_peers_hypotheses_rescore_to_their_claimed_scores(score: Path, shared_data):
    claimed = json.loads(score.read_text())
    news_set = score.stem.removeprefix("score_")  # newstest2013 or newstest2014
    refs = read_lines(shared_data / "wmt_news_ende" / f"{news_set}.de.gz")
    hyp_file = score.parent / f"hyp_{news_set}.txt"
    hyps = read_lines(hyp_file)
    assert len(hyps) == len(refs), f"{hyp_file}: {len(hyps)} lines, {len(refs)} references"
    scores = _scores(hyps, refs, "de")
    assert round(scores["bleu"], 2) == claimed["bleu"], f"{hyp_file} re-scored: bleu"
    assert round(scores["chrf"], 2) == claimed["chrf"], f"{hyp_file} re-scored: chrf"
