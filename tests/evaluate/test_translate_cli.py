"""rpr-nmt-translate end to end on a tiny checkpoint (tests/evaluate/tiny.py): stdin and files,
n-best lists, lines split on newlines alone, output written window by window, bad input."""

from __future__ import annotations

import select
import subprocess
import sys

import pytest

from tests.conftest import command_env
from tests.evaluate.tiny import cli, translate_process


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
        cmd = [sys.executable, "-m", "rpr_nmt.cli.translate", *args]
        out = subprocess.run(cmd, cwd=tmp_path, env=command_env(), input=data, capture_output=True)
        out.stderr, written = out.stderr.decode(), out.stdout.decode()
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1
    assert f"invalid UTF-8 on line 21 (byte offset {13 * 20 + 4}: b'\\xff')" in out.stderr
    assert written.count("\n") == 20
