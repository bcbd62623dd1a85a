"""What incremental decoding keeps between steps: projected keys and values per attention module.

Shape legend: B decoder rows (sentences x beams), A source sentences, H heads, Tk cached positions,
S source length, Dh head dim.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = ["DecoderCache", "KeyValueCache"]


@dataclass
class KeyValueCache:
    """Projected keys and values of the positions attended so far (one attention module).

    Shapes:
        keys, values: (B, H, Tk, Dh).
    """

    keys: Tensor
    values: Tensor
    # Buffers (B, H, Tk + 1, Dh) whose first Tk positions are keys / values: room for one append.
    _room: tuple[Tensor, Tensor] | None = field(default=None, repr=False, compare=False)

    @property
    def length(self) -> int:
        """Number of cached key positions."""
        return self.keys.size(2)

    def index_select(self, index: Tensor) -> KeyValueCache:
        """Rows `index` (B',) of the batch, for beam expansion and reordering.

        The copies leave room for one more position, so that the next step's `append` writes its
        keys and values in place instead of copying the whole cache again.
        """
        B, (_, H, T, Dh) = index.numel(), self.keys.shape
        room = self.keys.new_empty(B, H, T + 1, Dh), self.values.new_empty(B, H, T + 1, Dh)
        torch.index_select(self.keys, 0, index, out=room[0][:, :, :T])
        torch.index_select(self.values, 0, index, out=room[1][:, :, :T])
        return KeyValueCache(room[0][:, :, :T], room[1][:, :, :T], room)

    def append(self, keys: Tensor, values: Tensor) -> KeyValueCache:
        """The cache extended by new positions (B, H, Tnew, Dh); this cache stays as it is.

        One position written into the room left by `index_select` costs no copy of the cache;
        the room serves one append only (a second append to this cache copies, as any other).
        """
        if self._room is not None and keys.size(2) == 1:
            room, self._room = self._room, None
            room[0][:, :, -1:] = keys
            room[1][:, :, -1:] = values
            return KeyValueCache(*room)
        return KeyValueCache(
            torch.cat([self.keys, keys], dim=2), torch.cat([self.values, values], dim=2)
        )


@dataclass
class DecoderCache:
    """State of incremental decoding: per-layer keys/values and the number of target positions fed.

    Attributes:
        self_attn: per layer, keys and values of target positions 0 .. length - 1,
            (B, H, length, Dh).
        cross_attn: per layer, the projected encoder memory (A, H, S, Dh), computed once.
        length: target positions fed so far, i.e. the absolute position of the next token.
    """

    self_attn: list[KeyValueCache]
    cross_attn: list[KeyValueCache]
    length: int

    def index_select(self, index: Tensor, memory_index: Tensor | None = None) -> DecoderCache:
        """Follow the surviving beams: target rows `index`, source sentences `memory_index`.

        Args:
            index: (B',) the decoder row each new row continues (beams expand and reorder).
            memory_index: (A',) the source sentences kept, when some have finished; None keeps
                the projected memory as it is (it has one row per sentence, shared by its beams,
                so reordering beams never copies it).
        """
        cross_attn = self.cross_attn
        if memory_index is not None:
            cross_attn = [kv.index_select(memory_index) for kv in cross_attn]
        return DecoderCache(
            [kv.index_select(index) for kv in self.self_attn], cross_attn, self.length
        )
