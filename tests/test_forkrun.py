"""tests/forkrun.py: a forked command is what `python -m` in a subprocess would be."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import forkrun
from tests.forkrun import run_module, run_script

COMMAND = """
import os, sys, torch
print("cwd", os.getcwd())
print("env", os.environ.get("RPR_NMT_PROBE"), os.environ.get("OMP_NUM_THREADS"))
print("threads", torch.get_num_threads())
print("argv", sys.argv[1:], sys.argv[0].endswith("probe_command.py"))
print("main", __name__)
print("stdin", sys.stdin.read().upper(), end="")
print("to stderr\\r\\nwith a carriage return", file=sys.stderr)
sys.exit(int(sys.argv[1]) if sys.argv[1:] else "exit with a message")
"""


@pytest.fixture
def command(tmp_path: Path) -> Path:
    (tmp_path / "probe_command.py").write_text(COMMAND, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(("args", "threads"), [(["3", "ä=1"], "1"), ([], "2")])
def test_a_forked_command_is_what_a_subprocess_would_be(command, monkeypatch, args, threads):
    env = {**os.environ, "RPR_NMT_PROBE": "x y", "OMP_NUM_THREADS": threads}
    stdin = "a line\nünïcode\n"
    forked = run_module("probe_command", args, cwd=command, env=env, stdin=stdin)
    monkeypatch.setenv("RPR_NMT_TEST_FORK", "0")
    plain = run_module("probe_command", args, cwd=command, env=env, stdin=stdin)
    assert forked.returncode == plain.returncode == (3 if args else 1)
    assert forked.stdout == plain.stdout and forked.stderr == plain.stderr
    assert f"cwd {command}\n" in forked.stdout and f"threads {threads}\n" in forked.stdout
    assert "env x y" in forked.stdout and "main __main__" in forked.stdout
    assert "stdin A LINE\nÜNÏCODE\n" in forked.stdout
    assert forked.stderr.startswith("to stderr\nwith a carriage return\n")


SCRIPT = """
import os, sys
import sibling  # beside the script: python puts the script's folder first on the path
print("cwd", os.getcwd(), "argv", sys.argv[1:], sys.argv[0].endswith("script_probe.py"))
print("main", __name__, sibling.WORD, "stdin", sys.stdin.read().upper(), end="")
sys.exit(4)
"""


def test_a_forked_script_is_what_python_script_would_be(command, monkeypatch):
    (command / "sibling.py").write_text("WORD = 'sibling'\n")
    (command / "script_probe.py").write_text(SCRIPT)
    elsewhere = command / "elsewhere"
    elsewhere.mkdir()
    runs = {}
    for fork in ("1", "0"):
        monkeypatch.setenv("RPR_NMT_TEST_FORK", fork)
        runs[fork] = run_script(command / "script_probe.py", ["b"], cwd=elsewhere, stdin="x\n")
    forked, plain = runs["1"], runs["0"]
    assert forked.returncode == plain.returncode == 4
    assert (
        forked.stdout
        == plain.stdout
        == f"cwd {elsewhere} argv ['b'] True\nmain __main__ sibling stdin X\n"
    )
    assert forked.stderr == plain.stderr == ""


def test_a_command_past_its_timeout_is_killed(command):
    (command / "sleeper.py").write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        run_module("sleeper", [], cwd=command, timeout=1)
    done = run_module("probe_command", ["0"], cwd=command)  # the server serves on
    assert done.returncode == 0


def test_an_uncaught_exception_exits_1_with_its_traceback(command):
    (command / "failing.py").write_text("raise ValueError('bad value')\n")
    done = run_module("failing", [], cwd=command)
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "ValueError: bad value" in done.stderr


@pytest.mark.skipif(not forkrun.forking(), reason="RPR_NMT_TEST_FORK=0 or no fork")
def test_libraries_loaded_with_another_environment_get_another_server(command):
    before = len(forkrun._servers)
    for threads in ("1", "2", "1"):
        env = {**os.environ, "OMP_NUM_THREADS": threads, "RPR_NMT_PROBE": threads}
        run_module("probe_command", ["0"], cwd=command, env=env)
    assert len(forkrun._servers) - before <= 2
    keys = {dict(key).get("OMP_NUM_THREADS") for key in forkrun._servers}
    assert {"1", "2"} <= keys and not any("RPR_NMT_PROBE" in dict(key) for key in forkrun._servers)
