"""Scores equal the sacrebleu command line's; compound splitting as tensor2tensor's script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rpr_nmt.evaluate import compound_split, paper_tokenize, score_corpus

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
