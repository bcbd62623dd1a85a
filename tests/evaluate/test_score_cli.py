"""rpr-nmt-score end to end on the tiny checkpoints of tests/evaluate/tiny.py, as subprocesses."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rpr_nmt.checkpoint import load_for_inference
from rpr_nmt.config import DecodeConfig
from rpr_nmt.decode.forced import score_references
from tests.evaluate.tiny import cli


def test_score_a_split_matches_the_library_and_writes_its_files(tiny_run, tmp_path):
    run_dir = tmp_path / "run"
    out = cli(
        "score", f"checkpoint={tiny_run['a']}", "by_length=true", "bounds=[1,6,9]",
        f"hydra.run.dir={run_dir}", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = (run_dir / "score_test.txt").read_text(encoding="utf-8").splitlines()
    record = json.loads((run_dir / "score_test.json").read_text())
    model, tokenizer, _ = load_for_inference(str(tiny_run["a"]))
    src = (tiny_run["data"] / "test.en").read_text(encoding="utf-8").splitlines()
    ref = (tiny_run["data"] / "test.de").read_text(encoding="utf-8").splitlines()
    expected = score_references(model, tokenizer, src, ref, DecodeConfig())
    assert len(lines) == 7
    for line, sentence in zip(lines, expected):
        total, tokens = line.split(" ||| ")
        assert float(total) == pytest.approx(sentence.total, abs=1e-3)
        assert [float(x) for x in tokens.split()] == pytest.approx(sentence.logprobs, abs=1e-3)
    n_tokens = sum(len(s.logprobs) for s in expected)
    ppl = math.exp(-sum(s.total for s in expected) / n_tokens)
    assert record["tokens"] == n_tokens and record["perplexity"] == pytest.approx(ppl, rel=1e-4)
    assert f"perplexity = {ppl:.4f}" in out.stdout
    assert "| source length | perplexity | tokens | sentences |" in out.stdout
    assert record["buckets"]["labels"] == ["1-5", "6-8", "9+"]
    assert sum(b["tokens"] for b in record["by_target_position"]) == n_tokens
    assert sum(b["sentences"] for b in record["by_source_length"]) == 7


def test_score_a_file_pair_and_stdin_pairs_agree(tiny_run, tmp_path):
    (tmp_path / "in.en").write_text("a man rides.\nthe dog.\n", encoding="utf-8")
    (tmp_path / "in.de").write_text("ein mann fährt.\nder hund.\n", encoding="utf-8")
    ckpt = f"checkpoint={tiny_run['a']}"
    out = cli("score", ckpt, "source=in.en", "reference=in.de", "hydra.run.dir=a", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    stdin = "a man rides. ||| ein mann fährt.\nthe dog. ||| der hund.\n"
    out = cli("score", ckpt, "pairs=-", "hydra.run.dir=b", cwd=tmp_path, stdin=stdin)
    assert out.returncode == 0, out.stderr
    files = [(tmp_path / d / "score_pairs.txt").read_text(encoding="utf-8") for d in "ab"]
    assert files[0] == files[1] and len(files[0].splitlines()) == 2


@pytest.mark.parametrize(
    "args,stdin,message",
    [
        (["source=in.en", "reference=short.de"], "", "has 2 lines but reference=short.de has 1"),
        (["source=in.en", "reference=blank.de"], "", "blank.de: reference line 2 is empty"),
        (["pairs=-"], "a man. ||| \n", "stdin: reference line 1 is empty"),
        (["pairs=-"], "a man. ein mann.\n", "stdin line 1: no ' ||| '"),
        (["source=in.en"], "", "source= and reference= go together"),
        (["split=test", "pairs=-"], "", "give one input"),
        (["bounds=[5,1]"], "", "bounds=[5, 1]"),
        (["source=nothere.en", "reference=short.de"], "", "nothere.en"),
        (["pairs=-"], "", "stdin: no pairs to score"),  # probe K2: perplexity = nan, exit 0
        # Probe K8: the reference was "B ||| C", and a blank source was scored.
        (["pairs=-"], "a. ||| b.\nA ||| B ||| C\n", "stdin line 2: more than one ' ||| ' in"),
        (["pairs=-"], "a man. ||| ein mann.\n ||| der hund.\n", "stdin: source line 2 is empty"),
        (["source=blank.de", "reference=in.en"], "", "blank.de: source line 2 is empty"),
        # A line of no BPE token was scored as EOS alone (reference) or encoded as EOS (source).
        (["pairs=-"], "a man. ||| \u200b\n", "stdin: reference line 1 is empty (no BPE token"),
        (["source=in.en", "reference=ctrl.de"], "", "ctrl.de: reference line 2 is empty (no BPE"),
        (["pairs=-"], "a. ||| b.\n\x01\x02 ||| der hund.\n", "stdin: source line 2 is empty (no"),
    ],
    ids=["line_counts", "empty_reference", "empty_stdin_reference", "no_separator",
         "source_alone", "two_inputs", "bad_bounds", "missing_file", "no_pairs", "two_separators",
         "empty_stdin_source", "empty_source", "tokenless_stdin_reference",
         "tokenless_reference", "tokenless_stdin_source"],
)  # fmt: skip
def test_score_bad_input_is_one_line_and_exit_2(tiny_run, tmp_path, args, stdin, message):
    (tmp_path / "in.en").write_text("a man.\nthe dog.\n", encoding="utf-8")
    (tmp_path / "short.de").write_text("ein mann.\n", encoding="utf-8")
    (tmp_path / "blank.de").write_text("ein mann.\n \n", encoding="utf-8")
    (tmp_path / "ctrl.de").write_text("ein mann.\n\u200b\x01\n", encoding="utf-8")
    out = cli("score", f"checkpoint={tiny_run['a']}", *args, "hydra.run.dir=run", cwd=tmp_path,
              stdin=stdin)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and message in out.stderr
    assert out.stderr.strip().startswith("rpr-nmt-score: error:")
    assert len(out.stderr.strip().splitlines()) == 1


def test_score_is_exact_for_the_checkpoint_model(tiny_run):
    # The CLI's figures come from score_references; it equals a plain teacher-forced pass.
    model, tokenizer, _ = load_for_inference(str(tiny_run["a"]))
    [sentence] = score_references(model, tokenizer, ["a dog."], ["ein hund."], DecodeConfig())
    src = torch.tensor([tokenizer.encode("a dog.") + [tokenizer.eos_id]])
    ids = tokenizer.encode("ein hund.")
    with torch.no_grad():
        logits = model(src, torch.tensor([[tokenizer.bos_id] + ids]))
    lprobs = torch.log_softmax(logits[0], dim=-1)
    expected = [float(lprobs[t, y]) for t, y in enumerate(ids + [tokenizer.eos_id])]
    assert sentence.logprobs == pytest.approx(expected, abs=1e-5)


def test_score_encodes_each_line_once(tiny_run, tmp_path, monkeypatch):
    # The CLI's check for lines of no BPE token encoded every line before score_references did.
    from rpr_nmt.cli.score import run
    from rpr_nmt.config import ScoreJobConfig
    from rpr_nmt.data.tokenizer import Tokenizer

    (tmp_path / "pairs.txt").write_text("a man. ||| ein mann.\nthe dog. ||| der hund.\n", "utf-8")
    encoded = []
    original = Tokenizer.encode
    monkeypatch.setattr(Tokenizer, "encode", lambda self, t: encoded.append(t) or original(self, t))
    job = ScoreJobConfig(checkpoint=str(tiny_run["a"]), pairs=str(tmp_path / "pairs.txt"))
    run(job, str(tmp_path / "run"))
    assert sorted(encoded) == ["a man.", "der hund.", "ein mann.", "the dog."]
    assert len((tmp_path / "run" / "score_pairs.txt").read_text("utf-8").splitlines()) == 2
