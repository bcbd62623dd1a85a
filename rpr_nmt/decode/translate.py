"""Raw sentences in, hypotheses out: tokenise, batch by length, beam search, restore the input
order."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

import torch
from torch import Tensor, nn

from rpr_nmt.config import DecodeConfig
from rpr_nmt.decode.beam import Hypothesis, beam_search
from rpr_nmt.decode.constraints import check_sources_fit, position_limits
from rpr_nmt.decode.greedy import greedy_search
from rpr_nmt.model import Transformer
from rpr_nmt.precision import resolve_precision

_Batch = TypeVar("_Batch")
_Result = TypeVar("_Result")


class TextTokenizer(Protocol):
    """What decoding needs from rpr_nmt.data.Tokenizer."""

    pad_id: int
    bos_id: int
    eos_id: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


def check_decode_config(cfg: DecodeConfig) -> None:
    """Refuse decode settings that cannot work (ValueError names the setting and its value).

    decode.device is checked where the model is placed (rpr_nmt.model.resolve_device).
    """
    if not isinstance(cfg, DecodeConfig):
        raise TypeError(
            f"decoding takes a DecodeConfig, got {type(cfg).__name__}; "
            "build one with DecodeConfig(**fields)"
        )
    if cfg.beam_size < 1:
        raise ValueError(f"decode.beam_size must be >= 1 (1 = greedy), got {cfg.beam_size}")
    if not 1 <= cfg.nbest <= cfg.beam_size:
        raise ValueError(
            f"decode.nbest must be in 1 .. decode.beam_size ({cfg.beam_size}), got {cfg.nbest}"
        )
    if cfg.min_len < 0:
        raise ValueError(f"decode.min_len must be >= 0, got {cfg.min_len}")
    for name, typical in (("length_penalty", "0.6; 0 = off"), ("max_len_a", "1.2")):
        if not math.isfinite(getattr(cfg, name)):
            raise ValueError(
                f"decode.{name} must be a finite number (e.g. {typical}), got {getattr(cfg, name)}"
            )
    if cfg.max_len_a <= 0 and cfg.max_len_b < 1 and cfg.min_len == 0:  # floor(a * n + b) < 1
        raise ValueError(
            f"decode.max_len_a={cfg.max_len_a}, decode.max_len_b={cfg.max_len_b} and "
            "decode.min_len=0 allow no output token, so every translation would be empty: raise "
            "decode.max_len_b (e.g. 10) or decode.max_len_a (e.g. 1.2)"
        )
    if cfg.max_sentences < 1:
        raise ValueError(f"decode.max_sentences must be >= 1, got {cfg.max_sentences}")
    if cfg.streams < 1:
        raise ValueError(f"decode.streams must be >= 1, got {cfg.streams}")
    if cfg.precision not in DECODE_PRECISIONS:
        raise ValueError(
            f"decode.precision must be one of {DECODE_PRECISIONS}, got {cfg.precision!r}"
        )


DECODE_PRECISIONS = ("auto", "fp32", "bf16")


# Device types on which decode.precision=bf16 was checked (and warned about when it is not
# native) in this process: a command resolves the setting up to three times (its config, the
# evaluation's record, the model's cast), and one warning says it.
_BF16_CHECKED: set[str] = set()


def decoding_precision(precision: str, device: torch.device) -> str:
    """decode.precision as decoding on `device` uses it: "auto" is bf16 where the device computes
    it natively, else fp32 (rpr_nmt/precision.py); "fp32" and "bf16" as given, bf16 on a device
    without native bf16 after one warning per process."""
    if precision not in DECODE_PRECISIONS:
        raise ValueError(f"decode.precision must be one of {DECODE_PRECISIONS}, got {precision!r}")
    if precision == "bf16" and device.type in _BF16_CHECKED:
        return precision
    resolved = resolve_precision(precision, device, key="decode.precision")
    if precision == "bf16":
        _BF16_CHECKED.add(device.type)
    return resolved


def decoding_model(model: Transformer, precision: str) -> Transformer:
    """The model that decodes at `precision` ("auto" resolved for the model's device, see
    decoding_precision): the model itself for "fp32"; for "bf16" a copy with
    bfloat16 weights whose attention arithmetic (scores, softmax, relative terms, key/value
    cache) stays float32 (Transformer.recast), as does the next-token log-softmax of the search.
    Put the model in eval mode first.

    A copy rather than autocast: on CPU, autocast's per-op casts of activations and weights
    made bf16 decoding no faster. Float32 attention: its small batched matmuls run 2x faster in
    float32 than in bf16 here, and the softmax is exact (docs/performance.md, "Decoding").
    """
    precision = decoding_precision(precision, next(model.parameters()).device)
    if precision == "fp32":
        return model
    return model.recast(torch.bfloat16, attention_dtype=torch.float32)


def length_sorted_batches(lengths: Sequence[int], max_sentences: int) -> Iterator[list[int]]:
    """Indices in batches of at most max_sentences, longest sentences first (less padding, and the
    slowest batches are seen first)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), max_sentences):
        yield order[start : start + max_sentences]


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> Tensor:
    """Right-pad id sequences into a (B, S) long tensor."""
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        out[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out.to(device)


def decode_batch(
    model: nn.Module, src: Tensor, cfg: DecodeConfig, special: Mapping[str, int]
) -> list[list[Hypothesis]]:
    """Beam search on one padded batch; beam_size 1 means greedy search. The model decodes at
    its own precision: pass decoding_model(model, cfg.precision).

    DecodeConfig defines beam_size 1 as greedy: greedy_search stops at the first EOS, where beam
    search of width 1 with alpha > 0 may keep a continuation alive that the length penalty
    favours (see rpr_nmt/decode/greedy.py). alpha still normalises the reported score.

    Shapes:
        src (B, S)
    """
    lengths = dict(max_len_a=cfg.max_len_a, max_len_b=cfg.max_len_b, min_len=cfg.min_len)
    if cfg.beam_size == 1:
        return greedy_search(model, src, length_penalty=cfg.length_penalty, **lengths, **special)
    return beam_search(
        model,
        src,
        beam_size=cfg.beam_size,
        length_penalty=cfg.length_penalty,
        nbest=cfg.nbest,
        **lengths,
        **special,
    )


def translate(
    model: nn.Module,
    tokenizer: TextTokenizer,
    sentences: Sequence[str],
    cfg: DecodeConfig,
    *,
    first_line: int = 1,
) -> list[list[Hypothesis]]:
    """Translate raw sentences; results come back in input order.

    Args:
        model: the Transformer (put in eval mode here); inputs go to the device of its parameters
            (cfg.device is not read here: place the model with rpr_nmt.model.resolve_device).
        tokenizer: BPE tokenizer of the model (encode / decode, pad_id / bos_id / eos_id).
        sentences: raw source sentences.
        cfg: beam size, length penalty and limits, n-best, batch size, streams, precision.
        first_line: the input line of sentences[0] (1-based), for the error naming a line.

    Returns:
        Per sentence, its n-best hypotheses (token ids without BOS/EOS), best first. A blank
        sentence, or one that encodes to no token (only zero-width or control characters), is
        not decoded: it gets one empty hypothesis (score 0), an empty line out.

    Raises:
        ValueError: a setting that cannot work (check_decode_config).
        PositionLimitError: a source longer than a learned encoder table, the first such one,
            named by its line before any sentence is decoded.
    """
    check_decode_config(cfg)
    special = dict(bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id)
    device = next(model.parameters()).device
    model = decoding_model(model.eval(), cfg.precision)
    ids = [tokenizer.encode(s) if s.strip() else [] for s in sentences]
    todo = [i for i, e in enumerate(ids) if e]  # blank lines, and lines of no token, stay blank
    encoded = [ids[i] + [tokenizer.eos_id] for i in todo]
    # All at once before batching: a long line in a length-sorted batch was found by the model,
    # halfway through the work, without its line.
    lines = [first_line + i for i in todo]
    check_sources_fit([len(e) for e in encoded], position_limits(model)[0], lines=lines)
    streams = cfg.streams if device.type == "cpu" else 1
    # A few sentences are split so that every stream has a batch: max_sentences is an upper bound.
    per_batch = min(cfg.max_sentences, max(1, -(-len(encoded) // streams)))
    batches = list(length_sorted_batches([len(e) for e in encoded], per_batch))

    def decode(batch: list[int]) -> list[list[Hypothesis]]:
        src = pad_batch([encoded[i] for i in batch], tokenizer.pad_id, device)  # (B, S)
        return decode_batch(model, src, cfg, special)

    results = [[Hypothesis(tokens=[], score=0.0)] for _ in sentences]
    for batch, hyps in zip(batches, decode_in_streams(decode, batches, streams)):
        for i, nbest in zip(batch, hyps):
            results[todo[i]] = nbest
    return results


def decode_in_streams(
    decode: Callable[[_Batch], _Result], batches: Sequence[_Batch], streams: int
) -> Iterator[_Result]:
    """decode(batch) for every batch, results in batch order, `streams` batches at a time.

    Each stream is a thread with an equal share of torch's intra-op threads (at least one; no
    more streams than threads). A decoding step is many small ops that two intra-op threads
    share poorly; two streams with one thread each keep both cores busy (CTranslate2's
    inter_threads): on the 2-core machine of docs/performance.md, about 1.2x the sentences/s.
    The model is only read, and inference mode is per thread (set inside beam search).
    """
    threads = torch.get_num_threads()
    streams = max(1, min(streams, threads, len(batches)))
    if streams == 1:
        yield from map(decode, batches)
        return
    torch.set_num_threads(threads // streams)
    pool = ThreadPoolExecutor(streams, thread_name_prefix="rpr-nmt-decode")
    try:
        yield from pool.map(decode, batches)
    finally:  # on Ctrl-C (or an error), the batches not begun are dropped, not decoded first
        pool.shutdown(wait=True, cancel_futures=True)
        torch.set_num_threads(threads)
