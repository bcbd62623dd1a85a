"""Benchmark the CTranslate2 export against rpr-nmt: speed, BLEU, chrF and agreement, one sitting.

    .venv/bin/python scripts/bench_export.py --checkpoint runs/demo/checkpoints/last.pt
    .venv/bin/python scripts/bench_export.py --checkpoint last.pt --split val --limit 200 \\
        --threads 2 --repeats 2 --out docs-table.md

Loads the checkpoint as rpr-nmt-evaluate does (load_for_inference, EMA weights by default; the
split's sources and references with read_parallel_text from the checkpoint's data config), exports
it to CTranslate2 in float32 and int8 into a temporary folder (export_ctranslate2), then decodes the
whole split with rpr-nmt fp32 (greedy and beam N), rpr-nmt bf16 (beam N) and CTranslate2 float32
and int8 (greedy and beam N, through translate_ctranslate2, which applies our decoding rules).
Only decoding is timed (best of --repeats); loading, the bf16 copy, export and scoring are not.
Scores are score_corpus's (sacreBLEU on detokenised text, chrF), as rpr-nmt-evaluate prints them.

Threads, the same layout for both engines (docs/performance.md, "Decoding"): T = --threads,
S = --streams. Ours: torch.set_num_threads(T), decode.streams = S (S batches at once, each on its
own thread with T / S intra-op threads). CTranslate2: inter_threads = S, intra_threads = T / S
(translate_ctranslate2 submits all its batches at once, so S workers decode S batches at a time).
--streams 1 gives both engines T threads on one batch at a time.

Prints one Markdown table; --out also writes it to a file. A model CTranslate2 cannot represent,
a bad checkpoint or missing data, and a missing ctranslate2 package exit with one line, status 2.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import torch

from rpr_nmt.checkpoint import CheckpointError, load_for_inference
from rpr_nmt.config import DecodeConfig, TrainJobConfig
from rpr_nmt.data import DataError, Tokenizer, read_parallel_text
from rpr_nmt.decode import Hypothesis, translate
from rpr_nmt.decode.translate import decoding_model
from rpr_nmt.evaluate import Scores, detokenize, score_corpus
from rpr_nmt.export import (
    ExportError,
    PositionLimits,
    export_ctranslate2,
    read_position_limits,
    translate_ctranslate2,
)
from rpr_nmt.model import Transformer
from rpr_nmt.precision import host_summary, matmul_ceilings

PROG = "bench_export.py"
QUANTIZATIONS = ("float32", "int8")  # the CTranslate2 weight types compared
ENV_SHOWN = ("PYTHONPATH", "RPR_NMT_DATA", "RPR_NMT_CACHE", "OMP_NUM_THREADS", "MALLOC_MMAP_MAX_")
WARMUP_SENTENCES = 16  # decoded once, untimed, before each timing (first-call set-up costs)
_T = TypeVar("_T")
NBest = list[Hypothesis]  # one sentence's hypotheses, best first ([] = no output)


class BenchError(Exception):
    """A setup problem to report in one line (exit status 2)."""


@dataclass(frozen=True)
class Run:
    """One decoding of the split: an engine, its weights, a beam size, time and outputs."""

    engine: str  # "rpr-nmt" or "CTranslate2"
    weights: str  # fp32 / bf16 (ours), float32 / int8 (CTranslate2)
    beam: int  # 1 = greedy
    seconds: float  # decoding time, best of the repeats
    outputs: list[NBest]  # per sentence, in input order

    @property
    def is_reference(self) -> bool:
        """rpr-nmt fp32: what the other runs at the same beam size are compared with."""
        return (self.engine, self.weights) == ("rpr-nmt", "fp32")


@dataclass(frozen=True)
class Row:
    """One line of the table: an engine, its weights, a beam size and what it gave."""

    engine: str  # "rpr-nmt" or "CTranslate2"
    weights: str  # fp32 / bf16 (ours), float32 / int8 (CTranslate2)
    beam: int  # 1 = greedy
    speed: float  # sentences per second (best of the repeats)
    bleu: float
    chrf: float
    identical: float | None  # share of outputs equal to rpr-nmt fp32 at this beam; None = itself


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a head-shared checkpoint")
    parser.add_argument("--split", default=None, help="default: the data config's test split")
    parser.add_argument("--limit", type=int, default=None, help="first N sentences; default all")
    parser.add_argument("--weights", choices=["ema", "raw"], default="ema")
    parser.add_argument("--beam", type=int, default=4, help="beam width compared with greedy")
    parser.add_argument("--alpha", type=float, default=0.6, help="length penalty")
    parser.add_argument("--batch", type=int, default=128, help="sentences per batch (both)")
    parser.add_argument("--threads", type=int, default=2, help="threads in all, for each engine")
    parser.add_argument("--streams", type=int, default=2, help="ours: decode.streams; CT2: inter")
    parser.add_argument("--repeats", type=int, default=1, help="best of N timings")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    for name in ("beam", "batch", "threads", "streams", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.beam == 1:
        parser.error("--beam 1 is the greedy row already: give the beam to compare, e.g. 4")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, got {args.limit}")
    if args.streams > args.threads:
        parser.error(f"--streams {args.streams} exceeds --threads {args.threads}")
    return args


def require_ctranslate2() -> Any:
    """The ctranslate2 module, or BenchError saying how to install the optional extra."""
    try:
        import ctranslate2
    except ImportError as e:
        raise BenchError(
            "the ctranslate2 package is not installed: pip install -e '.[export]'"
        ) from e
    return ctranslate2


def thread_layout(threads: int, streams: int) -> tuple[int, int]:
    """(streams, intra-op threads per stream): CTranslate2's (inter_threads, intra_threads)."""
    return streams, max(1, threads // streams)


def identical_share(outputs: Sequence[NBest], reference: Sequence[NBest]) -> float:
    """Share of sentences whose best hypothesis has the same tokens in both (no hypothesis counts
    as the empty output)."""
    if len(outputs) != len(reference):
        raise ValueError(f"{len(outputs)} outputs against {len(reference)} reference outputs")
    if not outputs:
        return 0.0
    same = sum(_best(a) == _best(b) for a, b in zip(outputs, reference))
    return same / len(outputs)


def _best(nbest: NBest) -> list[int]:
    return list(nbest[0].tokens) if nbest else []


def best_of(run: Callable[[], _T], repeats: int, warmup: Callable[[], object]) -> tuple[float, _T]:
    """(fastest wall-clock seconds of `repeats` calls of run, the last result), after one untimed
    call of warmup (first-call costs: thread pools, kernel selection, allocator growth)."""
    warmup()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def pieces_to_nbest(pieces: Sequence[Sequence[list[str]]], tokenizer: Tokenizer) -> list[NBest]:
    """translate_ctranslate2's pieces as our hypotheses (ids; CT2's scores are not returned)."""
    ids = {tokenizer.id_to_piece(i): i for i in range(tokenizer.vocab_size)}
    return [[Hypothesis([ids[p] for p in hyp], float("nan")) for hyp in nbest] for nbest in pieces]


def decode_ours(
    model: Transformer, tokenizer: Tokenizer, sources: list[str], cfg: DecodeConfig, repeats: int
) -> tuple[float, list[NBest]]:
    """Timed translate() of all sources. `model` is already at cfg.precision (the bf16 copy is
    made once, outside the timing), so translate is told fp32: it then decodes the model as is."""
    as_is = replace(cfg, precision="fp32")
    return best_of(
        lambda: translate(model, tokenizer, sources, as_is),
        repeats,
        lambda: translate(model, tokenizer, sources[:WARMUP_SENTENCES], as_is),
    )


def decode_ct2(
    translator: Any,
    tokenizer: Tokenizer,
    sources: list[str],
    cfg: DecodeConfig,
    repeats: int,
    limits: PositionLimits,
) -> tuple[float, list[NBest]]:
    """Timed translate_ctranslate2 of all sources (our rules: caps, min_len, suppressed ids, and
    the learned tables' `limits`)."""
    seconds, pieces = best_of(
        lambda: translate_ctranslate2(translator, tokenizer, sources, cfg, limits=limits),
        repeats,
        lambda: translate_ctranslate2(
            translator, tokenizer, sources[:WARMUP_SENTENCES], cfg, limits=limits
        ),
    )
    return seconds, pieces_to_nbest(pieces, tokenizer)


def score(tokenizer: Tokenizer, outputs: Sequence[NBest], refs: list[str], lang: str) -> Scores:
    """score_corpus of the detokenised best hypotheses (rpr-nmt-evaluate's text)."""
    return score_corpus([detokenize(tokenizer, nbest) for nbest in outputs], refs, lang)


def export_all(
    model: Transformer, tokenizer: Tokenizer, folder: Path, info: dict[str, Any]
) -> dict[str, Path]:
    """CTranslate2 folders of the model, one per weight type in QUANTIZATIONS."""
    return {
        q: export_ctranslate2(model, tokenizer, folder / q, quantization=q, info=info)
        for q in QUANTIZATIONS
    }


def load_split(
    args: argparse.Namespace,
) -> tuple[Transformer, Tokenizer, TrainJobConfig, str, list[str], list[str]]:
    """The model (rpr-nmt-evaluate's loading), its tokenizer and config, the split's name, its
    first --limit sources and references (read_parallel_text on the checkpoint's data config)."""
    model, tokenizer, config = load_for_inference(
        [args.checkpoint], "cpu", use_ema=args.weights == "ema"
    )
    split = args.split or config.data.test_split
    sources, refs = read_parallel_text(config.data, split)
    return model, tokenizer, config, split, sources[: args.limit], refs[: args.limit]


def run_bench(
    args: argparse.Namespace, ct2: Any, host: Callable[[], str]
) -> tuple[list[Row], dict[str, Any]]:
    """Load, export, decode every (engine, weights, beam), score; returns rows and the context.

    `host` gives the header's host line (the matmul ceilings: seconds, minutes where bf16 is
    emulated); it is measured once the export has succeeded and before decoding, on an idle
    machine, so a refused checkpoint or a missing package is told at once."""
    model, tokenizer, config, split, sources, refs = load_split(args)
    lang = config.data.tgt_lang
    inter, intra = thread_layout(args.threads, args.streams)
    base = DecodeConfig(
        length_penalty=args.alpha, max_sentences=args.batch, streams=args.streams, device="cpu"
    )
    runs: list[Run] = []
    load = load_average()
    with tempfile.TemporaryDirectory(prefix="bench_export-") as tmp:
        info = {"checkpoint": str(args.checkpoint), "weights": args.weights}
        folders = export_all(model, tokenizer, Path(tmp), info)  # first: a refusal exits early
        host_line = host()
        ours = {"fp32": model, "bf16": decoding_model(model, "bf16")}
        for precision, beam in [("fp32", 1), ("fp32", args.beam), ("bf16", args.beam)]:
            cfg = replace(base, beam_size=beam, precision=precision)
            seconds, out = decode_ours(ours[precision], tokenizer, sources, cfg, args.repeats)
            runs.append(Run("rpr-nmt", precision, beam, seconds, out))
        for quantization, folder in folders.items():
            translator = ct2.Translator(
                str(folder), device="cpu", inter_threads=inter, intra_threads=intra
            )
            for beam in (1, args.beam):
                cfg = replace(base, beam_size=beam)
                limits = read_position_limits(folder)
                seconds, out = decode_ct2(translator, tokenizer, sources, cfg, args.repeats, limits)
                runs.append(Run("CTranslate2", quantization, beam, seconds, out))
            del translator  # its threads go before the next folder's translator starts
    rows, signatures = make_rows(runs, tokenizer, refs, lang)
    context = dict(split=split, sentences=len(sources), decode=base, scores=signatures)
    context.update(load=load, host=host_line)
    return rows, context


def make_rows(
    runs: Sequence[Run], tokenizer: Tokenizer, refs: list[str], lang: str
) -> tuple[list[Row], Scores]:
    """Table rows, greedy rows first, and the last row's scores (for the sacreBLEU signatures,
    the same for every row); agreement against rpr-nmt fp32 at the same beam size."""
    reference = {run.beam: run.outputs for run in runs if run.is_reference}
    rows = []
    for run in sorted(runs, key=lambda r: r.beam):
        scores = score(tokenizer, run.outputs, refs, lang)
        same = None if run.is_reference else identical_share(run.outputs, reference[run.beam])
        speed = len(run.outputs) / run.seconds if run.seconds > 0 else float("inf")
        rows.append(Row(run.engine, run.weights, run.beam, speed, scores.bleu, scores.chrf, same))
    return rows, scores


def format_table(rows: Sequence[Row]) -> str:
    """The Markdown table, one line per row."""
    lines = [
        "| engine | weights | beam | sentences/s | BLEU | chrF | identical to rpr-nmt fp32 |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        beam = "1 (greedy)" if r.beam == 1 else str(r.beam)
        same = "(reference)" if r.identical is None else f"{100 * r.identical:.1f}%"
        lines.append(
            f"| {r.engine} | {r.weights} | {beam} | {r.speed:.1f} | {r.bleu:.2f} | "
            f"{r.chrf:.2f} | {same} |"
        )
    return "\n".join(lines)


def command_line(argv: Sequence[str], env: dict[str, str]) -> str:
    """The command as typed from the repository root: the settings that matter, python, args."""
    python = Path(sys.executable)
    if python.is_relative_to(Path.cwd()):
        python = python.relative_to(Path.cwd())
    settings = [f"{name}={env[name]}" for name in ENV_SHOWN if name in env]
    return shlex.join([*settings, str(python), *argv])


def load_average() -> str:
    """The host's 1-minute load average (other jobs share the CPUs), "n/a" where unknown."""
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


def header(args: argparse.Namespace, ct2: Any, context: dict[str, Any], argv: list[str]) -> str:
    """Date, host, versions, threads, checkpoint, data, decode settings and the exact command."""
    cfg: DecodeConfig = context["decode"]
    inter, intra = thread_layout(args.threads, args.streams)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        f"{now}; {platform.platform()}, {os.cpu_count()} CPUs, load average {context['load']} "
        f"before decoding; torch {torch.__version__}, ctranslate2 {ct2.__version__}",
        context["host"],
        f"threads: {args.threads} in all for each engine. rpr-nmt: torch.set_num_threads("
        f"{args.threads}), decode.streams={args.streams} ({intra} per stream); CTranslate2: "
        f"inter_threads={inter}, intra_threads={intra}",
        f"checkpoint {args.checkpoint} ({args.weights} weights); {context['split']}, "
        f"{context['sentences']} sentences; alpha {cfg.length_penalty}, max length "
        f"{cfg.max_len_a} * S + {cfg.max_len_b}, min_len {cfg.min_len}, {cfg.max_sentences} "
        f"sentences per batch; sentences/s: best of {args.repeats}, decoding only",
        f"BLEU {context['scores'].signature}; chrF {context['scores'].chrf_signature}",
        f"command: {command_line(argv, dict(os.environ))}",
    ])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 with one line on stderr on a setup problem)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        ct2 = require_ctranslate2()
        rows, context = run_bench(args, ct2, host=lambda: host_summary(matmul_ceilings()))
    except (BenchError, CheckpointError, DataError, ExportError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    text = header(args, ct2, context, [sys.argv[0], *argv]) + "\n\n" + format_table(rows) + "\n"
    print("\n" + text, end="")
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
