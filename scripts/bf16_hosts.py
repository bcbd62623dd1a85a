"""Do two CPU classes train a run to the same numbers? The first updates of a published setting.

The word-order study on unseen lengths sets runs trained on one CPU class beside runs trained on
another (docs/results_positions.md, "unseen lengths"): bf16 matrix products run through other
kernels on AMX, on AVX512-BF16 without AMX and on AVX2, and may round otherwise. This trains the
first --updates updates of the length study's sinusoid run at its recipe
(experiment=length_generalisation positions=absolute, train=cpu_short, seed 1, one thread, as its
sweep ran) on this host, writes every training loss with the host it came from, and compares them
with the files other hosts wrote: the same to the last bit, or the update where they first part
and by how much.

    RPR_NMT_DATA=../shared/data python scripts/bf16_hosts.py \
        --json results/cpu_sittings/bf16_hosts/<host class>.json
    RPR_NMT_DATA=../shared/data python scripts/bf16_hosts.py \
        --against results/cpu_sittings/bf16_hosts/*.json

Timing plays no part: a busy host gives the same losses, so this may run beside a sweep.
Overrides given first (before the options) go after the recipe's, e.g. `model=transformer_tiny`;
the file records the command and the arithmetic it trained in, so that only files of the same
command and arithmetic are compared (a file of another is left out, naming what differs). The
update count is no part of the command compared: runs of other --updates are compared over the
updates both trained (e.g. `--updates 3` against the 20 of the recorded files).

Every --against file is read, and the --json destination checked, before anything trains.
Exit status: 0 trained, and compared with at least one --against file (or none was given);
1 training failed; 2 a usage error, an --against file this script did not write, or a --json
destination it cannot write (before training); 3 no --against file could be compared, all being
of another command or arithmetic (without --json nothing trains when none is of this command).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from rpr_nmt.cli.run_folder import folder_problem  # noqa: E402
from rpr_nmt.precision import bf16_support  # noqa: E402
from rpr_nmt.train.provenance import host_record, read_sessions  # noqa: E402

THREADS = 1  # torch threads per run, as the sweeps trained
RECIPE = [
    "experiment=length_generalisation", "hydra.mode=RUN", "positions=absolute", "train=cpu_short",
    "train.seed=1", "train.max_time_minutes=null", "train.log_every=1", "train.valid_every=100000",
    "train.save_every=100000", "train.valid_bleu=false", "train.evaluate_at_end=false",
]  # fmt: skip
UPDATES = "train.max_steps="  # the update count: no part of the command compared
NOT_OURS = "not a file this script wrote"


@dataclass(frozen=True)
class Other:
    """A file another host wrote with --json, as read and checked."""

    path: Path
    command: str
    losses: list[float]
    host: dict[str, Any]
    arithmetic: int


def refuse(message: str) -> NoReturn:
    """One line on stderr, exit 2: what is wrong, before anything trains."""
    print(f"bf16_hosts: {message}", file=sys.stderr)
    raise SystemExit(2)


def train_command(updates: int, precision: str, extra: list[str]) -> list[str]:
    """The rpr-nmt-train command of the first `updates` updates; `extra` overrides go after the
    recipe's."""
    overrides = [*RECIPE, f"train.precision={precision}", f"{UPDATES}{updates}", *extra]
    return ["rpr-nmt-train", *overrides]


def train_losses(command: list[str], out: Path) -> tuple[list[float], dict[str, Any]]:
    """The training loss of each update of `command` on this host, run in `out`, and the code
    record of the run (its arithmetic, commit and whether it was modified, from sessions.jsonl)."""
    child = [sys.executable, "-m", "rpr_nmt.cli.train", *command[1:], f"hydra.run.dir={out}"]
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS)}
    done = subprocess.run(child, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bf16_hosts: training failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    sessions = read_sessions(out)
    if not sessions:
        sys.exit(f"bf16_hosts: the run in {out} recorded no session (sessions.jsonl)")
    code = {key: sessions[0].get(key) for key in ("arithmetic", "commit", "modified")}
    return losses, code


def is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def file_problem(record: object) -> str | None:
    """What makes `record` (a file's JSON) other than what --json writes; None when nothing."""
    if not isinstance(record, dict):
        return f"holds a {type(record).__name__}, not an object"
    for key in ("command", "losses", "host", "code"):
        if key not in record:
            return f"no {key!r}"
    losses = record["losses"]
    if not isinstance(record["command"], str):
        return f"'command' is {record['command']!r:.40}, not a string"
    if not isinstance(losses, list) or not losses:
        return f"'losses' is {losses!r:.40}, not a non-empty list of numbers"
    for i, x in enumerate(losses):
        if not is_number(x):
            return f"'losses'[{i}] is {x!r:.40}, not a number"
    if not isinstance(record["host"], dict):
        return f"'host' is {record['host']!r:.40}, not an object"
    code = record["code"]
    if not isinstance(code, dict) or not isinstance(code.get("arithmetic"), int):
        return f"'code' is {code!r:.60}, not an object with an integer 'arithmetic'"
    return None


def read_other(path: Path) -> Other:
    """The file at `path`, checked; refused in one line (exit 2) when it is not one of ours."""
    try:
        record = json.loads(path.read_text())
    except OSError as e:
        refuse(f"--against {path}: cannot read it ({e.strerror or e})")
    except ValueError as e:
        refuse(f"--against {path}: {NOT_OURS} (not JSON: {e})")
    if problem := file_problem(record):
        refuse(f"--against {path}: {NOT_OURS} ({problem})")
    return Other(
        path, record["command"], record["losses"], record["host"], record["code"]["arithmetic"]
    )


def destination_problem(path: Path) -> str | None:
    """Why --json `path` could not be written after training; None when it can."""
    if path.is_dir():
        return "is a folder; name a file in it, e.g. <host class>.json"
    if path.exists() and not os.access(path, os.W_OK):
        return "is not writable"
    return folder_problem(path.parent) or None  # its folder, made when the file is written


def compared(command: str) -> list[str]:
    """A command's words as compared: without the update count (the number of losses tells it)."""
    return [word for word in command.split() if not word.startswith(UPDATES)]


def differing(theirs: str, ours: str) -> str:
    """What sets two commands apart, e.g. "only there: train.precision=fp32; only here: ..."."""
    there, here = compared(theirs), compared(ours)
    only_there = [word for word in there if word not in here]
    only_here = [word for word in here if word not in there]
    if not only_there and not only_here:
        return "the same overrides in another order"
    sides = [("only there", only_there), ("only here", only_here)]
    return "; ".join(f"{side}: {' '.join(words)}" for side, words in sides if words)


def parting(ours: list[float], theirs: list[float]) -> str:
    """Where two loss curves first differ, in words; "same" when every loss is equal as a float."""
    n = min(len(ours), len(theirs))
    for i in range(n):
        if ours[i] != theirs[i]:
            gap = abs(ours[n - 1] - theirs[n - 1])
            last = gap / abs(theirs[n - 1]) if theirs[n - 1] else float("inf")
            return (
                f"first differs at update {i + 1}: {ours[i]!r} here, {theirs[i]!r} there; "
                f"at update {n}: {ours[n - 1]:.6f} against {theirs[n - 1]:.6f} "
                f"(relative difference {last:.1e})"
            )
    if len(ours) != len(theirs):
        return f"the same for the {n} updates both trained ({len(ours)} here, {len(theirs)} there)"
    return f"same: all {n} losses equal to the last bit"


def compare(others: list[Other], losses: list[float], arithmetic: int) -> int:
    """Print each file's comparison with this host's `losses`; the number compared."""
    n = 0
    for other in others:
        if other.arithmetic != arithmetic:
            print(
                f"{other.path}: another arithmetic (train.arithmetic={other.arithmetic} there, "
                f"{arithmetic} here): left out"
            )
            continue
        host = other.host
        there = f"{host.get('cpu', '?')} ({host.get('bf16', host.get('kind'))})"
        print(f"against {other.path} ({there}): {parting(losses, other.losses)}")
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=20, help="updates to train, e.g. 20")
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--json", type=Path, help="write this host's losses here")
    parser.add_argument("--against", type=Path, nargs="+", default=[],
                        help="files other hosts wrote with --json")  # fmt: skip
    parser.add_argument(
        "overrides", nargs="*", help="rpr-nmt-train overrides after the recipe's, given first"
    )
    args = parser.parse_args(argv)
    if args.updates < 1:
        parser.error(f"--updates must be at least 1, got {args.updates}")
    if args.json and (problem := destination_problem(args.json)):
        refuse(f"--json {args.json}: {problem}")
    others = [read_other(path) for path in args.against]  # a bad file is refused before training
    command = train_command(args.updates, args.precision, args.overrides)
    ours = " ".join(command)
    same = [other for other in others if compared(other.command) == compared(ours)]
    for other in others:
        if other not in same:
            print(f"{other.path}: another command ({differing(other.command, ours)}): left out")
    if others and not same and not args.json:
        print(
            "bf16_hosts: nothing to compare: no --against file is of this command, so nothing "
            "trained (with --json it trains and writes this host's losses all the same)",
            file=sys.stderr,
        )
        return 3
    with tempfile.TemporaryDirectory() as tmp:
        losses, code = train_losses(command, Path(tmp) / "run")
    # The flags' class, and what torch makes of it here (kernels held by ONEDNN_MAX_CPU_ISA, ...).
    bf16 = bf16_support(torch.device("cpu")).reason
    host = {**host_record("cpu"), "threads": THREADS, "bf16": bf16}  # the run's, not this process's
    print(f"this host: {host['cpu']} ({host['bf16']}), {args.precision}, {len(losses)} updates")
    print("losses: " + " ".join(f"{x:.6f}" for x in losses))
    if args.json:
        record = {"host": host, "precision": args.precision, "code": code, "command": ours,
                  "losses": losses}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")
        print(f"written: {args.json}")
    if others and compare(same, losses, code["arithmetic"]) == 0:
        print(f"bf16_hosts: nothing compared: all {len(others)} --against files left out",
              file=sys.stderr)  # fmt: skip
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
