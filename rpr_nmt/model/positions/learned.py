"""Learned absolute positions: a table of one trained vector per position, added to the token
embeddings (Gehring et al. 2017, sec. 3.1; Vaswani et al. 2017, sec. 3.5, "learned positional
embeddings"):

    x_t = sqrt(D) E[token_t] + P[t],   t = 0 .. max_positions - 1

Shape legend: T positions, D model dim.

The table has max_positions rows; a longer input has no row to read and is refused with one error
naming its length and the key, never wrapped around or clipped.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["LearnedPositions"]


class LearnedPositions(nn.Module):
    """P, the (max_positions, D) table of one stack."""

    def __init__(self, max_positions: int, d_model: int) -> None:
        """Args: max_positions, rows of the table (the longest input); d_model, D."""
        super().__init__()
        if max_positions < 1:
            raise ValueError(f"model.max_positions={max_positions} must be at least 1")
        self.max_positions = max_positions
        self.table = nn.Parameter(torch.empty(max_positions, d_model))  # (max_positions, D)
        # N(0, 1 / D), as fairseq's learned positions; the tokens are N(0, 1) after sqrt(D).
        nn.init.normal_(self.table, mean=0.0, std=d_model**-0.5)

    def forward(self, length: int, first_position: int = 0) -> Tensor:
        """Rows first_position .. first_position + length - 1.

        Raises:
            ValueError: the last position is past the table (named, with model.max_positions).

        Shapes:
            returns (T, D).
        """
        last = first_position + length - 1
        if last >= self.max_positions:
            raise ValueError(
                f"an input of {last + 1} positions is longer than the learned position table: "
                f"model.max_positions={self.max_positions}; train with a larger "
                "model.max_positions or shorten the input"
            )
        return self.table[first_position : first_position + length]  # (T, D)
