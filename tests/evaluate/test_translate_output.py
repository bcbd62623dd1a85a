"""rpr-nmt-translate's output=FILE: replaced only once every line is translated; a failure keeps
the previous FILE and the translations made so far. Subprocesses on the tiny checkpoints of
tests/evaluate/tiny.py."""

from __future__ import annotations

import os
import re
import select
import signal
import time
from pathlib import Path

import pytest

from tests.evaluate.tiny import cli, translate_process

ARGS = ["decode.max_sentences=1", "decode.max_len_b=2", "input=in.en", "output=out.de"]


def test_a_failure_keeps_the_previous_output_and_the_translations_so_far(tiny_run, tmp_path):
    # Probe D3: output= was emptied before decoding; a failure left it 0 bytes.
    (tmp_path / "out.de").write_text("PREVIOUS CONTENT\n", encoding="utf-8")
    (tmp_path / "in.en").write_bytes(b"a man rides.\n" * 20 + b"the \xff dog.\nmore.\n")
    out = cli("translate", f"checkpoint={tiny_run['a']}", *ARGS, cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("rpr-nmt-translate: error: input=in.en: invalid UTF-8 on line 21")
    assert out.stderr.endswith(
        "; output=out.de is unchanged, the translations of the 20 lines before are in "
        "out.de.partial\n"
    )
    assert (tmp_path / "out.de").read_text(encoding="utf-8") == "PREVIOUS CONTENT\n"
    assert (tmp_path / "out.de.partial").read_text(encoding="utf-8").count("\n") == 20


def test_a_failure_before_any_translation_leaves_no_partial_file(tiny_run, tmp_path):
    (tmp_path / "out.de").write_text("PREVIOUS CONTENT\n", encoding="utf-8")
    (tmp_path / "in.en").write_text("a man rides.\n", encoding="utf-8")
    (tmp_path / "broken.pt").write_bytes(b"not a checkpoint")
    out = cli("translate", "checkpoint=broken.pt", *ARGS, cwd=tmp_path)
    assert out.returncode == 2 and "cannot read checkpoint broken.pt" in out.stderr
    assert out.stderr.count("\n") == 1 and "partial" not in out.stderr
    assert (tmp_path / "out.de").read_text(encoding="utf-8") == "PREVIOUS CONTENT\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.pt", "in.en", "out.de"]


def test_success_replaces_the_output_keeping_its_mode(tiny_run, tmp_path):
    (tmp_path / "out.de").write_text("PREVIOUS CONTENT\n", encoding="utf-8")
    os.chmod(tmp_path / "out.de", 0o640)
    (tmp_path / "in.en").write_text("a man rides.\nthe dog.\n", encoding="utf-8")
    out = cli("translate", f"checkpoint={tiny_run['a']}", *ARGS, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    written = (tmp_path / "out.de").read_text(encoding="utf-8")
    assert written.count("\n") == 2 and "PREVIOUS" not in written
    assert (tmp_path / "out.de").stat().st_mode & 0o777 == 0o640
    assert not (tmp_path / "out.de.partial").exists()
    out = cli("translate", f"checkpoint={tiny_run['a']}", *ARGS[:3], "output=/dev/null",
              cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr  # a device is written directly


def lines_in(path: Path) -> int:
    return path.read_text(encoding="utf-8").count("\n") if path.exists() else 0


@pytest.mark.parametrize("where", ["stdout", "file"])
def test_ctrl_c_is_one_line_and_exit_130(tiny_run, tmp_path, where):
    # Probe C9: Ctrl-C printed a KeyboardInterrupt traceback. The input stays open: the command
    # is waiting for line 17 when it is stopped, with one window of 16 lines translated.
    (tmp_path / "out.de").write_text("PREVIOUS CONTENT\n", encoding="utf-8")
    output = ["output=out.de"] if where == "file" else []
    proc = translate_process(
        tiny_run, "decode.max_sentences=1", "decode.max_len_b=2", *output, cwd=tmp_path
    )
    try:
        proc.stdin.write(b"a man rides.\n" * 16)
        proc.stdin.flush()
        if where == "stdout":
            assert select.select([proc.stdout], [], [], 300)[0], "no output"
        else:
            deadline = time.monotonic() + 300
            while lines_in(tmp_path / "out.de.partial") < 16 and time.monotonic() < deadline:
                time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=300) == 130
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.communicate()
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("rpr-nmt-translate: interrupted (Ctrl-C) after 16 input lines; ")
    if where == "file":
        assert err.endswith("output=out.de is unchanged, the translations of the 16 lines "
                            "before are in out.de.partial\n")  # fmt: skip
        assert (tmp_path / "out.de").read_text(encoding="utf-8") == "PREVIOUS CONTENT\n"
        assert lines_in(tmp_path / "out.de.partial") == 16
    else:
        assert err.endswith("; their translations are written\n")


def test_a_line_longer_than_max_input_tokens_stops_the_run_with_its_number(tiny_run, tmp_path):
    # Probe C8: no per-line cap; a document without line breaks could exhaust memory.
    text = "a man rides.\nthe dog.\n\n" + "a man rides a red bike " * 40 + "\nmore.\n"
    args = [f"checkpoint={tiny_run['a']}", "decode.max_len_b=2"]
    out = cli("translate", *args, "max_input_tokens=50", cwd=tmp_path, stdin=text)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert re.fullmatch(
        r"rpr-nmt-translate: error: stdin line 4 has \d+ BPE tokens, more than "
        r"max_input_tokens=50; the 3 lines before it are translated; split the line, or raise "
        r"max_input_tokens\n",
        out.stderr,
    )
    assert out.stdout.count("\n") == 3  # the lines before it
    out = cli("translate", *args, "max_input_tokens=2", cwd=tmp_path, stdin="x" * 200 + "\n")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "stdin line 1 is longer than 128 bytes, more than max_input_tokens=2" in out.stderr
    out = cli("translate", *args, "max_input_tokens=0", cwd=tmp_path, stdin="a man.\n")
    assert "error: max_input_tokens=0: give at least 1" in out.stderr


def test_an_input_without_line_ends_is_refused_by_the_default_limit(tiny_run, tmp_path):
    # Probe C8: input=/dev/zero read one endless line until memory ran out.
    out = cli("translate", f"checkpoint={tiny_run['a']}", "input=/dev/zero", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert (
        "input=/dev/zero line 1 is longer than 65536 bytes, more than max_input_tokens=1024 "
        "BPE tokens can hold; the 0 lines before it are translated" in out.stderr
    )


def test_carriage_returns_inside_a_line_are_warned_about_once(tiny_run, tmp_path):
    # Probe K10: a file with CR-only line ends became one line, without a word.
    (tmp_path / "mac.en").write_bytes(b"a man.\rthe dog.\ra child.\r")
    out = cli("translate", f"checkpoint={tiny_run['a']}", "input=mac.en", "decode.beam_size=1",
              "decode.max_len_b=2", cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1
    assert out.stderr == (
        "rpr-nmt-translate: warning: input=mac.en line 1 holds carriage returns (\\r) but lines "
        "end at \\n only, so it is translated as one line; for CR line ends, convert the input "
        "first: tr '\\r' '\\n'\n"
    )
    crlf = cli("translate", f"checkpoint={tiny_run['a']}", "decode.beam_size=1",
               "decode.max_len_b=2", cwd=tmp_path, stdin="a man.\r\nthe dog.\r\n")  # fmt: skip
    assert crlf.returncode == 0 and crlf.stderr == "" and len(crlf.stdout.splitlines()) == 2


def test_a_symbolic_link_output_is_written_through(tiny_run, tmp_path):
    # Probe: output=LINK replaced the link by a regular file; its target was never written.
    # Written as a shell redirect writes: the link stays, its target gets the translations.
    (tmp_path / "in.en").write_text("a man rides.\nthe dog.\n", encoding="utf-8")
    (tmp_path / "shared").mkdir()
    for name, previous in (("old.de", "PREVIOUS CONTENT\n"), ("new.de", None)):  # new: dangling
        target, link = tmp_path / "shared" / name, tmp_path / f"link-{name}"
        if previous is not None:
            target.write_text(previous, encoding="utf-8")
            os.chmod(target, 0o640)
        link.symlink_to(Path("shared") / name)
        out = cli("translate", f"checkpoint={tiny_run['a']}", *ARGS[:3], f"output={link.name}",
                  cwd=tmp_path)  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert link.is_symlink() and os.readlink(link) == str(Path("shared") / name)
        assert lines_in(target) == 2 and "PREVIOUS" not in target.read_text(encoding="utf-8")
        if previous is not None:
            assert target.stat().st_mode & 0o777 == 0o640
    leftovers = [p.name for p in tmp_path.rglob("*.partial")]
    assert leftovers == []


@pytest.mark.parametrize("name", ["out-ü.txt", "out,v2.txt", "o]ut.txt"])
def test_an_output_name_hydra_would_misread_is_written_as_named(tiny_run, tmp_path, name):
    # Probe: these names crashed in Hydra's override parser (a multi-line error, exit 1) unless
    # the file existed already (rpr_nmt/cli/path_overrides.py quotes a path to write as well).
    (tmp_path / "in.en").write_text("a man rides.\nthe dog.\n", encoding="utf-8")
    out = cli("translate", f"checkpoint={tiny_run['a']}", *ARGS[:3], f"output={name}",
              cwd=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert lines_in(tmp_path / name) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["in.en", name])
