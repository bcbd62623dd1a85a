"""rpr-nmt-evaluate and rpr-nmt-translate end to end on a tiny checkpoint, each command a process
of its own (forked from one that imported torch: tests/forkrun.py)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
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
from tests.forkrun import run_module

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
    """`python -m rpr_nmt.cli.MODULE ARGS` in a process of its own (forked: tests/forkrun.py)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return run_module(f"rpr_nmt.cli.{module}", list(args), cwd=cwd, env=env, stdin=stdin)


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


def test_evaluate_scores_extra_references_as_sacrebleu_does(tiny_run, tmp_path):
    args = [f"checkpoint={tiny_run['a']}", "decode.beam_size=1", "decode.max_len_b=4"]
    out = cli("evaluate", *args, f"hydra.run.dir={tmp_path / 'one'}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^TER = \d+\.\d\d  nrefs:1\|case:lc\|tok:tercom", out.stdout, re.M)
    hyps = (tmp_path / "one" / "hyp_test.txt").read_text(encoding="utf-8").splitlines()
    extra = tmp_path / "extra.de"  # the hypotheses themselves, a blank one replaced
    extra.write_text("".join((h if h.strip() else "leer") + "\n" for h in hyps), "utf-8")
    run_dir = tmp_path / "two"
    out = cli(
        "evaluate", *args, f"extra_references=[{extra}]", f"hydra.run.dir={run_dir}", cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    record = json.loads((run_dir / "eval_test.json").read_text())
    assert record["extra_references"] == [str(extra)]
    for key in ("signature", "chrf_signature", "ter_signature"):
        assert record[key].startswith("nrefs:2|")
    ref, hyp = tiny_run["data"] / "test.de", run_dir / "hyp_test.txt"
    for metric in ("bleu", "chrf", "ter"):
        cmd = [str(SACREBLEU), str(ref), str(extra), "-i", str(hyp), "-m", metric, "-b", "-w", "4"]
        value = float(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        assert value == pytest.approx(record[metric], abs=1e-4)
    short, blank = tmp_path / "short.de", tmp_path / "blank.de"
    short.write_text("ein mann.\n", encoding="utf-8")
    blank.write_text("ein mann.\n\n" + "ein hund.\n" * 5, encoding="utf-8")
    for path, message in ((short, "has 1 lines but the split has 7"), (blank, "line 2 is empty")):
        out = cli("evaluate", *args, f"extra_references=[{path}]", "hydra.run.dir=x", cwd=tmp_path)
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.strip().startswith("rpr-nmt-evaluate: error: extra reference file")
        assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("tok", ["intl", "char", "zh", "none", None])
def test_evaluate_bleu_tokenize_equals_sacrebleu_tok(tiny_run, tmp_path, tok):
    run_dir = tmp_path / "run"
    given = [] if tok is None else [f"bleu_tokenize={tok}"]
    args = [f"checkpoint={tiny_run['a']}", "decode.beam_size=1", "decode.max_len_b=4", *given]
    out = cli("evaluate", *args, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    record = json.loads((run_dir / "eval_test.json").read_text())
    assert record.get("bleu_tokenize") == tok  # absent by default: the JSON as before the option
    assert f"|tok:{tok or '13a'}|" in record["signature"]
    assert f"BLEU = {record['bleu']:.2f}  {record['signature']}\n" in out.stdout
    ref, hyp = tiny_run["data"] / "test.de", run_dir / "hyp_test.txt"
    cmd = [str(SACREBLEU), str(ref), "-i", str(hyp), "-b", "-w", "4", "-tok", tok or "13a"]
    value = float(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    assert value == pytest.approx(record["bleu"], abs=1e-4)


@pytest.mark.parametrize("tok", ["ja-mecab", "13A"])
def test_evaluate_refuses_a_bleu_tokenize_sacrebleu_cannot_load(tiny_run, tmp_path, tok):
    args = [f"checkpoint={tiny_run['a']}", f"bleu_tokenize={tok}"]
    out = cli("evaluate", *args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"rpr-nmt-evaluate: error: bleu_tokenize={tok}: ")
    assert line.endswith("choose one of 13a, intl, char, zh, none")
    assert not (tmp_path / "run" / "eval_test.json").exists()


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


def translate_process(tiny_run, *args: str, cwd: Path) -> subprocess.Popen:
    """rpr-nmt-translate reading a pipe that stays open until the test closes it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "rpr_nmt.cli.translate", f"checkpoint={tiny_run['a']}", *args]
    pipes = dict(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Ctrl-C as from a terminal: a shell without job control (nohup, `cmd &`) starts its children
    # with SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    return subprocess.Popen(cmd, cwd=cwd, env=env, preexec_fn=_default_sigint, **pipes)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_translate_splits_lines_on_newline_only(tiny_run, tmp_path):
    # Issue 31: str.splitlines made 7 output lines of these 4 (U+2028, form feed, NEL).
    text = "a man\u2028rides.\n\fthe dog.\nthe\x85 park.\r\nred bike.\n"
    out = cli(
        "translate", f"checkpoint={tiny_run['a']}", "decode.max_len_b=2", cwd=tmp_path, stdin=text
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("\n") == 4


def test_translate_checks_the_output_path_before_reading_the_input(tiny_run, tmp_path):
    # Issue 31: an unwritable output= failed only after every line was translated; here the
    # input never ends, so only a check made first can answer.
    proc = translate_process(tiny_run, "output=no/such/folder/out.de", cwd=tmp_path)
    try:
        assert proc.wait(timeout=300) == 2
        err = proc.stderr.read().decode()
        assert "cannot write output=no/such/folder/out.de" in err and "Traceback" not in err
    finally:
        proc.kill()
        proc.communicate()


def test_translate_writes_each_window_in_input_order_before_reading_on(tiny_run, tmp_path):
    # A window is 16 batches of decode.max_sentences = 1 line: its translations come out while
    # the input is still open (before, nothing was written until the input ended).
    proc = translate_process(
        tiny_run, "decode.max_sentences=1", "decode.beam_size=2", "decode.nbest=2",
        "decode.max_len_b=2", cwd=tmp_path,
    )  # fmt: skip
    try:
        lines = ["a man rides.", "", "the dog."] * 6 + ["red bike.", ""]  # 20 lines
        proc.stdin.write("".join(f"{line}\n" for line in lines[:16]).encode())
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        assert ready, "no output while the input is open"
        assert proc.stdout.readline().startswith(b"0 ||| ")
        proc.stdin.write("".join(f"{line}\n" for line in lines[16:]).encode())
        proc.stdin.close()
        assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()
        rest = proc.stdout.read().decode().splitlines()
    finally:
        proc.kill()
    # 2 hypotheses per line, 1 for a blank line; indices in input order across the windows
    expected = [str(i) for i, line in enumerate(lines) for _ in range(2 if line else 1)]
    assert [line.split(" ||| ")[0] for line in rest] == expected[1:]


@pytest.mark.parametrize("where", ["file", "stdin"])
def test_translate_stops_at_invalid_utf8_after_writing_the_lines_before(tiny_run, tmp_path, where):
    # Issue 31: a traceback, and nothing written. 20 good lines (more than one window of 16),
    # then a bad byte at offset 4 of line 21.
    data = b"a man rides.\n" * 20 + b"the \xff dog.\nmore.\n"
    args = [f"checkpoint={tiny_run['a']}", "decode.max_sentences=1", "decode.max_len_b=2"]
    if where == "file":
        (tmp_path / "in.en").write_bytes(data)
        out = cli("translate", *args, "input=in.en", "output=out.de", cwd=tmp_path)
        # out.de is written only at the end: the translations so far are in out.de.partial
        written = (tmp_path / "out.de.partial").read_text(encoding="utf-8")
    else:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        cmd = [sys.executable, "-m", "rpr_nmt.cli.translate", *args]
        out = subprocess.run(cmd, cwd=tmp_path, env=env, input=data, capture_output=True)
        out.stderr, written = out.stderr.decode(), out.stdout.decode()
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1
    assert f"invalid UTF-8 on line 21 (byte offset {13 * 20 + 4}: b'\\xff')" in out.stderr
    assert written.count("\n") == 20


@pytest.mark.parametrize(
    "args,message",
    [
        (["CKPT", "+model.d_model=64"], "model.d_model: not a setting of this command"),
        (["CKPT", "data=multi30k_en_fr"], "data=multi30k_en_fr is en-fr, but the checkpoint"),
        (["checkpoint=empty.pt"], "empty.pt: the file is empty (0 bytes)"),
        (["CKPT", "data_root=.", "split=none"], "tiny split 'none' has no sentences"),
    ],
    ids=[
        "model_override_on_evaluate",
        "other_language_pair",
        "zero_byte_checkpoint",
        "empty_split",
    ],
)
def test_evaluate_refuses_what_it_would_ignore_or_get_wrong(tiny_run, tmp_path, args, message):
    # Issue 31, item 7: `+model.d_model=64` was accepted and ignored; an en-de model was scored on
    # en-fr without a word; a zero-byte checkpoint's error ended in an empty reason. Probe E: an
    # empty split ended in sacrebleu's IndexError.
    (tmp_path / "empty.pt").write_bytes(b"")
    (tmp_path / "none.en").write_bytes(b"")
    (tmp_path / "none.de").write_bytes(b"")
    args = [f"checkpoint={tiny_run['a']}" if a == "CKPT" else a for a in args]
    out = cli("evaluate", *args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("rpr-nmt-evaluate: error: ") and out.stderr.count("\n") == 1
    assert message in out.stderr


def test_an_ensemble_of_two_copies_evaluates_translates_and_scores_as_the_model(tiny_run, tmp_path):
    a, copy = tiny_run["a"], tmp_path / "copy.pt"  # one model named twice is refused: a copy
    copy.write_bytes(a.read_bytes())
    args = ["decode.beam_size=2", "decode.max_len_b=3"]
    for name, model in (("alone", f"checkpoint={a}"), ("pair", f"ensemble=[{a},{copy}]")):
        out = cli("evaluate", model, *args, f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        out = cli("score", model, f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
    assert "an ensemble of 2 models" in out.stdout
    hyps = [(tmp_path / n / "hyp_test.txt").read_text(encoding="utf-8") for n in ("alone", "pair")]
    assert hyps[0] == hyps[1]
    record = json.loads((tmp_path / "pair" / "eval_test.json").read_text())
    assert record["ensemble"] == [[str(a)], [str(copy)]] and record["checkpoint"] is None
    scores = [json.loads((tmp_path / n / "score_test.json").read_text()) for n in ("alone", "pair")]
    assert scores[1]["perplexity"] == pytest.approx(scores[0]["perplexity"], rel=1e-5)
    text = "a man rides a bike.\nthe dog runs.\n"
    outs = [
        cli("translate", model, *args, cwd=tmp_path, stdin=text)
        for model in (
            f"checkpoint={a}",
            f"ensemble=[{a},{copy}]",
            f"ensemble=[{a},{tiny_run['b']}]",
        )
    ]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert outs[0].stdout == outs[1].stdout and len(outs[2].stdout.splitlines()) == 2


def test_ensemble_errors_are_one_line_and_exit_2(tiny_run, tmp_path):
    src, tgt = corpus(100, seed=9)
    other_bpe = train_bpe(src + tgt, vocab_size=60, character_coverage=1.0)
    config = TrainJobConfig(data=DataConfig(name="tiny", root=str(tiny_run["data"])), model=TINY)
    model = build_model(TINY, vocab_size=60, pad_id=0)
    state = TrainingState(config=config, model=model.state_dict(), bpe_model=other_bpe, step=1)
    other = save_checkpoint(state, tmp_path / "other.pt")
    a = tiny_run["a"]
    cases = [
        ("evaluate", [f"ensemble=[{a},{other}]"], f"members {a} and {other} have different BPE"),
        ("translate", [f"ensemble=[{a},{other}]"], f"members {a} and {other} have different BPE"),
        ("evaluate", [f"checkpoint={a}", f"ensemble=[{a}]"], "exclude each other"),
        ("score", [f"checkpoint={a}", f"ensemble=[{a}]"], "exclude each other"),
        ("translate", [f"ensemble=[{a},missing.pt]"], "checkpoint not found"),
    ]
    for command, args, message in cases:
        out = cli(command, *args, "hydra.run.dir=run", cwd=tmp_path, stdin="a man.\n")
        assert out.returncode == 2, out.stderr
        assert "Traceback" not in out.stderr and message in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1


def test_a_run_folder_to_write_with_a_comma_works_unquoted(tiny_run, tmp_path):
    # Probe: a new hydra.run.dir holding ',' crashed in Hydra's override parser (exit 1); only
    # existing paths were quoted (rpr_nmt/cli/path_overrides.py quotes a path to write as well).
    args = [f"checkpoint={tiny_run['a']}", "decode.beam_size=1", "decode.max_len_b=2"]
    out = cli("evaluate", *args, "hydra.run.dir=runs/eval,v2-ü", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "runs" / "eval,v2-ü" / "eval_test.json").is_file()


def test_sweep_run_paths_work_unquoted(tiny_run, tmp_path):
    # A sweep's run folders are named after its overrides: '=' and ',' that Hydra's grammar
    # would misread (rpr_nmt/cli/path_overrides.py quotes them first).
    members = []
    for name, seed in (("a", 1), ("b", 2)):
        run = tmp_path / f"sweeps/x/model.max_relative_position=4,train.seed={seed}/checkpoints"
        run.mkdir(parents=True)
        members.append(run / "last.pt")
        members[-1].write_bytes(tiny_run[name].read_bytes())
    text = "a man rides a bike.\nthe dog runs.\n"
    args = ["decode.max_len_b=3"]
    outs = [
        cli("translate", model, *args, cwd=tmp_path, stdin=text)
        for model in (f"checkpoint={tiny_run['a']}", f"checkpoint={members[0]}")
    ]
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert outs[0].stdout == outs[1].stdout and len(outs[0].stdout.splitlines()) == 2
    ensemble = f"ensemble=[{members[0]},{members[1]}]"
    out = cli("evaluate", ensemble, *args, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    record = json.loads((tmp_path / "run" / "eval_test.json").read_text())
    assert record["ensemble"] == [[str(members[0])], [str(members[1])]]
    out = cli("score", f"checkpoint={members[1]}", f"hydra.run.dir={tmp_path / 's'}", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
