"""The rules beam search and greedy search share: output length limits and the tokens allowed next.

Legend: A active sentences, G hypotheses per sentence (the beam; 1 in greedy search), S source
length, Tnew new decoder positions, V vocabulary, t tokens generated so far (BOS, EOS excluded).

A model with learned absolute positions (rpr_nmt/model/positions/learned.py) reads only the rows
its tables have: a source longer than the encoder's is refused (PositionLimitError), and the
output is capped so that the last decoder position, BOS + max_positions - 1 tokens, ends with EOS,
as CTranslate2 caps it (max_decoding_length at the table).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

NEG_INF = float("-inf")
STACKS = ("encoder", "decoder")


# Each kind of table with a last row: how the message names it, and how to get a larger one.
TABLES = {
    "learned": (
        "the learned position table (model.max_positions={rows})",
        "use a model trained with a larger model.max_positions",
    ),
    # An exported model's sinusoid (rpr_nmt.export): ours has no last row, CTranslate2's has.
    "exported sinusoid": (
        "the exported sinusoid table ({rows} rows, rpr-nmt-export --max-positions)",
        "export the checkpoint again with a larger --max-positions",
    ),
}


class PositionLimitError(ValueError):
    """A source (or scored reference) longer than the model's learned position table (or an
    exported model's sinusoid table).

    Attributes:
        side: "source" or "reference".
        positions: its length as the model reads it (ids + EOS, or BOS + ids).
        max_positions: the table's rows.
        index: which of the sentences checked (0-based), to map to an input line.
        line: the 1-based input line when the caller knows it, else None.
        table: which kind of table, a key of TABLES: the message names it and what to do.
    """

    def __init__(
        self,
        *,
        side: str,
        positions: int,
        max_positions: int,
        index: int,
        line: int | None,
        table: str = "learned",
    ) -> None:
        self.side, self.positions, self.max_positions = side, positions, max_positions
        self.index, self.line, self.table = index, line, table
        where = f"line {line}: " if line is not None else ""
        name, remedy = TABLES[table]
        super().__init__(
            f"{where}a {side} of {positions} positions is longer than "
            f"{name.format(rows=max_positions)}: shorten or split it, or {remedy}"
        )


class PositionLimits(NamedTuple):
    """Rows of the learned position tables of the encoder and the decoder; None where a stack has
    none. An exported model records them (rpr_nmt.export.read_position_limits)."""

    encoder: int | None  # a source (ids + EOS) of more positions is refused
    decoder: int | None  # outputs stop at decoder - 1 tokens: BOS + tokens fill the table


def position_limits(model: Any) -> PositionLimits:
    """Rows of the learned position tables of the encoder and the decoder; None where a stack
    has none (any other position method reads every position). An ensemble's are its members'
    smallest; a model without `encoder` / `decoder` (a scripted test model) has none."""
    members = getattr(model, "members", None)
    if members is not None:
        limits = [position_limits(member) for member in members]
        return PositionLimits(_smallest(e for e, _ in limits), _smallest(d for _, d in limits))
    rows = [getattr(getattr(getattr(model, s, None), "embed", None), "max_positions", None)
            for s in STACKS]  # fmt: skip
    return PositionLimits(rows[0], rows[1])


def _smallest(rows: Iterable[int | None]) -> int | None:
    known = [r for r in rows if r is not None]
    return min(known) if known else None


def check_sources_fit(
    lengths: Sequence[int],
    max_positions: int | None,
    *,
    side: str = "source",
    lines: Sequence[int] | None = None,
    table: str = "learned",
) -> None:
    """Refuse the first sequence longer than a learned table (PositionLimitError names it).

    Args:
        lengths: positions of each sequence as the model reads it (ids + EOS, or BOS + ids).
        max_positions: the table's rows (position_limits); None = no limit.
        side: "source" or "reference", for the message.
        lines: the input line (1-based) of each sequence, named in the message; None in a batch
            (the error's index then says which sequence).
        table: the kind of table, a key of TABLES ("exported sinusoid" for an exported model's).
    """
    if max_positions is None:
        return
    for index, positions in enumerate(lengths):
        if positions > max_positions:
            line = None if lines is None else lines[index]
            raise PositionLimitError(
                side=side, positions=positions, max_positions=max_positions, index=index,
                line=line, table=table,
            )  # fmt: skip


def max_output_lengths(
    src: Tensor,
    *,
    max_len_a: float,
    max_len_b: int,
    min_len: int,
    pad_id: int,
    max_positions: int | None = None,
) -> Tensor:
    """Per-sentence output length limit floor(a * source length + b), EOS excluded, at least
    min_len; with a decoder table of max_positions rows at most max_positions - 1, which wins over
    min_len (the decoder reads BOS and the tokens: max_positions positions).

    The source length counts the non-padding source tokens, its EOS included (as fairseq does).

    Shapes:
        src (B, S) -> (B,) long
    """
    if not math.isfinite(max_len_a):  # NaN or inf made every limit min_len, silently
        raise ValueError(f"max_len_a={max_len_a} must be a finite number (1.2 by default)")
    src_len = (src != pad_id).sum(dim=1).to(torch.float64)  # (B,)
    limit = (max_len_a * src_len + max_len_b).floor().long().clamp_min(max(min_len, 0))
    return limit if max_positions is None else limit.clamp_max(max_positions - 1)


def next_token_logprobs(
    logits: Tensor,
    t: int,
    max_len: Tensor,
    *,
    min_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
) -> Tensor:
    """Float32 log-softmax of the newest position, with the tokens that may not come next at -inf.

    BOS and PAD are never generated; EOS not before min_len tokens, unless the sentence is at its
    length limit (t == max_len), where it may only end, with EOS keeping its probability (not
    renormalised). A limit below min_len comes only from a learned decoder table (see
    max_output_lengths).

    Args:
        logits: decoder output for the G consecutive rows of each sentence.
        t: tokens generated so far.
        max_len: each sentence's output length limit (max_output_lengths).
        min_len: EOS is not allowed before this many output tokens.
        bos_id, eos_id, pad_id: special ids.

    Returns:
        Next-token log-probabilities per sentence and hypothesis.

    Shapes:
        logits (A * G, Tnew, V), max_len (A,) -> (A, G, V)
    """
    A, V = max_len.size(0), logits.size(-1)
    lprobs = torch.log_softmax(logits[:, -1].float(), dim=-1).view(A, -1, V)  # (A, G, V)
    lprobs[..., pad_id] = NEG_INF
    lprobs[..., bos_id] = NEG_INF
    at_limit = max_len == t  # (A,) these must end now
    if t < min_len:
        if bool(at_limit.any()):  # capped below min_len: ending is all that is left
            lprobs[~at_limit, :, eos_id] = NEG_INF
        else:
            lprobs[..., eos_id] = NEG_INF
    if bool(at_limit.any()):
        eos_lprob = lprobs[..., eos_id].clone()
        lprobs[at_limit] = NEG_INF
        lprobs[..., eos_id] = eos_lprob
    return lprobs
