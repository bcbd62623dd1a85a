"""Tiny models and hand-made batches for unit tests of the update step."""

from __future__ import annotations

import torch

from rpr_nmt.config import ModelConfig
from rpr_nmt.data import Batch
from rpr_nmt.model import build_model

VOCAB, PAD, BOS, EOS = 40, 0, 2, 3

TINY = ModelConfig(
    d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1, dropout=0.0,
    attention_dropout=0.0, max_relative_position=2, pre_norm=False,
)  # fmt: skip


def tiny_model(seed: int = 0) -> torch.nn.Module:
    """A dropout-free transformer with a 40-token vocabulary."""
    torch.manual_seed(seed)
    return build_model(TINY, vocab_size=VOCAB, pad_id=PAD)


def random_batch(seed: int, n: int = 3, max_len: int = 6) -> Batch:
    """A padded batch of n random pairs with lengths in 1..max_len (ids 4..39)."""
    gen = torch.Generator().manual_seed(seed)
    src_len = torch.randint(1, max_len + 1, (n,), generator=gen)
    tgt_len = torch.randint(1, max_len + 1, (n,), generator=gen)
    src = torch.full((n, int(src_len.max()) + 1), PAD)
    tgt_in = torch.full((n, int(tgt_len.max()) + 1), PAD)
    tgt_out = tgt_in.clone()
    for i in range(n):
        s = torch.randint(4, VOCAB, (int(src_len[i]),), generator=gen)
        t = torch.randint(4, VOCAB, (int(tgt_len[i]),), generator=gen)
        src[i, : len(s)], src[i, len(s)] = s, EOS
        tgt_in[i, 0], tgt_in[i, 1 : len(t) + 1] = BOS, t
        tgt_out[i, : len(t)], tgt_out[i, len(t)] = t, EOS
    return Batch(
        src=src, tgt_in=tgt_in, tgt_out=tgt_out, n_src_tokens=int(src_len.sum()) + n,
        n_tgt_tokens=int(tgt_len.sum()) + n, ids=torch.arange(n),
    )  # fmt: skip
