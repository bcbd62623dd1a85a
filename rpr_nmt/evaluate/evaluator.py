"""Decode a split, detokenise with the model's own BPE, score, and write hyp_<split>.txt and
eval_<split>.json."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from torch import nn

from rpr_nmt.config import DecodeConfig
from rpr_nmt.decode import Hypothesis, decoding_precision, translate
from rpr_nmt.decode.translate import TextTokenizer
from rpr_nmt.evaluate.bleu import Scores, score_corpus


def detokenize(tokenizer: TextTokenizer, nbest: Sequence[Hypothesis]) -> str:
    """The best hypothesis as one line of text ("" when there is none)."""
    if not nbest:
        return ""
    text = tokenizer.decode(nbest[0].tokens)
    return " ".join(text.splitlines()).strip()  # one output line per source line, always


def write_lines(path: Path, lines: Sequence[str]) -> None:
    """UTF-8 text, one line per entry, each ending with a newline."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def evaluate_split(
    model: nn.Module,
    tokenizer: TextTokenizer,
    sources: Sequence[str],
    refs: Sequence[str],
    decode_cfg: DecodeConfig,
    tgt_lang: str,
    out_dir: str | Path,
    split: str,
    *,
    checkpoint: str | Path | Sequence[str | Path] | None = None,
    ensemble: Sequence[Sequence[str]] | None = None,
    extra_refs: Sequence[Sequence[str]] = (),
    reference_files: Sequence[str] = (),
    weights: Mapping[str, Any] | None = None,
    bleu_tokenize: str | None = None,
    log: Callable[[str], None] | None = None,
) -> Scores:
    """Translate `sources`, score against `refs`, write hyp_<split>.txt and eval_<split>.json.

    Args:
        model: the Transformer (decoded on the device of its parameters).
        tokenizer: its BPE tokenizer (encode sources, decode hypotheses).
        sources: raw source sentences.
        refs: raw references, line-aligned with sources.
        decode_cfg: beam size, length penalty, ... (its device is not read: the model's is used).
        tgt_lang: target language code (picks sacreBLEU's tokenizer).
        out_dir: folder for the two files (created if missing).
        split: split name used in the file names.
        checkpoint: checkpoint path(s), recorded in the JSON file.
        ensemble: with an Ensemble as model, each member's checkpoint files, recorded likewise.
        extra_refs: further reference sets, line-aligned with refs: sacrebleu's multi-reference
            BLEU, chrF and TER.
        reference_files: the files of extra_refs, recorded in the JSON file.
        weights: which weights the model holds, recorded in the JSON file as given, e.g.
            {"weights": "raw", "weights_asked": "ema"} for a checkpoint without a weight average.
        bleu_tokenize: sacreBLEU's tokenizer, recorded in the JSON file when given; None =
            sacrebleu's choice for tgt_lang.
        log: where to report decoding speed; None = silent.

    Returns:
        The corpus scores.
    """
    if len(sources) != len(refs):
        raise ValueError(f"split {split}: {len(sources)} sources but {len(refs)} references")
    # The JSON records the precision decoding used: "auto" resolved for the model's device.
    precision = decoding_precision(decode_cfg.precision, _device(model))
    decode_cfg = replace(decode_cfg, precision=precision)
    start = time.perf_counter()
    nbest = translate(model, tokenizer, sources, decode_cfg)
    seconds = time.perf_counter() - start
    hyps = [detokenize(tokenizer, hyps) for hyps in nbest]
    scores = score_corpus(hyps, refs, tgt_lang, extra_refs=extra_refs, tokenize=bleu_tokenize)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_lines(out / f"hyp_{split}.txt", hyps)
    speed = len(sources) / seconds if seconds > 0 else 0.0
    record = {
        **asdict(scores),
        "split": split,
        "sentences_per_sec": speed,
        "decode_seconds": seconds,
        "checkpoint": _paths(checkpoint),
        "ensemble": None if ensemble is None else [[str(p) for p in m] for m in ensemble],
        "extra_references": [str(p) for p in reference_files],
        **(weights or {}),
        **({} if bleu_tokenize is None else {"bleu_tokenize": bleu_tokenize}),
        "decode": {**asdict(decode_cfg), "device": str(_device(model))},
    }
    (out / f"eval_{split}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if log is not None:
        log(f"{split}: {len(sources)} sentences in {seconds:.1f} s ({speed:.1f} sentences/s)")
    return scores


def _device(model: nn.Module) -> Any:
    return next(model.parameters()).device


def _paths(checkpoint: str | Path | Sequence[str | Path] | None) -> str | list[str] | None:
    if checkpoint is None or isinstance(checkpoint, (str, Path)):
        return None if checkpoint is None else str(checkpoint)
    return [str(p) for p in checkpoint]
