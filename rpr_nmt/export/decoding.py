"""Our decoding rules as CTranslate2 translate_batch options, and a translate that applies them.

Legend: S source length in tokens, EOS included (rpr_nmt/decode/constraints.py), t tokens
generated so far, N rows of a learned position table, or of the sinusoid table an export wrote
(--max-positions; rpr_nmt_export.json: position_limits).

    ours (rpr_nmt.decode)                          CTranslate2 translate_batch
    source = BPE ids + EOS                         add_source_eos in the exported config
    no source truncation                           max_input_length=0 (default 1024 truncates)
    at most floor(a * S + b) tokens, EOS excluded  max_decoding_length=floor(a * S + b): the
      (at least min_len), then EOS                   last step takes the arg-max and stops
    learned decoder table: at most N - 1 tokens,   max_decoding_length at most N - 1 (else
      which wins over min_len                        "No position encodings ... >= N")
    EOS not before min_len tokens                  min_decoding_length=min_len, at most the cap
                                                     (CTranslate2 refuses min above max)
    source over a learned encoder table refused    checked here first (PositionLimitError)
    sinusoid: no last row                          the exported table has N rows: capped and
                                                     refused as a learned table of N rows
    BOS and PAD never generated                    suppress_sequences=[[PAD piece], [BOS piece]]
    beam 1 = greedy                                beam_size=1 (CTranslate2's default is 2)
    alpha: lp(Y) = ((5 + |Y|) / 6)^alpha           length_penalty=alpha: score / |Y|^alpha

max_decoding_length is one number per translate_batch call while our cap is per sentence, so
translate_ctranslate2 calls it once per distinct cap: greedy outputs then equal ours token for
token. One call with the largest cap differs only on the sentences that reach their own, smaller
cap (ours stops there, CTranslate2 goes on). Beam search (beam_size > 1) is not the same
algorithm: CTranslate2 normalises by |Y|^alpha, not by the GNMT penalty, and stops on its own
criteria, so beam outputs may differ; greedy search has no length penalty in the choice of tokens.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch

from rpr_nmt.config import DecodeConfig
from rpr_nmt.data import BOS_ID, EOS_ID, PAD_ID, Tokenizer
from rpr_nmt.decode.constraints import PositionLimits, check_sources_fit, max_output_lengths

__all__ = [
    "NO_LIMITS",
    "SinusoidTableLimits",
    "max_decoding_length",
    "translate_ctranslate2",
    "translate_options",
]

# The start of CTranslate2's error past a position table (PositionEncoder, src/layers/common.cc).
CT2_POSITION_ERROR = "No position encodings are defined"


NO_LIMITS = PositionLimits(encoder=None, decoder=None)


class SinusoidTableLimits(PositionLimits):
    """The rows of an exported sinusoid table (rpr-nmt-export --max-positions), where a learned
    table's are model.max_positions: the same caps and refusals, but a refusal says to export
    again with more rows. Equal to the PositionLimits of the same rows."""

    __slots__ = ()


def max_decoding_length(
    source_tokens: int, cfg: DecodeConfig, decoder_rows: int | None = None
) -> int:
    """Our output cap for a source of S tokens (EOS included): floor(a * S + b), at least min_len,
    and with a decoder table of decoder_rows rows (learned, or an exported sinusoid) at most
    decoder_rows - 1.

    rpr_nmt.decode.constraints.max_output_lengths itself, on one source of S tokens, so that the
    cap is the one our beam and greedy search apply.
    """
    src = torch.full((1, source_tokens), EOS_ID)  # (1, S): S tokens, none of them PAD
    cap = max_output_lengths(
        src, max_len_a=cfg.max_len_a, max_len_b=cfg.max_len_b, min_len=cfg.min_len,
        pad_id=PAD_ID, max_positions=decoder_rows,
    )  # fmt: skip
    return int(cap)


def translate_options(cfg: DecodeConfig, tokenizer: Tokenizer, max_length: int) -> dict[str, Any]:
    """Keyword arguments of Translator.translate_batch that apply our rules with one cap.

    Args:
        cfg: beam size, length penalty, minimum length and n-best.
        tokenizer: the model's BPE model (the PAD and BOS pieces).
        max_length: the output cap of the sentences in this call: max_decoding_length, given
            the decoder's rows when the exported model has a decoder table, learned or sinusoid
            (CTranslate2 fails past the table's last row).

    Returns:
        The options; pass them with the tokenized sources.
    """
    return dict(
        beam_size=cfg.beam_size,
        num_hypotheses=cfg.nbest,
        length_penalty=cfg.length_penalty,
        max_input_length=0,
        max_decoding_length=max_length,
        # A table's cap wins over min_len, as ours; CTranslate2 refuses a minimum above the cap.
        min_decoding_length=min(cfg.min_len, max_length),
        suppress_sequences=[[tokenizer.id_to_piece(PAD_ID)], [tokenizer.id_to_piece(BOS_ID)]],
        return_scores=True,
    )


def translate_ctranslate2(
    translator: Any,
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    cfg: DecodeConfig,
    *,
    limits: PositionLimits | None = None,
) -> list[list[list[str]]]:
    """Translate raw sentences with an exported model under our decoding rules.

    Sentences are grouped by their output cap (one translate_batch call per cap, at most
    cfg.max_sentences sentences a batch, all submitted at once so that a translator with
    inter_threads > 1 decodes several batches in parallel) and returned in input order.

    Args:
        translator: a ctranslate2.Translator of the exported folder.
        tokenizer: the folder's sentencepiece model, as our Tokenizer.
        sentences: raw source sentences.
        cfg: our decode settings (beam_size 1 reproduces greedy_search exactly).
        limits: the rows of the folder's learned or sinusoid tables (read_position_limits);
            None = none known.

    Returns:
        Per sentence, its n-best hypotheses as sentencepiece pieces (no BOS/EOS), best first.

    Raises:
        PositionLimitError: a source longer than a learned (or the exported sinusoid) encoder
            table, the first such one, named by its line (1-based) before any sentence is
            decoded, as rpr_nmt.decode.translate.
        RuntimeError: CTranslate2 ran past a position table: without limits, saying to pass them.
    """
    known = NO_LIMITS if limits is None else limits
    pieces = [[tokenizer.id_to_piece(i) for i in tokenizer.encode(s)] for s in sentences]
    positions = [len(source) + 1 for source in pieces]  # + 1: the source EOS
    table = "exported sinusoid" if isinstance(known, SinusoidTableLimits) else "learned"
    check_sources_fit(positions, known.encoder, lines=range(1, len(sentences) + 1), table=table)
    caps = {n: max_decoding_length(n, cfg, known.decoder) for n in set(positions)}  # once a length
    by_cap: dict[int, list[int]] = defaultdict(list)
    for i, n in enumerate(positions):
        by_cap[caps[n]].append(i)
    results: list[list[list[str]]] = [[] for _ in sentences]
    pending = []  # (sentence index, its asynchronous result)
    for cap, indices in sorted(by_cap.items()):
        if cap == 0:  # ours ends at once; CTranslate2 needs max_decoding_length > 0
            for i in indices:
                results[i] = [[] for _ in range(cfg.nbest)]
            continue
        # Submitted without waiting, so that the translator's inter_threads workers share the calls.
        outputs = translator.translate_batch(
            [pieces[i] for i in indices],
            max_batch_size=cfg.max_sentences,
            asynchronous=True,
            **translate_options(cfg, tokenizer, cap),
        )
        pending.extend(zip(indices, outputs))
    try:
        for i, output in pending:
            results[i] = [list(h) for h in output.result().hypotheses]
    except RuntimeError as e:
        if limits is not None or CT2_POSITION_ERROR not in str(e):
            raise
        raise RuntimeError(
            f"CTranslate2: {e}. A model with a learned (or exported sinusoid) position table "
            "stops and refuses as rpr-nmt-translate only when told its rows: pass "
            "limits=rpr_nmt.export.read_position_limits(MODEL_DIR)"
        ) from e
    return results
