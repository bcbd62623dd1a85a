"""Do two CPU classes train a run to the same numbers? The first updates of a published setting.

The word-order study on unseen lengths sets runs trained on one CPU class beside runs trained on
another (docs/results.md, "Unseen lengths"): bf16 matrix products run through other kernels on
AMX, on AVX512-BF16 without AMX and on AVX2, and may round otherwise. This trains the first
--updates updates of the length study's sinusoid run at its recipe
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
the file records the command, so that only files of the same command are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from rpr_nmt.precision import bf16_support  # noqa: E402
from rpr_nmt.train.provenance import code_record, host_record  # noqa: E402

THREADS = 1  # torch threads per run, as the sweeps trained
RECIPE = [
    "experiment=length_generalisation", "hydra.mode=RUN", "positions=absolute", "train=cpu_short",
    "train.seed=1", "train.max_time_minutes=null", "train.log_every=1", "train.valid_every=100000",
    "train.save_every=100000", "train.valid_bleu=false", "train.evaluate_at_end=false",
]  # fmt: skip


def train_losses(
    updates: int, precision: str, out: Path, extra: list[str]
) -> tuple[list[str], list[float]]:
    """The command and the training loss of each of the first `updates` updates on this host;
    `extra` overrides go after the recipe's."""
    overrides = [*RECIPE, f"train.precision={precision}", f"train.max_steps={updates}", *extra]
    command = [sys.executable, "-m", "rpr_nmt.cli.train", *overrides, f"hydra.run.dir={out}"]
    env = {**os.environ, "OMP_NUM_THREADS": str(THREADS)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"bf16_hosts: training failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").open()]
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    return ["rpr-nmt-train", *overrides], losses


def parting(ours: list[float], theirs: list[float]) -> str:
    """Where two loss curves first differ, in words; "same" when every loss is equal as a float."""
    n = min(len(ours), len(theirs))
    for i in range(n):
        if ours[i] != theirs[i]:
            last = abs(ours[n - 1] - theirs[n - 1]) / abs(theirs[n - 1])
            return (
                f"first differs at update {i + 1}: {ours[i]!r} here, {theirs[i]!r} there; "
                f"at update {n}: {ours[n - 1]:.6f} against {theirs[n - 1]:.6f} "
                f"(relative difference {last:.1e})"
            )
    if len(ours) != len(theirs):
        return f"the same for the {n} updates both trained ({len(ours)} here, {len(theirs)} there)"
    return f"same: all {n} losses equal to the last bit"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=20, help="updates to train, e.g. 20")
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--json", type=Path, help="write this host's losses here")
    parser.add_argument("--against", type=Path, nargs="*", default=[],
                        help="files other hosts wrote with --json")  # fmt: skip
    parser.add_argument(
        "overrides", nargs="*", help="rpr-nmt-train overrides after the recipe's, given first"
    )
    args = parser.parse_args(argv)
    if args.updates < 1:
        parser.error(f"--updates must be at least 1, got {args.updates}")
    others = []
    for path in args.against:  # read first: a bad file is refused before anything trains
        try:
            other = json.loads(path.read_text())
            others.append((path, other["command"], other["losses"], other["host"]))
        except (OSError, ValueError, KeyError) as e:
            parser.error(f"--against {path}: not a file this script wrote ({e})")
    with tempfile.TemporaryDirectory() as tmp:
        command, losses = train_losses(
            args.updates, args.precision, Path(tmp) / "run", args.overrides
        )
    # The flags' class, and what torch makes of it here (kernels held by ONEDNN_MAX_CPU_ISA, ...).
    bf16 = bf16_support(torch.device("cpu")).reason
    host = {**host_record("cpu"), "threads": THREADS, "bf16": bf16}  # the run's, not this process's
    print(f"this host: {host['cpu']} ({host['bf16']}), {args.precision}, {len(losses)} updates")
    print("losses: " + " ".join(f"{x:.6f}" for x in losses))
    if args.json:
        record = {"host": host, "precision": args.precision, "code": code_record(),
                  "command": " ".join(command), "losses": losses}  # fmt: skip
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n")
        print(f"written: {args.json}")
    for path, their_command, theirs, their_host in others:
        if their_command != " ".join(command):
            print(f"{path}: another command ({their_command}): left out")
            continue
        there = f"{their_host.get('cpu', '?')} ({their_host.get('bf16', their_host.get('kind'))})"
        print(f"against {path} ({there}): {parting(losses, theirs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
