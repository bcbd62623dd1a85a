"""Token-bucketed, sharded, resumable batches of an EncodedCorpus.

Legend: B batch, S padded source length (ids + EOS), T padded target length (ids + 1).

Batches are built once: pairs sorted by length, then cut greedily so that B * max(S, T) <=
max_tokens. Each epoch shuffles the batch order with a torch.Generator seeded by (seed, epoch), so
the order depends only on seed and epoch, and every rank computes the same permutation and takes its
own slice of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from rpr_nmt.data.corpus import EncodedCorpus, Ragged
from rpr_nmt.data.errors import DataError


@dataclass
class Batch:
    """Padded tensors of one batch.

    Attributes:
        src: (B, S) source ids + EOS, padded with pad_id.
        tgt_in: (B, T) decoder input, BOS + target ids.
        tgt_out: (B, T) decoder output, target ids + EOS.
        n_src_tokens: non-padding source tokens (EOS included).
        n_tgt_tokens: non-padding target tokens in tgt_out (EOS included).
        ids: (B,) corpus indices of the pairs, e.g. to restore input order after decoding.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    n_src_tokens: int
    n_tgt_tokens: int
    ids: torch.Tensor

    def to(self, device: torch.device | str) -> Batch:
        """The batch on another device (non_blocking copies)."""
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        return Batch(
            move(self.src), move(self.tgt_in), move(self.tgt_out), self.n_src_tokens,
            self.n_tgt_tokens, move(self.ids),
        )  # fmt: skip

    def __len__(self) -> int:
        return self.src.shape[0]


def make_batches(src_len: np.ndarray, tgt_len: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """Cut pairs into length-bucketed batches with B * max(S, T) <= max_tokens.

    Args:
        src_len: (N,) padded-length contribution of each source (ids + EOS).
        tgt_len: (N,) the same for targets (ids + 1).
        max_tokens: bound on padded tokens per batch; a single pair longer than this forms its own
            batch.

    Returns:
        Index arrays, one per batch, shortest pairs first.
    """
    key = np.maximum(src_len, tgt_len)
    order = np.lexsort((tgt_len, src_len, key))  # by max length, ties by source then target length
    key = key[order]
    batches, start, n = [], 0, len(order)
    while start < n:
        # key is sorted, so the batch [start, start + b) is padded to key[start + b - 1]; the
        # admissible b form a prefix of 1..cap.
        cap = max(1, max_tokens // int(key[start]))
        window = key[start : start + cap]
        size = max(1, int(np.count_nonzero(np.arange(1, len(window) + 1) * window <= max_tokens)))
        batches.append(order[start : start + size])
        start += size
    return batches


def _pad(
    rows: Ragged, index: np.ndarray, lengths: np.ndarray, width: int, pad_id: int, offset: int
):
    """(B, width) int64 array: row i is rows[index[i]] from column `offset` on, then pad_id."""
    out = np.full((len(index), width), pad_id, dtype=np.int64)
    cols = np.arange(width - offset)
    mask = cols[None, :] < lengths[:, None]  # (B, width - offset)
    gather = rows.offsets[index][:, None] + cols[None, :]
    out[:, offset:][mask] = rows.flat[gather[mask]]
    return out


class BatchIterator:
    """Token-bucketed batches: forever (epoch after epoch) when shuffling, one pass otherwise.

    Args:
        corpus: the encoded pairs.
        max_tokens: padded source or target tokens per batch, whichever is larger (B * max(S, T)).
        pad_id: padding id.
        bos_id: decoder start id.
        eos_id: end-of-sentence id.
        shuffle: shuffle the batch order each epoch and iterate forever; False = one pass in length
            order.
        seed: seeds the batch order.
        rank: this process's torch.distributed rank.
        world_size: number of ranks. With shuffle, each rank gets every world_size-th batch of the
            epoch's order and all ranks the same number (up to world_size - 1 batches per epoch are
            skipped); without, the ranks split the one pass and together see every pair once.
    """

    def __init__(
        self,
        corpus: EncodedCorpus,
        *,
        max_tokens: int,
        pad_id: int,
        bos_id: int,
        eos_id: int,
        shuffle: bool,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside 0..{world_size - 1}")
        self.corpus = corpus
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.shuffle, self.seed, self.rank, self.world_size = shuffle, seed, rank, world_size
        self._src_len = corpus.src_lengths
        self._tgt_len = corpus.tgt_lengths
        self.batches = make_batches(self._src_len + 1, self._tgt_len + 1, max_tokens)
        if shuffle and len(self.batches) < world_size:
            raise DataError(
                f"{len(corpus)} pairs make only {len(self.batches)} batches of "
                f"max_tokens={max_tokens}, "
                f"fewer than world_size={world_size}; lower train.max_tokens or add data"
            )
        self.epoch = 0
        self.position = 0  # batches of the current epoch already handed out by this rank

    def __len__(self) -> int:
        """Batches per epoch on this rank."""
        if self.shuffle:
            return len(self.batches) // self.world_size
        return len(range(self.rank, len(self.batches), self.world_size))

    def epoch_order(self, epoch: int) -> np.ndarray:
        """Indices into self.batches that this rank visits in `epoch`, in order."""
        if not self.shuffle:
            return np.arange(self.rank, len(self.batches), self.world_size)
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        perm = torch.randperm(len(self.batches), generator=gen).numpy()
        return perm[self.rank :: self.world_size][: len(self)]

    def __iter__(self) -> Iterator[Batch]:
        while True:
            order = self.epoch_order(self.epoch)
            while self.position < len(order):
                batch = self.batch(self.batches[order[self.position]])
                self.position += 1
                yield batch
            self.epoch += 1
            self.position = 0
            if not self.shuffle:
                return

    def batch(self, index: np.ndarray) -> Batch:
        """The padded Batch of the pairs at `index` (vectorised: no Python loop over pairs)."""
        ls, lt = self._src_len[index], self._tgt_len[index]
        src = _pad(self.corpus.src, index, ls, int(ls.max()) + 1, self.pad_id, 0)
        src[np.arange(len(index)), ls] = self.eos_id
        width = int(lt.max()) + 1
        tgt_in = _pad(self.corpus.tgt, index, lt, width, self.pad_id, 1)
        tgt_in[:, 0] = self.bos_id
        tgt_out = _pad(self.corpus.tgt, index, lt, width, self.pad_id, 0)
        tgt_out[np.arange(len(index)), lt] = self.eos_id
        return Batch(
            src=torch.from_numpy(src),
            tgt_in=torch.from_numpy(tgt_in),
            tgt_out=torch.from_numpy(tgt_out),
            n_src_tokens=int(ls.sum()) + len(index),
            n_tgt_tokens=int(lt.sum()) + len(index),
            ids=torch.from_numpy(np.asarray(index, dtype=np.int64)),
        )

    def state_dict(self) -> dict[str, Any]:
        """The position: the next batch is number `position` of epoch `epoch` on this rank."""
        return {
            "epoch": self.epoch,
            "position": self.position,
            "seed": self.seed,
            "n_batches": len(self.batches),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a state_dict(); needs the same corpus, max_tokens and seed."""
        if (
            state.get("n_batches", len(self.batches)) != len(self.batches)
            or state.get("seed", self.seed) != self.seed
        ):
            raise DataError(
                f"cannot resume the batch order: saved with seed {state.get('seed')} and "
                f"{state.get('n_batches')} batches, now seed {self.seed} and "
                f"{len(self.batches)} batches "
                "(the corpus, train.max_tokens or train.seed changed)"
            )
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
