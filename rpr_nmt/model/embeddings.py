"""Token embeddings scaled by sqrt(D), with the optional absolute sinusoidal encoding or a learned
position table (positions/learned.py).

Shape legend: B batch, T sequence length, D model dim, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from rpr_nmt.model.dropout import Dropout
from rpr_nmt.model.positions.learned import LearnedPositions

__all__ = ["TokenEmbedding", "sinusoidal_encoding"]


def sinusoidal_encoding(positions: Tensor, d_model: int) -> Tensor:
    """Vaswani et al.'s absolute encoding: sin on even features, cos on odd ones.

    Args:
        positions: absolute positions.
        d_model: feature size D.

    Returns:
        The encoding, float32, wavelengths from 2 pi to 10000 * 2 pi.

    Shapes:
        positions: (T,); returns (T, D).
    """
    half = torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32)
    inv_freq = torch.exp(half * (-math.log(10000.0) / d_model))  # (ceil(D / 2),)
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, ceil(D / 2))
    encoding = torch.zeros(len(positions), d_model, device=positions.device)  # (T, D)
    encoding[:, 0::2] = torch.sin(angles)
    encoding[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return encoding


class TokenEmbedding(nn.Module):
    """Embedding lookup times sqrt(D), plus the sinusoid or learned positions if used, then dropout.

    The lookup table is passed in, so that source, target and output projection can share one.
    """

    def __init__(
        self,
        table: nn.Embedding,
        *,
        dropout: float,
        sinusoidal: bool,
        learned: LearnedPositions | None = None,
    ) -> None:
        """Args:
        table: the (V, D) embedding, possibly shared.
        dropout: dropout on the summed embedding.
        sinusoidal: add the absolute sinusoidal encoding (the paper's relative models do not).
        learned: a learned position table to add instead (positions/learned.py); None = none.
        """
        super().__init__()
        if sinusoidal and learned is not None:
            raise ValueError("the sinusoid and learned positions are two absolute methods")
        self.table = table
        self.scale = math.sqrt(table.embedding_dim)
        self.sinusoidal = sinusoidal
        self.learned = learned  # a submodule only when given: other models' state is unchanged
        self.dropout = Dropout(dropout)

    @property
    def max_positions(self) -> int | None:
        """Rows of the learned position table (the positions this embedding can read); None
        without one: the sinusoid and no absolute method read any position."""
        return None if self.learned is None else self.learned.max_positions

    def forward(self, tokens: Tensor, first_position: int = 0) -> Tensor:
        """Embed tokens at absolute positions first_position onwards.

        Shapes:
            tokens: (B, T); returns (B, T, D).
        """
        x = self.table(tokens) * self.scale  # (B, T, D)
        if self.sinusoidal:
            positions = torch.arange(
                first_position, first_position + tokens.size(1), device=tokens.device
            )
            x = x + sinusoidal_encoding(positions, x.size(-1)).to(x.dtype)
        if self.learned is not None:
            x = x + self.learned(tokens.size(1), first_position).to(x.dtype)  # (B, T, D)
        return self.dropout(x)
