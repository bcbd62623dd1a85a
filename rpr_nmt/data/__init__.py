"""Data: sources (hub, local files) -> cleaned pairs -> joint BPE -> token-bucketed batches."""

from rpr_nmt.data.batching import Batch, BatchIterator
from rpr_nmt.data.cleaning import CleaningReport
from rpr_nmt.data.corpus import EncodedCorpus, Ragged
from rpr_nmt.data.errors import DataError
from rpr_nmt.data.prepare import PreparedData, prepare_data
from rpr_nmt.data.sources import iter_parallel_text, read_parallel_text
from rpr_nmt.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "PAD_ID",
    "UNK_ID",
    "Batch",
    "BatchIterator",
    "CleaningReport",
    "DataError",
    "EncodedCorpus",
    "PreparedData",
    "Ragged",
    "Tokenizer",
    "iter_parallel_text",
    "prepare_data",
    "read_parallel_text",
]
