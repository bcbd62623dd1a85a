"""Decoding: batched beam search and greedy search over the cached decoder, and sentence
translation."""

from rpr_nmt.decode.beam import Hypothesis, beam_search, length_penalty, select_step
from rpr_nmt.decode.constraints import max_output_lengths, next_token_logprobs
from rpr_nmt.decode.greedy import greedy_search
from rpr_nmt.decode.reference import UncachedModel
from rpr_nmt.decode.translate import (
    check_decode_config,
    decoding_model,
    decoding_precision,
    translate,
)

__all__ = [
    "Hypothesis",
    "UncachedModel",
    "beam_search",
    "check_decode_config",
    "decoding_model",
    "decoding_precision",
    "greedy_search",
    "length_penalty",
    "max_output_lengths",
    "next_token_logprobs",
    "select_step",
    "translate",
]
