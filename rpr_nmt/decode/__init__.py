"""Decoding: batched beam search and greedy search over the cached decoder, and sentence
translation."""

from rpr_nmt.decode.beam import Hypothesis, beam_search, length_penalty, select_step
from rpr_nmt.decode.greedy import greedy_search
from rpr_nmt.decode.reference import UncachedModel
from rpr_nmt.decode.translate import DecodeSettings, translate

__all__ = [
    "DecodeSettings",
    "Hypothesis",
    "UncachedModel",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "select_step",
    "translate",
]
