"""Our decoding rules as CTranslate2 translate_batch options, and a translate that applies them.

Legend: S source length in tokens, EOS included (rpr_nmt/decode/constraints.py), t tokens
generated so far.

    ours (rpr_nmt.decode)                          CTranslate2 translate_batch
    source = BPE ids + EOS                         add_source_eos in the exported config
    no source truncation                           max_input_length=0 (default 1024 truncates)
    at most floor(a * S + b) tokens, EOS excluded  max_decoding_length=floor(a * S + b): the
      (at least min_len), then EOS                   last step takes the arg-max and stops
    EOS not before min_len tokens                  min_decoding_length=min_len
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

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from rpr_nmt.config import DecodeConfig
from rpr_nmt.data import BOS_ID, PAD_ID, Tokenizer

__all__ = ["max_decoding_length", "translate_ctranslate2", "translate_options"]


def max_decoding_length(source_tokens: int, cfg: DecodeConfig) -> int:
    """Our output cap floor(a * S + b), at least min_len, for a source of S tokens (EOS included).

    The same arithmetic as rpr_nmt.decode.constraints.max_output_lengths (float64, floor).
    """
    return max(math.floor(cfg.max_len_a * source_tokens + cfg.max_len_b), cfg.min_len, 0)


def translate_options(cfg: DecodeConfig, tokenizer: Tokenizer, max_length: int) -> dict[str, Any]:
    """Keyword arguments of Translator.translate_batch that apply our rules with one cap.

    Args:
        cfg: beam size, length penalty, minimum length and n-best.
        tokenizer: the model's BPE model (the PAD and BOS pieces).
        max_length: the output cap of the sentences in this call (max_decoding_length).

    Returns:
        The options; pass them with the tokenized sources.
    """
    return dict(
        beam_size=cfg.beam_size,
        num_hypotheses=cfg.nbest,
        length_penalty=cfg.length_penalty,
        max_input_length=0,
        max_decoding_length=max_length,
        min_decoding_length=cfg.min_len,
        suppress_sequences=[[tokenizer.id_to_piece(PAD_ID)], [tokenizer.id_to_piece(BOS_ID)]],
        return_scores=True,
    )


def translate_ctranslate2(
    translator: Any,
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    cfg: DecodeConfig,
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

    Returns:
        Per sentence, its n-best hypotheses as sentencepiece pieces (no BOS/EOS), best first.
    """
    pieces = [[tokenizer.id_to_piece(i) for i in tokenizer.encode(s)] for s in sentences]
    by_cap: dict[int, list[int]] = defaultdict(list)
    for i, source in enumerate(pieces):
        by_cap[max_decoding_length(len(source) + 1, cfg)].append(i)  # + 1: the source EOS
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
    for i, output in pending:
        results[i] = [list(h) for h in output.result().hypotheses]
    return results
