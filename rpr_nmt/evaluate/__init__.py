"""Evaluation: sacreBLEU with its signature, chrF, paper-style tokenized BLEU; decode-and-score."""

from rpr_nmt.evaluate.bleu import (
    Scores,
    compound_split,
    corpus_bleu,
    paper_tokenize,
    sacrebleu_bleu,
    score_corpus,
    tokenized_bleu,
)
from rpr_nmt.evaluate.evaluator import detokenize, evaluate_split

__all__ = [
    "Scores",
    "compound_split",
    "corpus_bleu",
    "detokenize",
    "evaluate_split",
    "paper_tokenize",
    "sacrebleu_bleu",
    "score_corpus",
    "tokenized_bleu",
]
