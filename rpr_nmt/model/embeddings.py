"""Token embeddings scaled by sqrt(D), with the optional absolute sinusoidal encoding.

Shape legend: B batch, T sequence length, D model dim, V vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from rpr_nmt.model.dropout import Dropout

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
    """Embedding lookup times sqrt(D), plus the sinusoid when enabled, then dropout.

    The lookup table is passed in, so that source, target and output projection can share one.
    """

    def __init__(self, table: nn.Embedding, *, dropout: float, sinusoidal: bool) -> None:
        """Args:
        table: the (V, D) embedding, possibly shared.
        dropout: dropout on the summed embedding.
        sinusoidal: add the absolute sinusoidal encoding (the paper's relative models do not).
        """
        super().__init__()
        self.table = table
        self.scale = math.sqrt(table.embedding_dim)
        self.sinusoidal = sinusoidal
        self.dropout = Dropout(dropout)

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
        return self.dropout(x)
