"""rpr-nmt-evaluate and rpr-nmt-translate end to end on a tiny checkpoint, run as subprocesses
(each imports torch afresh: seconds)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rpr_nmt.checkpoint import TrainingState, save_checkpoint
from rpr_nmt.config import DataConfig, ModelConfig, TrainJobConfig
from rpr_nmt.data.bpe import train_bpe
from rpr_nmt.model import build_model

REPO = Path(__file__).resolve().parents[2]
SACREBLEU = Path(sys.executable).parent / "sacrebleu"
WORDS_EN = (
    "a man woman dog child rides runs sits on the red blue big small bike street park".split()
)
WORDS_DE = "ein mann frau hund kind fährt läuft sitzt auf der rote blaue große kleine rad"
WORDS_DE = (WORDS_DE + " straße park").split()
TINY = ModelConfig(
    d_model=32, n_heads=2, d_ff=64, n_encoder_layers=2, n_decoder_layers=2,
    max_relative_position=4, pre_norm=True,
)  # fmt: skip


def corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    g = torch.Generator().manual_seed(seed)
    src, tgt = [], []
    for _ in range(n):
        idx = torch.randint(0, len(WORDS_EN), (int(torch.randint(2, 9, (1,), generator=g)),))
        src.append(" ".join(WORDS_EN[i] for i in idx.tolist()) + ".")
        tgt.append(" ".join(WORDS_DE[i] for i in idx.tolist()) + ".")
    return src, tgt


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> dict[str, Path]:
    """A data folder (train/test splits) and two checkpoints of a random tiny model."""
    root = tmp_path_factory.mktemp("tiny")
    data = root / "data"
    data.mkdir()
    for split, n in (("train", 200), ("test", 7)):
        src, tgt = corpus(n, seed=len(split))
        (data / f"{split}.en").write_text("\n".join(src) + "\n", encoding="utf-8")
        (data / f"{split}.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    train_src, train_tgt = corpus(200, seed=5)
    proto = train_bpe(train_src + train_tgt, vocab_size=80, character_coverage=1.0)
    data_cfg = DataConfig(name="tiny", root=str(data), test_split="test", vocab_size=80)
    config = TrainJobConfig(data=data_cfg, model=TINY)
    paths = {"data": data}
    moved = TrainJobConfig(data=replace(data_cfg, root=str(root / "gone")), model=TINY)
    model = build_model(TINY, vocab_size=80, pad_id=0)
    state = TrainingState(config=moved, model=model.state_dict(), bpe_model=proto, step=1)
    paths["moved"] = save_checkpoint(state, root / "moved.pt")  # its corpus folder is gone
    for name, seed in (("a", 0), ("b", 1)):
        torch.manual_seed(seed)
        model = build_model(TINY, vocab_size=80, pad_id=0)
        state = TrainingState(config=config, model=model.state_dict(), bpe_model=proto, step=seed)
        paths[name] = save_checkpoint(state, root / f"{name}.pt")
    return paths


def cli(module: str, *args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", f"rpr_nmt.cli.{module}", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True)


def test_evaluate_writes_files_and_bleu_equals_the_sacrebleu_command_line(tiny_run, tmp_path):
    run_dir = tmp_path / "run"
    out = cli(
        "evaluate", f"checkpoint={tiny_run['a']}", "decode.max_sentences=3",
        "decode.max_len_b=4", f"hydra.run.dir={run_dir}", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert re.search(r"^BLEU = \d+\.\d\d  nrefs:1\|case:mixed\|eff:no\|tok:13a", out.stdout, re.M)
    assert "chrF = " in out.stdout and "tokenized BLEU = " in out.stdout
    hyp, ref = run_dir / "hyp_test.txt", tiny_run["data"] / "test.de"
    assert len(hyp.read_text(encoding="utf-8").splitlines()) == 7
    record = json.loads((run_dir / "eval_test.json").read_text())
    for key in ("bleu", "signature", "chrf", "tokenized_bleu", "sentences", "sentences_per_sec"):
        assert key in record
    assert record["checkpoint"] == [str(tiny_run["a"])] and record["decode"]["max_len_b"] == 4
    cmd = [str(SACREBLEU), str(ref), "-i", str(hyp), "-b", "-w", "4"]
    cli_bleu = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    assert float(cli_bleu) == pytest.approx(record["bleu"], abs=1e-4)


def test_evaluate_averages_several_checkpoints(tiny_run, tmp_path):
    run_dir = tmp_path / "run"
    ckpts = f"checkpoint=[{tiny_run['a']},{tiny_run['b']}]"
    out = cli(
        "evaluate", ckpts, f"data.root={tiny_run['data']}", "data.test_split=test",
        "decode.beam_size=2", "decode.max_len_b=2", f"hydra.run.dir={run_dir}", "data=local",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    record = json.loads((run_dir / "eval_test.json").read_text())
    assert record["checkpoint"] == [str(tiny_run["a"]), str(tiny_run["b"])]


def test_evaluate_reads_a_moved_corpus_from_data_root(tiny_run, tmp_path):
    args = [f"checkpoint={tiny_run['moved']}", "decode.max_len_b=2"]
    out = cli("evaluate", *args, f"hydra.run.dir={tmp_path / 'a'}", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"tiny in {tiny_run['data'].parent / 'gone'}, not on this machine" in out.stderr
    assert "pass data_root=FOLDER" in out.stderr
    out = cli(
        "evaluate", *args, f"data_root={tiny_run['data']}", f"hydra.run.dir={tmp_path / 'b'}",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "b" / "hyp_test.txt").read_text(encoding="utf-8").splitlines()) == 7


@pytest.mark.parametrize(
    "args,message",
    [
        (["checkpoint=missing.pt"], "checkpoint not found"),
        ([], "no checkpoint given"),
        (["CKPT", "split=nosuchsplit"], "missing data file"),
        (["CKPT", "decode.precision=fp8"], "decode.precision"),
        (["CKPT", "weights=latest"], "weights='latest'"),
    ],
    ids=["missing_checkpoint", "no_checkpoint", "missing_split", "bad_precision", "bad_weights"],
)
def test_evaluate_errors_are_one_line_and_exit_2(tiny_run, tmp_path, args, message):
    args = [f"checkpoint={tiny_run['a']}" if a == "CKPT" else a for a in args]
    out = cli("evaluate", *args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and message in out.stderr
    assert out.stderr.strip().startswith("rpr-nmt-evaluate: error:")


def test_translate_reads_stdin_and_writes_nbest(tiny_run, tmp_path):
    text = "a man rides a bike.\n\nthe dog runs.\n"
    out = cli(
        "translate", f"checkpoint={tiny_run['a']}", "decode.max_len_b=3", cwd=tmp_path, stdin=text
    )
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.splitlines()[1:2] == [""] and len(out.stdout.splitlines()) == 3
    )  # blank: blank
    out = cli(
        "translate", f"checkpoint={tiny_run['a']}", "decode.nbest=3", "decode.max_len_b=3",
        cwd=tmp_path, stdin=text,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 7 and [line.split(" ||| ")[0] for line in lines] == list("0001222")
    assert lines[3] == "1 |||  ||| 0.0000"  # the blank line: one empty hypothesis
    scores = [float(line.split(" ||| ")[2]) for line in lines[:3]]
    assert scores == sorted(scores, reverse=True)


def test_translate_files_and_missing_input(tiny_run, tmp_path):
    (tmp_path / "in.en").write_text("a red bike.\nthe park.\n", encoding="utf-8")
    args = [f"checkpoint={tiny_run['a']}", "input=in.en", "output=out.de", "decode.max_len_b=3"]
    out = cli("translate", *args, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "out.de").read_text(encoding="utf-8").splitlines()) == 2
    out = cli("translate", f"checkpoint={tiny_run['a']}", "input=nothere.en", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "nothere.en" in out.stderr
