"""The word-for-word corpus of the command-line, export and inspection tests: random strings of 17
English words, each with its German word by word, fixed by a seed."""

from __future__ import annotations

import torch

WORDS_EN = (
    "a man woman dog child rides runs sits on the red blue big small bike street park"
).split()
WORDS_DE = (
    "ein mann frau hund kind fährt läuft sitzt auf der rote blaue große kleine rad straße park"
).split()


def corpus(
    n: int, seed: int, min_words: int = 1, max_words: int = 10
) -> tuple[list[str], list[str]]:
    """n English sentences of `min_words` to `max_words` words and their German, fixed by `seed`."""
    g = torch.Generator().manual_seed(seed)
    src, tgt = [], []
    for _ in range(n):
        length = int(torch.randint(min_words, max_words + 1, (1,), generator=g))
        idx = torch.randint(0, len(WORDS_EN), (length,), generator=g).tolist()
        src.append(" ".join(WORDS_EN[i] for i in idx) + ".")
        tgt.append(" ".join(WORDS_DE[i] for i in idx) + ".")
    return src, tgt
