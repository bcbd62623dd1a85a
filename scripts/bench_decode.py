"""Benchmark decoding: sentences/s of beam search on Multi30k test_2016_flickr (1000 sentences).

    .venv/bin/python scripts/bench_decode.py                        # random transformer_small
    .venv/bin/python scripts/bench_decode.py --checkpoint runs/.../checkpoints/best.pt
    python scripts/bench_decode.py --device cuda --model transformer_base --batch 256 --streams 1

With --checkpoint the trained model decodes freely and the table adds BLEU, so fp32 and bf16 can be
compared on quality too. Without one, a random transformer_small (8k BPE vocabulary from the data
cache) stands in; a random model's outputs run to the length limit, so each hypothesis is forced
to the reference's BPE length (EOS masked before it and forced at it, see ForcedLengths), which
makes the number of decoder steps, and so the timing, realistic. The table compares cached decoding
with recomputing the whole prefix at every step (UncachedModel), and fp32 with bf16 (a bf16 copy of
the model, as decode.precision=bf16 decodes).
Prints one Markdown table (the figures in docs/performance.md, "## Decoding").
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from torch import Tensor

from rpr_nmt.config import DataConfig, ModelConfig
from rpr_nmt.decode import UncachedModel, beam_search
from rpr_nmt.decode.translate import (
    decode_in_streams,
    decoding_model,
    length_sorted_batches,
    pad_batch,
)
from rpr_nmt.model import resolve_device
from rpr_nmt.precision import host_summary, matmul_ceilings

REPO = Path(__file__).resolve().parent.parent


@dataclass
class _Forced:
    """Encoder output plus each row's forced output length."""

    inner: Any
    length: Tensor  # (A,) one per sentence

    def index_select(self, index: Tensor) -> _Forced:
        return _Forced(self.inner.index_select(index), self.length.index_select(0, index))


class ForcedLengths:
    """Wraps a model so that each hypothesis ends exactly after its sentence's reference length.

    One wrapper per batch, `lengths` (B,) its sentences' reference lengths: EOS is masked while
    t < length and made overwhelmingly likely at t == length (t = tokens generated so far).
    """

    def __init__(self, model: Any, eos_id: int, lengths: Tensor) -> None:
        self.model, self.eos_id, self.lengths = model, eos_id, lengths

    def encode(self, src: Tensor) -> _Forced:
        return _Forced(self.model.encode(src), self.lengths.to(src.device))

    def decode_step(self, tgt: Tensor, enc: _Forced, cache: Any) -> tuple[Tensor, Any]:
        logits, cache = self.model.decode_step(tgt, enc.inner, cache)  # (R, 1, V)
        t = cache.length - 1  # tokens generated before the one predicted now (BOS excluded)
        length = enc.length.repeat_interleave(tgt.size(0) // enc.length.size(0))  # (R,) per beam
        eos = logits[:, -1, self.eos_id]
        eos = torch.where(length > t, float("-inf"), eos)
        eos = torch.where(length == t, logits[:, -1].amax(-1) + 20.0, eos)
        logits[:, -1, self.eos_id] = eos
        return logits, cache


def yaml_config(schema: type, path: Path) -> Any:
    """A configs/ group file merged onto its dataclass schema, as that dataclass (resolved)."""
    node = OmegaConf.load(path)
    node.pop("defaults", None)
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), node))


def random_setup(args: argparse.Namespace) -> tuple[Any, Any, list[list[int]], list[int]]:
    """Random model (--model), the cached BPE, encoded test sources and reference lengths."""
    from rpr_nmt.data import prepare_data
    from rpr_nmt.model import build_model

    os.environ.setdefault("RPR_NMT_DATA", str(args.data_root))
    data_cfg = yaml_config(DataConfig, REPO / "configs" / "data" / "multi30k_en_de.yaml")
    data = prepare_data(data_cfg, splits=[args.split], log=lambda _: None)
    corpus = data.splits[args.split]
    torch.manual_seed(0)
    model_cfg = yaml_config(ModelConfig, REPO / "configs" / "model" / f"{args.model}.yaml")
    model = build_model(model_cfg, vocab_size=data.tokenizer.vocab_size, pad_id=0).eval()
    eos = data.tokenizer.eos_id
    sources = [list(map(int, s)) + [eos] for s in corpus.src][: args.sentences]
    return model, data.tokenizer, sources, [len(t) for t in corpus.tgt][: args.sentences]


def run(model: Any, sources: list[list[int]], lengths: list[int] | None, args):
    """Decode all sources with `model` at its own precision; returns (seconds, hypotheses in
    input order)."""
    out: list[Any] = [None] * len(sources)

    def decode(batch: list[int]) -> list[Any]:
        src = pad_batch([sources[i] for i in batch], 0, args.device)
        decoder = model
        if lengths is not None:  # one wrapper per batch: streams decode batches concurrently
            decoder = ForcedLengths(model, 3, torch.tensor([lengths[i] for i in batch]))
        return beam_search(
            decoder, src, beam_size=args.beam, length_penalty=args.alpha,
            max_len_a=1.2, max_len_b=10, min_len=1, nbest=1, bos_id=2, eos_id=3, pad_id=0,
        )  # fmt: skip

    start = time.perf_counter()
    batches = list(length_sorted_batches([len(s) for s in sources], args.batch))
    for batch, hyps in zip(batches, decode_in_streams(decode, batches, args.streams)):
        for i, h in zip(batch, hyps):
            out[i] = h
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.environ.get("RPR_NMT_DATA", str(REPO.parent / "shared" / "data"))
    parser.add_argument("--data-root", type=Path, default=Path(default_root))
    parser.add_argument("--checkpoint", type=Path, default=None, help="trained model to decode")
    parser.add_argument("--model", default="transformer_small", help="random model's config")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    parser.add_argument("--split", default="test_2016_flickr")
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--uncached-sentences", type=int, default=256, help="0 = skip uncached")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--batch", type=int, default=64, help="sentences per batch")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in all")
    parser.add_argument(
        "--streams", type=int, default=2, help="batches decoded at once (decode.streams)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="best of N timings")
    args = parser.parse_args()
    for name in ("sentences", "repeats", "beam", "batch", "streams", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: at least 1")
    if args.uncached_sentences < 0:
        parser.error(f"--uncached-sentences {args.uncached_sentences}: 0 skips uncached, or more")
    torch.set_num_threads(args.threads)
    print(host_summary(matmul_ceilings()), flush=True)
    args.device = resolve_device(args.device)

    refs: list[str] | None = None
    if args.checkpoint is not None:
        from rpr_nmt.checkpoint import load_for_inference
        from rpr_nmt.data import read_parallel_text

        model, tokenizer, config = load_for_inference([args.checkpoint], args.device)
        src_text, refs = read_parallel_text(config.data, args.split)
        sources = [tokenizer.encode(s) + [tokenizer.eos_id] for s in src_text][: args.sentences]
        refs, lengths = refs[: args.sentences], None
    else:
        model, tokenizer, sources, lengths = random_setup(args)
        model = model.to(args.device)

    rows = []
    modes = [("cached", "fp32"), ("cached", "bf16"), ("uncached", "fp32")]
    for kind, precision in modes:
        n = len(sources) if kind == "cached" else min(args.uncached_sentences, len(sources))
        if n == 0:
            continue
        m = decoding_model(model, precision)  # bf16: a bf16 copy, as rpr-nmt-translate does
        m = m if kind == "cached" else UncachedModel(m)
        ls = None if lengths is None else lengths[:n]
        seconds, hyps = min(
            (run(m, sources[:n], ls, args) for _ in range(args.repeats)),
            key=lambda r: r[0],
        )
        out_len = sum(len(h[0].tokens) for h in hyps) / n
        bleu = ""
        if refs is not None:
            from rpr_nmt.evaluate import score_corpus

            texts = [tokenizer.decode(h[0].tokens) for h in hyps]
            bleu = f"{score_corpus(texts, refs[:n], 'de').bleu:.2f}"
        rows.append((kind, precision, n, seconds, n / seconds, out_len, bleu))

    what = f"checkpoint {args.checkpoint}" if args.checkpoint else f"random {args.model}"
    what += "" if args.checkpoint else ", outputs forced to the reference lengths"
    where = torch.cuda.get_device_name(args.device) if args.device.type == "cuda" else "CPU"
    print(f"\n{platform.machine()}, {os.cpu_count()} CPUs, {where}, torch {torch.__version__}, "
          f"{args.threads} threads; beam {args.beam}, alpha {args.alpha}, "
          f"batch {args.batch}, {args.streams} streams; {what}\n")  # fmt: skip
    print("| decoder | precision | sentences | seconds | sentences/s | mean output tokens | BLEU |")
    print("|---|---|---|---|---|---|---|")
    for kind, precision, n, seconds, speed, out_len, bleu in rows:
        print(
            f"| {kind} | {precision} | {n} | {seconds:.2f} | {speed:.1f} | {out_len:.1f} | {bleu} |"
        )
    cached = next(r for r in rows if r[:2] == ("cached", "fp32"))
    for r in rows:
        if r[0] == "uncached":
            print(f"\ncached / uncached speed (fp32): {cached[4] / r[4]:.2f}x")


if __name__ == "__main__":
    main()
