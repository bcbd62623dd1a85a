"""What a run reports as it trains: a progress bar, log lines, TensorBoard scalars, metrics.jsonl.

Only rank 0 reports; the other ranks get a Monitor with enabled=False whose methods do nothing.

    <run_dir>/train.log        Python logging (Hydra's file handler)
    <run_dir>/tb/              TensorBoard events: train/loss, train/ppl, lr, grad_norm,
                               tokens_per_sec, train/skipped_updates, valid/loss, valid/ppl,
                               valid/bleu
    <run_dir>/metrics.jsonl    one JSON line per log or validation event (the resume test reads it)
"""

from __future__ import annotations

import json
import logging
import math
import resource
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from rpr_nmt.data.cache import atomic_write

log = logging.getLogger("rpr_nmt.train")


def perplexity(nll_per_token: float) -> float:
    """exp of the per-token cross-entropy; inf instead of an overflow for a diverged run."""
    return math.exp(nll_per_token) if nll_per_token < 700 else math.inf


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory: CUDA's max_memory_allocated, or the CPU resident set's high-water mark.

    On Linux the mark is this process's own (VmHWM of its address space): getrusage's ru_maxrss
    carries the launching process's peak across fork and exec, so a run started by a large process
    (a benchmark, a launcher) would report its parent's figure. Elsewhere, ru_maxrss."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux and BSD report KiB


class QuietEventWriterErrors:
    """threading.excepthook: TensorBoard's writer thread raises its OSError (a run folder removed
    under the trainer) again in the trainer at the next scalar, where it becomes one line; the
    thread's own traceback would read as a second crash. Every other error goes to `previous`."""

    def __init__(self, previous: Callable[[threading.ExceptHookArgs], Any]) -> None:
        self.previous = previous

    def __call__(self, args: threading.ExceptHookArgs) -> None:
        writer_thread = type(args.thread).__name__ == "_AsyncWriterThread"
        if writer_thread and isinstance(args.exc_value, OSError):
            return
        self.previous(args)


def drop_metrics_after(path: Path, step: int) -> None:
    """Remove the lines of metrics.jsonl logged after `step`: a run resumed from an earlier
    checkpoint than its last log (a crash between saves) redoes those updates and logs them again.
    A line torn by the crash goes too. Rewritten atomically, only when something is removed."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if _logged_step(line) <= step]
    if len(kept) < len(lines):
        atomic_write(path, "".join(kept).encode("utf-8"))


def _logged_step(line: str) -> float:
    """The update a metrics line was logged at; infinite for a line that is not a JSON object."""
    try:
        return float(json.loads(line).get("step", 0))
    except (ValueError, AttributeError):
        return math.inf


class Monitor:
    """Progress bar, log lines, TensorBoard and metrics.jsonl of one run.

    Args:
        run_dir: the run directory.
        enabled: False on ranks other than 0.
        start_step: updates already done (a resumed run's bar starts there).
        max_steps: the last update.
        time_limit_minutes: train.max_time_minutes; when set, the bar counts the seconds of the
            limit instead of updates, so that its total and ETA follow the limit.
        run_seconds: seconds of the run already spent (earlier sessions count against the limit).
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        enabled: bool,
        start_step: int,
        max_steps: int,
        time_limit_minutes: float | None = None,
        run_seconds: float = 0.0,
    ) -> None:
        self.enabled = enabled
        self.writer = None
        self.bar = None
        self.metrics = None
        if not enabled:
            return
        from torch.utils.tensorboard import SummaryWriter

        if not isinstance(threading.excepthook, QuietEventWriterErrors):
            threading.excepthook = QuietEventWriterErrors(threading.excepthook)
        self.writer = SummaryWriter(log_dir=str(run_dir / "tb"), purge_step=start_step + 1)
        drop_metrics_after(run_dir / "metrics.jsonl", start_step)  # as TensorBoard's purge_step
        self.metrics = open(run_dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self.timed = time_limit_minutes is not None
        if self.timed:
            total = max(round(time_limit_minutes * 60), 1)
            bar = dict(total=total, initial=min(round(run_seconds), total), unit="s")
        else:
            bar = dict(total=max_steps, initial=start_step, unit="step")
        self.bar = tqdm(desc="train", dynamic_ncols=True, **bar)

    def step(self, step: int, figures: dict[str, float]) -> None:
        """Advance the bar and show the update's figures (loss, lr, tokens/s).

        Under a time limit the trainer also passes `run_seconds` (the bar moves to it) and
        `minutes_left` (shown), and the update count appears as `step`.
        """
        if self.bar is not None:
            time_limit: dict[str, str] = {}
            if self.timed:
                seconds = min(round(figures["run_seconds"]), self.bar.total)
                self.bar.update(seconds - self.bar.n)
                time_limit["step"] = str(step)
            else:
                self.bar.update(1)
            left = figures.get("minutes_left")
            if left is not None:
                time_limit["time_left"] = f"{max(left, 0.0):.1f}min"
            self.bar.set_postfix(
                loss=f"{figures['loss']:.3f}", lr=f"{figures['lr']:.2e}",
                tok_s=f"{figures['tokens_per_sec']:.0f}", **time_limit, refresh=False,
            )  # fmt: skip

    def train(self, step: int, figures: dict[str, float]) -> None:
        """Report the training figures averaged since the last report."""
        if not self.enabled:
            return
        log.info(
            "step %d | loss %.4f | ppl %.2f | lr %.3e | grad_norm %.3f | %.0f tok/s",
            step, figures["loss"], figures["ppl"], figures["lr"], figures["grad_norm"],
            figures["tokens_per_sec"],
        )  # fmt: skip
        for name in ("loss", "ppl"):
            self.writer.add_scalar(f"train/{name}", figures[name], step)
        for name in ("lr", "grad_norm", "tokens_per_sec"):
            self.writer.add_scalar(name, figures[name], step)
        self._record("train", step, figures)

    def valid(self, step: int, figures: dict[str, float]) -> None:
        """Report validation figures (loss, ppl and, when computed, bleu)."""
        if not self.enabled:
            return
        text = " | ".join(f"{k} {v:.4f}" for k, v in figures.items())
        log.info("step %d | valid | %s", step, text)
        for name, value in figures.items():
            self.writer.add_scalar(f"valid/{name}", value, step)
        self.writer.flush()
        self._record("valid", step, figures)

    def skipped(self, step: int, total: int) -> None:
        """An update skipped for a non-finite loss or gradient: a warning, and the run's count
        of skipped updates in TensorBoard (train/skipped_updates) and metrics.jsonl."""
        if not self.enabled:
            return
        log.warning("non-finite loss or gradient at update %d: skipped (%d so far)", step, total)
        self.writer.add_scalar("train/skipped_updates", total, step)
        self._record("skipped", step, {"skipped_updates": total})

    def _record(self, kind: str, step: int, figures: dict[str, float]) -> None:
        self.metrics.write(json.dumps({"kind": kind, "step": step, **figures}) + "\n")
        self.metrics.flush()

    def close(self) -> None:
        """Close the bar, the event file and metrics.jsonl (Hydra multirun reuses the process)."""
        if self.bar is not None:
            self.bar.close()
        if self.writer is not None:
            self.writer.close()
        if self.metrics is not None:
            self.metrics.close()
        self.bar = self.writer = self.metrics = None


class TrainWindow:
    """Training figures accumulated between two log lines."""

    def __init__(self) -> None:
        self.loss = self.nll = self.tokens = self.tgt = self.seconds = self.norm = 0.0
        self.steps = 0
        self.lr = 0.0

    def add(self, result: Any, lr: float, seconds: float) -> None:
        """Count an update (a StepResult); skipped updates count nothing."""
        if not result.applied:
            return
        self.loss += result.loss * result.n_tgt_tokens
        self.nll += result.nll * result.n_tgt_tokens
        self.tgt += result.n_tgt_tokens
        self.tokens += result.n_src_tokens + result.n_tgt_tokens
        self.seconds += seconds
        self.norm += result.grad_norm
        self.steps += 1
        self.lr = lr

    def figures(self) -> dict[str, float]:
        """Token-weighted loss and perplexity, last lr, mean grad norm, tokens per second."""
        tgt, steps = max(self.tgt, 1.0), max(self.steps, 1)
        return {
            "loss": self.loss / tgt,
            "ppl": perplexity(self.nll / tgt),
            "lr": self.lr,
            "grad_norm": self.norm / steps,
            "tokens_per_sec": self.tokens / max(self.seconds, 1e-9),
        }


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """Write train_summary.json (atomically: a temporary file, then rename)."""
    atomic_write(path, (json.dumps(summary, indent=2, default=str) + "\n").encode())
