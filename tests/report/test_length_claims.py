"""The claims a length report judges: on unseen lengths (runs trained with a cap on source
length, past it) and on long sentences (runs without a cap, the last length bucket)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

import rpr_nmt.data
from rpr_nmt.cli.report import main
from rpr_nmt.config import DataConfig
from rpr_nmt.data import Tokenizer
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.report.claims import UNSEEN_CLAIM

from .run_folders import write_run_folder

REFERENCE = {"max_relative_position": 16, "relative_keys": True, "relative_values": True}
WORDS = "a man woman dog child rides runs sits on the red blue big small bike street park".split()


def two_model_sweep(
    tmp_path: Path, short: list[str], long: list[str], **data: int
) -> tuple[Path, bytes]:
    """tmp_path/sweep: Shaw k = 16 and the sinusoid, seeds 1 and 2, on a test set of `short` then
    `long` sources (also their references); both translate the short ones, and on the long ones
    the sinusoid loses every second word. Returns the sweep and its BPE model."""
    corpus = tmp_path / "tiny"
    corpus.mkdir()
    for lang in ("en", "de"):
        (corpus / f"test.{lang}").write_text("\n".join(short + long) + "\n")
    proto = train_bpe(short + long + WORDS, vocab_size=40, character_coverage=1.0)
    cfg = asdict(DataConfig(root=str(corpus), test_split="test", **data))
    sweep = tmp_path / "sweep"
    for name, model in (
        ("relative_k16", {**REFERENCE, "sinusoidal": False}),
        ("absolute", {"max_relative_position": 0, "sinusoidal": True}),
    ):
        for seed in (1, 2):
            lost = [" ".join(s.split()[::2]) for s in long] if model["sinusoidal"] else long
            config = {"data": cfg, "model": model, "train": {"seed": seed}}
            overrides = [f"positions={name}", f"train.seed={seed}"]
            write_run_folder(sweep, overrides, config, {"test_bleu": 50.0}, hyps=short + lost,
                             bpe=proto)  # fmt: skip
    return sweep, proto


def test_the_length_report_judges_unseen_lengths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # Both models translate the short sources perfectly; on the long ones (longer than the
    # training cap) the absolute model loses every second word, the relative one keeps them.
    short = [" ".join(WORDS[i : i + 4]) for i in range(12)]
    long = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(12)]
    sweep, proto = two_model_sweep(tmp_path, short, long, max_train_source_tokens=12)

    reads: list[str] = []  # every read of a split of the corpus, through the report's CorpusText
    read = rpr_nmt.data.read_parallel_text

    def counted(cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
        reads.append(split)
        return read(cfg, split)

    monkeypatch.setattr(rpr_nmt.data, "read_parallel_text", counted)
    assert main(["--by-length", "--samples", "300", str(sweep)]) == 0
    assert reads == ["test"]  # both reports and all their comparisons share one read
    report = (sweep / "length_report.md").read_text()
    past = report.split("## Past the training lengths")[1].split("## The claims")[0]
    table = [line for line in past.splitlines() if line.startswith("| ")][1:]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table]
    rows = {row[0]: row[1:] for row in cells}  # by label: seeds, BLEU, Δ, p per seed pair
    assert rows["sinusoid"] == ["2", "6.9 ± 0.0 [6.9, 6.9]", "(baseline)", ""]
    relative = rows["Shaw k = 16"]
    assert relative[:3] == ["2", "100.0 ± 0.0 [100.0, 100.0]", "+93.1"]
    assert [float(p) < 0.05 for p in relative[3].split(" / ")] == [True, True]  # each seed pair
    claim = report.split("## The claims")[1]
    assert "relative positions carry over to sources longer than any seen in training" in claim
    tokenizer = Tokenizer.from_proto(proto)
    unseen = sum(len(tokenizer.encode(s)) > 12 for s in short + long)
    assert unseen >= 12  # the long ones at least
    assert f": holds. BLEU on the {unseen} test sentences longer than 12 BPE tokens: " in claim
    assert "sinusoid at 6.9 against Shaw k = 16 at 100.0 (2 seed pairs), Δ -93.1, p " in claim
    # The same comparison the other way round: Shaw k = 16 carries over better than the sinusoid.
    assert (
        "- **relative methods carry over to sources longer than any seen in training better than "
        "absolute ones: Shaw k = 16 against the sinusoid (Rosendahl et al. 2019: +4.4 to 11.9% "
        "BLEU; Neishi & Yoshinaga 2019)**: holds." in claim
    )
    assert "against the learned table" not in claim  # the sweep has none
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


def test_without_a_training_cap_the_last_bucket_judges_the_claims_on_long_sentences(tmp_path):
    # News-like: no cap on training lengths. Both translate the short sources; on the long ones
    # (the last bucket, from 13 BPE tokens) the sinusoid loses every second word.
    short = [" ".join(WORDS[i : i + 3]) for i in range(12)]
    long = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(12)]
    sweep, proto = two_model_sweep(tmp_path, short, long)
    tokenizer = Tokenizer.from_proto(proto)
    longest_short = max(len(tokenizer.encode(s)) for s in short)
    assert longest_short < 13 <= min(len(tokenizer.encode(s)) for s in long)

    assert main(["--by-length", "--bounds", "1,13", "--samples", "300", str(sweep)]) == 0
    report = (sweep / "length_report.md").read_text()
    assert "## Past the training lengths" not in report
    section = report.split("## Long sentences")[1].split("## The claims")[0]
    assert "on the 12 test sentences whose source has at least 13 BPE tokens" in section
    rows = {line.split("|")[1].strip(): line for line in section.splitlines()[1:]
            if line.startswith("| ") and "---" not in line}  # fmt: skip
    assert "| (baseline) |" in rows["sinusoid"] and "+" in rows["Shaw k = 16"]
    claim = report.split("## The claims")[1]
    assert (
        "- **relative positions beat absolute ones on long sentences: Shaw k = 16 against the "
        "sinusoid (Rosendahl et al. 2019: relative positions gain most on long sentences)**: "
        "holds. BLEU on the 12 test sentences of at least 13 BPE tokens: Shaw k = 16 at 100.0 "
        "against sinusoid at 0.5 (2 seed pairs)" in claim
    )
    assert "carry over to sources longer than any seen" not in claim  # no cap: none judged
    assert main(["--claims", str(tmp_path)]) == 0
    page = (tmp_path / "claims.md").read_text()
    assert "| relative positions beat absolute ones on long sentences: Shaw k = 16" in page
    assert "RoPE against the sinusoid (Rosendahl et al. 2019: relative positions gain most on " \
        "long sentences) | - | not judged" in page  # fmt: skip
