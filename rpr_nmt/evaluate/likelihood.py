"""Corpus figures of forced decoding: perplexity overall, by source-length bucket and by target
position, and the files rpr-nmt-score writes.

Perplexity is exp of the mean negative log-probability per reference token, EOS included (the
token count the training loss divides by), so exp(validation nll) of training and this figure
agree on the same pairs. A bucket's perplexity pools its tokens the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rpr_nmt.buckets import bucket_of
from rpr_nmt.decode.forced import SentenceScore


@dataclass(frozen=True)
class Perplexity:
    """Pooled figures of a set of reference tokens."""

    perplexity: float  # exp(nll_per_token); nan when there are no tokens (null in the JSON)
    nll_per_token: float  # mean negative log-probability (nats) per reference token
    tokens: int  # reference tokens scored, EOS included
    sentences: int  # sentences they come from


def pooled(logprob_sum: float, tokens: int, sentences: int) -> Perplexity:
    """Perplexity of `tokens` tokens whose log-probabilities sum to `logprob_sum`."""
    if tokens == 0:
        return Perplexity(math.nan, math.nan, 0, sentences)
    nll = -logprob_sum / tokens
    return Perplexity(math.exp(nll), nll, tokens, sentences)


def corpus_perplexity(scores: Sequence[SentenceScore]) -> Perplexity:
    """Perplexity of every reference token of the corpus."""
    tokens = sum(len(s.logprobs) for s in scores)
    return pooled(sum(s.total for s in scores), tokens, len(scores))


def by_source_length(scores: Sequence[SentenceScore], bounds: Sequence[int]) -> list[Perplexity]:
    """Perplexity of each source-length bucket (source BPE tokens, EOS included)."""
    sums = [0.0] * len(bounds)
    tokens = [0] * len(bounds)
    sentences = [0] * len(bounds)
    for s in scores:
        b = bucket_of(s.src_len, bounds)
        sums[b] += s.total
        tokens[b] += len(s.logprobs)
        sentences[b] += 1
    return [pooled(*figures) for figures in zip(sums, tokens, sentences)]


def by_target_position(scores: Sequence[SentenceScore], bounds: Sequence[int]) -> list[Perplexity]:
    """Perplexity of the reference tokens at each bucket of target positions (1 = the first
    token; the EOS at its own position); `sentences` counts those with a token in the bucket."""
    sums = [0.0] * len(bounds)
    tokens = [0] * len(bounds)
    sentences = [0] * len(bounds)
    for s in scores:
        seen = set()
        for position, logprob in enumerate(s.logprobs, start=1):
            b = bucket_of(position, bounds)
            sums[b] += logprob
            tokens[b] += 1
            seen.add(b)
        for b in seen:
            sentences[b] += 1
    return [pooled(*figures) for figures in zip(sums, tokens, sentences)]


def bucket_table(title: str, labels: Sequence[str], figures: Sequence[Perplexity]) -> str:
    """A markdown table: one row per bucket with its perplexity, tokens and sentences."""
    lines = [f"| {title} | perplexity | tokens | sentences |", "|---|---:|---:|---:|"]
    for label, f in zip(labels, figures):
        ppl = "-" if f.tokens == 0 else f"{f.perplexity:.2f}"
        lines.append(f"| {label} | {ppl} | {f.tokens} | {f.sentences} |")
    return "\n".join(lines)


def write_scores(
    out_dir: str | Path,
    name: str,
    scores: Sequence[SentenceScore],
    record: dict[str, Any],
) -> tuple[Path, Path]:
    """Write score_<name>.txt (per sentence: `total ||| logp of each token`, EOS last) and
    score_<name>.json (`record`, the corpus figures); return the two paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"{s.total:.4f} ||| " + " ".join(f"{lp:.4f}" for lp in s.logprobs) + "\n" for s in scores
    ]
    text_path, json_path = out / f"score_{name}.txt", out / f"score_{name}.json"
    text_path.write_text("".join(lines), encoding="utf-8")
    json_path.write_text(json.dumps(json_safe(record), indent=2, allow_nan=False) + "\n",
                         encoding="utf-8")  # fmt: skip
    return text_path, json_path


def json_safe(value: Any) -> Any:
    """`value` with every NaN or infinite float (an empty bucket's perplexity) as None: JSON has
    no NaN, and strict readers (JavaScript's JSON.parse) refuse the file that writes one."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
