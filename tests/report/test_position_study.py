"""The position study's claims end to end: rpr-nmt-report on a sweep of every position method,
laid out as experiment=compare_positions and --collect leave it, with made-up hypotheses whose
verdicts are known.

The tiny corpus "translates" by copying: 12 short sources (4 words) and 12 long ones (17 words,
past the training cap of 12). Past the cap the sinusoid, ALiBi and T5 keep every second word,
the learned table every fourth, Shaw k = 16 and RoPE every word; 'none' keeps every second word of
the short sources too.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import yaml

from rpr_nmt.cli.report import main
from rpr_nmt.config import DataConfig, ModelConfig
from rpr_nmt.evaluate import score_corpus
from tests.conftest import REPO

from .run_folders import write_run_folder

WORDS = "a man woman dog child rides runs sits on the red blue big small bike street park".split()
SHORT = [" ".join(WORDS[i : i + 4]) for i in range(12)]
LONG = [" ".join(WORDS[i:] + WORDS[:i]) for i in range(12)]
CAP = 12  # data.max_train_source_tokens: every long source is past it


def keep_every(n: int, sentence: str) -> str:
    return " ".join(w for i, w in enumerate(sentence.split()) if i % n == 0)


# positions=<name> (configs/positions/) -> (kept every n-th word of short, of long sources).
KEPT = {
    "absolute": (1, 2),
    "learned": (1, 4),
    "relative": (1, 1),
    "rope": (1, 1),
    "alibi": (1, 2),
    "t5": (1, 2),
    "none": (2, 4),
}


def write_corpus(root: Path) -> Path:
    """The tiny corpus's test split (copies: source and reference alike) in `root`/tiny."""
    (root / "tiny").mkdir()
    for lang in ("en", "de"):
        (root / "tiny" / f"test.{lang}").write_text("\n".join(SHORT + LONG) + "\n")
    return root / "tiny"


def write_study(sweep: Path, data: Path) -> None:
    """Two seeds of every method in KEPT, each run folder as --collect leaves it."""
    data_cfg = asdict(DataConfig(root=str(data), test_split="test", max_train_source_tokens=CAP))
    lengths = [len(s.split()) for s in SHORT + LONG]  # source lengths, in words
    for name, (short_n, long_n) in KEPT.items():
        yaml_path = REPO / "configs" / "positions" / f"{name}.yaml"
        model = {**asdict(ModelConfig()), **yaml.safe_load(yaml_path.read_text())}
        hyps = [keep_every(short_n, s) for s in SHORT] + [keep_every(long_n, s) for s in LONG]
        summary = {"test_bleu": score_corpus(hyps, SHORT + LONG, "").bleu}
        for seed in (1, 2):
            config = {"data": data_cfg, "model": model, "train": {"seed": seed}}
            write_run_folder(
                sweep, [f"positions={name}", f"train.seed={seed}"], config, summary,
                hyps=hyps, src_lengths=lengths,
            )  # fmt: skip


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The results folder holding the study, its reports and the claims page written."""
    root = tmp_path_factory.mktemp("study")
    results = root / "results"
    write_study(results / "compare_positions_tiny", write_corpus(root))
    sweep = str(results / "compare_positions_tiny")
    assert main(["--by-length", "--samples", "300", sweep, "--claims", str(results)]) == 0
    return results


def verdicts(text: str) -> dict[str, str]:
    """Each '- **claim**: verdict. evidence' line of a report's claims section, by claim."""
    lines = text.split("## The claims")[1].splitlines()
    found = [
        line.removeprefix("- **").split("**: ", 1) for line in lines if line.startswith("- **")
    ]
    return dict(found)


def test_the_tables_name_every_method(study: Path):
    report = (study / "compare_positions_tiny" / "report.md").read_text()
    table = report.split("## Test scores")[0].splitlines()
    names = [line.split(" | ")[0].removeprefix("| ") for line in table if line.startswith("| ")]
    assert names[1:] == [  # the paper's settings in its tables' order, then the later methods
        "none", "sinusoid", "Shaw k = 16", "learned", "RoPE", "ALiBi", "T5 buckets",
    ]  # fmt: skip
    assert "Baseline: Shaw k = 16." in report
    lengths = (study / "compare_positions_tiny" / "length_report.md").read_text()
    assert "| T5 buckets | 2 |" in lengths and "minus the baseline (sinusoid)" in lengths


def test_the_whole_test_set_claims_against_their_baselines(study: Path):
    found = verdicts((study / "compare_positions_tiny" / "report.md").read_text())

    def claim(start: str) -> str:
        (text,) = [text for claim, text in found.items() if claim.startswith(start)]
        return text

    rope = claim("RoPE matches or beats the sinusoid (Su et al., RoFormer, Table 1: 27.5 against")
    assert rope.startswith("holds. against sinusoid (")
    assert "RoPE: " in rope and rope.endswith("*")  # better in both seed pairs
    gumma = claim("without any position information an encoder-decoder is not viable")
    assert gumma.startswith("holds. against sinusoid (") and "none: " in gumma
    assert gumma.endswith("*")
    collapse = claim("without any position information the model collapses (paper: 12.5")
    assert collapse.startswith("holds. against Shaw k = 16 (")
    absolute = claim("relative positions match or beat absolute ones (paper: +0.3 En-De")
    assert absolute.startswith("holds. against Shaw k = 16 (") and "sinusoid: " in absolute
    assert len(found) == 4  # no k, no term and no 'both' setting: those claims are not judged


def test_each_relative_method_past_the_cap_against_the_sinusoid_and_the_learned_table(
    study: Path,
):
    found = verdicts((study / "compare_positions_tiny" / "length_report.md").read_text())
    carry = "relative methods carry over to sources longer than any seen in training better than "
    source = " (Rosendahl et al. 2019: +4.4 to 11.9% BLEU; Neishi & Yoshinaga 2019)"
    by_pair = {
        claim.removeprefix(carry + "absolute ones: ").removesuffix(source): text.split(". ")[0]
        for claim, text in found.items()
        if claim.startswith(carry)
    }
    assert by_pair == {
        "Shaw k = 16 against the sinusoid": "holds",
        "Shaw k = 16 against the learned table": "holds",
        "RoPE against the sinusoid": "holds",
        "RoPE against the learned table": "holds",
        "ALiBi against the sinusoid": "does not hold",  # the same hypotheses: p = 1
        "ALiBi against the learned table": "holds",
        "T5 buckets against the sinusoid": "does not hold",
        "T5 buckets against the learned table": "holds",
    }
    t5 = found[carry + "absolute ones: T5 buckets against the learned table" + source]
    assert ": T5 buckets at 0.5 against learned at 0.2 (2 seed pairs), Δ +0.3, p " in t5
    assert t5.endswith("*")  # every seed pair significant
    press = "ALiBi extrapolates to sources longer than any seen in training at least as well as "
    assert found[press + "the sinusoid (Press et al. 2022)"].startswith(
        "holds. BLEU on the 12 test sentences longer than 12 BPE tokens: ALiBi at "
    )
    unseen = [claim for claim in found if claim.startswith("relative positions carry over")]
    assert [found[claim].split(".")[0] for claim in unseen] == ["holds"]


def test_the_claims_page_lists_each_method_under_its_claim(study: Path):
    page = (study / "claims.md").read_text()
    table = page.split("## Evidence")[0]
    assert (
        "absolute ones: ALiBi against the sinusoid (Rosendahl et al. 2019: +4.4 to 11.9% BLEU; "
        "Neishi & Yoshinaga 2019) | compare_positions_tiny | does not hold |" in table
    )
    assert (
        "| k >= 2 is flat: no k from 2 on differs from k = 16 (paper: 25.8 to 25.9) | - |" in table
    )
    assert "not judged" not in table.split("RoPE matches or beats the sinusoid")[1].split("\n")[0]


def test_a_where_positions_sweep_names_each_stack_and_keeps_the_baseline(tmp_path: Path):
    """experiment=where_positions beside the study's rows with the methods in both stacks: each
    one-stack row says which stack, the baseline stays Shaw k = 16 in both, and the claims judge
    only the both-stack rows (one-stack ones would otherwise read as 'sinusoid' or the baseline)."""
    study = tmp_path / "results" / "compare_positions_tiny"
    write_study(study, write_corpus(tmp_path))
    for name in ("absolute", "relative"):
        for stacks in ("encoder", "decoder"):
            for seed in (1, 2):
                both = study / f"positions={name},train.seed={seed}"
                run = study / f"model.positions_in={stacks},positions={name},train.seed={seed}"
                run.mkdir()
                for path in both.rglob("*"):
                    if path.is_file():
                        (run / path.relative_to(both)).parent.mkdir(exist_ok=True)
                        (run / path.relative_to(both)).write_bytes(path.read_bytes())
                config = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
                config["model"]["positions_in"] = stacks
                (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
                (run / "hyp_test.txt").write_text("\n".join(SHORT + LONG) + "\n")  # perfect
    assert main(["--samples", "300", str(study)]) == 0
    report = (study / "report.md").read_text()
    table = report.split("## Test scores")[0].splitlines()
    names = [line.split(" | ")[0].removeprefix("| ") for line in table if line.startswith("| ")]
    assert names[1:] == [
        "none", "sinusoid", "Shaw k = 16", "sinusoid (encoder only)", "Shaw k = 16 (encoder only)",
        "sinusoid (decoder only)", "Shaw k = 16 (decoder only)", "learned", "RoPE", "ALiBi",
        "T5 buckets",
    ]  # fmt: skip
    assert "Baseline: Shaw k = 16." in report
    absolute = [text for claim, text in verdicts(report).items() if claim.startswith("relative")]
    assert absolute and all("only)" not in text for text in absolute)
