"""Scores equal the sacrebleu command line's; compound splitting as tensor2tensor's script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rpr_nmt.evaluate import compound_split, corpus_bleu, paper_tokenize, score_corpus

SACREBLEU = Path(sys.executable).parent / "sacrebleu"

REFS = [
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Ein Boston Terrier läuft über saftig-grünes Gras vor einem weißen Zaun.",
    "Ein Mädchen in einem Karateanzug bricht einen Stock mit einem Tritt.",
    "Fünf Leute in Winterjacken und mit Helmen stehen im Schnee mit Schneemobilen im Hintergrund.",
    'Leute reparieren das Dach eines Hauses. "Gut!", sagt der Mann.',
    "Ein Kind spielt im 3-4 cm tiefen Wasser.",
]
HYPS = [
    "Ein Mann mit orangefarbenem Hut starrt etwas an.",
    "Ein Boston Terrier rennt auf saftig-grünem Gras vor einem weißen Zaun.",
    "Ein Mädchen im Karate-Anzug zerbricht einen Stock mit einem Tritt.",
    "Fünf Personen in Winterjacken und Helmen stehen im Schnee, Schneemobile im Hintergrund.",
    'Leute reparieren das Dach eines Hauses. "Gut", sagt der Mann.',
    "",
]


def sacrebleu_cli(ref: Path, hyp: Path, *args: str) -> str:
    cmd = [str(SACREBLEU), str(ref), "-i", str(hyp), *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_compound_split_follows_get_ende_bleu():
    assert compound_split("Arbeits-markt") == "Arbeits ##AT##-##AT## markt"
    assert compound_split("a - b") == "a - b"  # a free-standing dash is not a compound
    assert compound_split("a-b-c") == "a ##AT##-##AT## b-c"  # perl's non-overlapping matches
    assert paper_tokenize("Karate-Anzug, 3-4 cm.") == "Karate ##AT##-##AT## Anzug , 3 - 4 cm ."


def test_scores_equal_the_sacrebleu_command_line(tmp_path):
    ref, hyp = write(tmp_path / "ref.de", REFS), write(tmp_path / "hyp.de", HYPS)
    scores = score_corpus(HYPS, REFS, "de")
    assert sacrebleu_cli(ref, hyp, "-b") == f"{scores.bleu:.1f}"
    assert float(sacrebleu_cli(ref, hyp, "-b", "-w", "6")) == pytest.approx(scores.bleu, abs=1e-6)
    assert json.loads(sacrebleu_cli(ref, hyp))["signature"] == scores.signature
    assert "tok:13a" in scores.signature
    chrf = float(sacrebleu_cli(ref, hyp, "-m", "chrf", "-b", "-w", "6"))
    assert chrf == pytest.approx(scores.chrf, abs=1e-6)
    assert scores.sentences == len(REFS)


def test_tokenized_bleu_equals_the_command_line_on_tokenized_files(tmp_path):
    ref = write(tmp_path / "ref.tok", [paper_tokenize(r) for r in REFS])
    hyp = write(tmp_path / "hyp.tok", [paper_tokenize(h) for h in HYPS])
    scores = score_corpus(HYPS, REFS, "de")
    cli = float(sacrebleu_cli(ref, hyp, "--tokenize", "none", "-b", "-w", "6", "--force"))
    assert cli == pytest.approx(scores.tokenized_bleu, abs=1e-6)
    assert "##AT##" in scores.tokenized_signature and "tok:none" in scores.tokenized_signature


def test_compound_splitting_credits_partly_matching_compounds():
    scores = score_corpus(["Der Arbeits-markt wächst ."], ["Der Arbeits-platz wächst ."], "de")
    assert scores.tokenized_bleu > scores.bleu


def test_perfect_and_misaligned_corpora():
    perfect = score_corpus(REFS, REFS, "de")
    assert perfect.bleu == pytest.approx(100.0) and perfect.tokenized_bleu == pytest.approx(100.0)
    with pytest.raises(ValueError, match="line-aligned"):
        score_corpus(HYPS[:2], REFS, "de")


@pytest.mark.parametrize("lang", ["de", "", "zh"])
def test_bleu_alone_is_score_corpuss_bleu(lang):
    assert corpus_bleu(HYPS, REFS, lang) == score_corpus(HYPS, REFS, lang).bleu
    with pytest.raises(ValueError, match="line-aligned"):
        corpus_bleu(HYPS[:2], REFS, lang)


def test_ter_on_a_constructed_case_and_against_the_command_line(tmp_path):
    # One substitution in four reference words: TER = 1 / 4.
    scores = score_corpus(["a b c d"], ["a b x d"], "de")
    assert scores.ter == pytest.approx(25.0) and scores.ter_signature.startswith("nrefs:1|")
    ref, hyp = write(tmp_path / "ref.de", REFS), write(tmp_path / "hyp.de", HYPS)
    ter = float(sacrebleu_cli(ref, hyp, "-m", "ter", "-b", "-w", "6"))
    assert ter == pytest.approx(score_corpus(HYPS, REFS, "de").ter, abs=1e-6)


def test_a_second_reference_set_credits_what_the_first_misses(tmp_path):
    # Each hypothesis matches exactly one of its two references: every metric is perfect with
    # both sets, and neither set alone gives that.
    hyps = ["the cat sat on the mat .", "a dog runs in the park ."]
    first = ["the cat sat on the mat .", "one dog is running through a park ."]
    second = ["a cat was sitting on a rug .", "a dog runs in the park ."]
    both = score_corpus(hyps, first, "en", extra_refs=[second])
    assert (both.bleu, both.chrf, both.ter) == pytest.approx((100.0, 100.0, 0.0))
    assert both.tokenized_bleu == pytest.approx(100.0)
    for signature in (both.signature, both.chrf_signature, both.ter_signature):
        assert signature.startswith("nrefs:2|")
    alone = score_corpus(hyps, first, "en")
    assert alone.bleu < 100.0 and alone.ter > 0.0
    r1, r2 = write(tmp_path / "r1", first), write(tmp_path / "r2", second)
    hyp = write(tmp_path / "hyp", hyps)
    cmd = [str(SACREBLEU), str(r1), str(r2), "-i", str(hyp), "-m", "bleu", "chrf", "ter", "-b"]
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert out == pytest.approx([both.bleu, both.chrf, both.ter], abs=0.05)
    with pytest.raises(ValueError, match="reference set 2"):
        score_corpus(hyps, first, "en", extra_refs=[second[:1]])
