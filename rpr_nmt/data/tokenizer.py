"""Token conventions and the sentencepiece BPE tokenizer.

Fixed ids (docs/architecture.md): PAD_ID = 0, UNK_ID = 1, BOS_ID = 2, EOS_ID = 3. A source sentence
is its BPE ids followed by EOS; a target is split into the decoder input [BOS] + ids and the decoder
output ids + [EOS].
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import sentencepiece as spm

from rpr_nmt.data.errors import DataError

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3


def default_threads() -> int:
    """Threads for sentencepiece: at most 2, as the CPUs here are shared."""
    return max(1, min(2, os.cpu_count() or 1))


class Tokenizer:
    """A joint sentencepiece BPE model with the fixed special ids.

    Args:
        proto: the serialized sentencepiece model (what checkpoints store).

    Raises:
        DataError: the model cannot be parsed or its special ids differ from PAD/UNK/BOS/EOS =
            0/1/2/3.
    """

    def __init__(self, proto: bytes) -> None:
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(proto)
        except Exception as e:  # noqa: BLE001 - sentencepiece raises plain RuntimeError/OSError
            raise DataError(f"not a sentencepiece model ({len(proto)} bytes): {e}") from e
        ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise DataError(
                f"sentencepiece model has pad/unk/bos/eos ids {ids}, expected (0, 1, 2, 3)"
            )
        self.proto = proto
        self.sha256 = hashlib.sha256(proto).hexdigest()
        self._special = {PAD_ID, BOS_ID, EOS_ID}

    @classmethod
    def from_proto(cls, proto: bytes) -> Tokenizer:
        """The tokenizer of a serialized model, e.g. checkpoint["bpe_model"]."""
        return cls(proto)

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        """The tokenizer of a .model file."""
        return cls(Path(path).read_bytes())

    @property
    def vocab_size(self) -> int:
        return self._sp.vocab_size()

    @property
    def pad_id(self) -> int:
        return PAD_ID

    @property
    def unk_id(self) -> int:
        return UNK_ID

    @property
    def bos_id(self) -> int:
        return BOS_ID

    @property
    def eos_id(self) -> int:
        return EOS_ID

    def encode(self, text: str) -> list[int]:
        """BPE ids of one sentence, without BOS or EOS."""
        return self._sp.encode(text, out_type=int)

    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """BPE ids of many sentences, encoded on num_threads threads (default_threads() if None)."""
        threads = num_threads or default_threads()
        return self._sp.encode(list(texts), out_type=int, num_threads=threads)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of BPE ids; PAD, BOS and EOS are skipped wherever they are, UNK renders as " ⁇ "."""
        return self._sp.decode([int(i) for i in ids if int(i) not in self._special])

    def id_to_piece(self, i: int) -> str:
        """The piece of one id, e.g. "▁the"."""
        return self._sp.id_to_piece(int(i))

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size}, sha256={self.sha256[:12]})"
