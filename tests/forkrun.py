"""`python -m rpr_nmt.cli.X ARGS` (and `python scripts/X.py ARGS`) for the tests, forked from a
process that has imported torch.

Most of a command's start-up is importing torch (about 2.5 s of 3 on a 2-core host), and the CLI
tests start a few hundred commands. run_module does what
`subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, input=stdin,
capture_output=True, text=True, timeout=timeout)` does, but each command runs in a child forked
from a server that imported torch, numpy, hydra, sacrebleu and sentencepiece once (and
torch._dynamo, which torch.optim imports on a trainer's first optimizer, 2.4 s): a fresh process
all the same (its own pid, working directory, environment, standard streams, exit code; rpr_nmt
and the command module are imported in the child, nothing of them is in the server).
run_script does the same for `python SCRIPT ARGS`, the script's folder first on the path.

Environment variables that libraries read when they load (OMP_NUM_THREADS, ATEN_CPU_CAPABILITY...)
must be the child's from the start, so each distinct environment gets its own server, apart from
the variables only rpr_nmt, Hydra or pytest read (NEUTRAL_PREFIXES). RPR_NMT_TEST_FORK=0, or a
platform without fork, runs every command with subprocess.run instead.
"""

from __future__ import annotations

import atexit
import locale
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

NEUTRAL_PREFIXES = ("RPR_NMT_", "HYDRA_", "PYTEST_")
PRELOADED = ("torch", "torch._dynamo", "numpy", "hydra", "omegaconf", "sacrebleu", "sentencepiece")

# What the server runs: import the slow libraries, then fork a child per request. Requests and
# replies are length-prefixed pickles on the server's stdin and stdout.
SERVER = f"""
import atexit, io, os, pickle, runpy, struct, sys, traceback
import {", ".join(PRELOADED)}

def read():
    header = sys.stdin.buffer.read(8)
    if len(header) < 8:
        return None
    return pickle.loads(sys.stdin.buffer.read(struct.unpack("<Q", header)[0]))

def write(obj):
    data = pickle.dumps(obj)
    sys.stdout.buffer.write(struct.pack("<Q", len(data)) + data)
    sys.stdout.buffer.flush()

def stream(fd, mode, like):
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors,
                            line_buffering=like.line_buffering)

def child(request):
    for fd, path, flags in ((0, request["stdin"], os.O_RDONLY),
                            (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = sys.__stdin__ = stream(0, "r", sys.stdin)
    sys.stdout = sys.__stdout__ = stream(1, "w", sys.stdout)
    sys.stderr = sys.__stderr__ = stream(2, "w", sys.stderr)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    code = 0
    try:
        if request["script"]:  # python SCRIPT ARGS: its folder first on the path, as python does
            sys.argv = [request["script"], *request["args"]]
            sys.path.insert(0, os.path.dirname(os.path.abspath(request["script"])))
            runpy.run_path(request["script"], run_name="__main__")
        else:
            sys.argv = [request["module"], *request["args"]]
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)

while (request := read()) is not None:
    pid = os.fork()
    if pid == 0:
        child(request)
    write(pid)
    write(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


class _Server:
    """One forking server, started with the environment its children import their libraries in."""

    def __init__(self, env: dict[str, str]):
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def send(self, request: dict) -> None:
        data = pickle.dumps(request)
        self.process.stdin.write(struct.pack("<Q", len(data)) + data)
        self.process.stdin.flush()

    def receive(self, timeout: float | None = None) -> object:
        out = self.process.stdout
        if timeout is not None and not select.select([out], [], [], timeout)[0]:
            raise TimeoutError
        header = out.read(8)
        if len(header) < 8:
            raise RuntimeError(f"the test fork server stopped (exit {self.process.wait()})")
        return pickle.loads(out.read(struct.unpack("<Q", header)[0]))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


_servers: dict[frozenset, _Server] = {}


def _server_for(env: dict[str, str]) -> _Server:
    key = frozenset((k, v) for k, v in env.items() if not k.startswith(NEUTRAL_PREFIXES))
    if key not in _servers:
        _servers[key] = _Server(dict(key))
    return _servers[key]


@atexit.register
def _close_servers() -> None:
    for server in _servers.values():
        server.close()
    _servers.clear()


def forking() -> bool:
    return hasattr(os, "fork") and os.environ.get("RPR_NMT_TEST_FORK", "1") != "0"


def run_module(
    module: str,
    args: list[str],
    *,
    cwd: Path | str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run `python -m MODULE ARGS` as subprocess.run(..., capture_output=True, text=True) would."""
    return _run({"module": module, "script": None}, args, cwd, env, stdin, timeout)


def run_script(
    script: Path | str,
    args: list[str],
    *,
    cwd: Path | str,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess:
    """Run `python SCRIPT ARGS` as subprocess.run(..., capture_output=True, text=True) would."""
    return _run({"module": None, "script": str(script)}, args, cwd, env, stdin, timeout)


def _run(
    target: dict[str, str | None],
    args: list[str],
    cwd: Path | str,
    env: dict[str, str] | None,
    stdin: str | None,
    timeout: float | None,
) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` or `python SCRIPT ARGS` (target: the one of the two it names)
    forked from a server, or run with subprocess.run where forking is off."""
    env = dict(os.environ if env is None else env)
    what = ["-m", target["module"]] if target["module"] else [target["script"]]
    command = [sys.executable, *what, *args]
    if not forking():
        return subprocess.run(
            command, cwd=cwd, env=env, input=stdin, capture_output=True, text=True,
            timeout=timeout, stdin=None if stdin is not None else subprocess.DEVNULL,
        )  # fmt: skip
    encoding = locale.getpreferredencoding(False)
    with tempfile.TemporaryDirectory(prefix="forkrun-") as folder:
        files = {name: Path(folder) / name for name in ("stdin", "stdout", "stderr")}
        files["stdin"].write_bytes((stdin or "").encode(encoding))
        server = _server_for(env)
        request = target | {"args": list(args), "cwd": str(cwd), "env": env}
        server.send(request | {name: str(path) for name, path in files.items()})
        pid = server.receive()
        try:
            code = server.receive(timeout)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            server.receive()
            raise subprocess.TimeoutExpired(command, timeout) from None
        out, err = (_text(files[name].read_bytes(), encoding) for name in ("stdout", "stderr"))
    return subprocess.CompletedProcess(command, code, out, err)


def _text(data: bytes, encoding: str) -> str:
    """subprocess's text mode: decoded, with universal newlines."""
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")
