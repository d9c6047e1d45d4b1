"""Which positions of a padded (B, T) batch the encoder's flat (N, D) hidden states hold: every one, or only those a
head will read (and the real tokens), so that the dense layers skip the rest. Every family's encoder uses it."""

from __future__ import annotations

import torch


class TokenRows:
    """Which (sequence, position) of the padded batch each row of the encoder's (N, D) hidden states holds.

    Either every position (N = B × T; pad and unpad are free reshapes) or only the `kept` ones: then the
    projections, feed-forward and LayerNorms run on real tokens only, and attention alone sees the padded
    (B, T) grid, where a left-out position is a zero row that the key padding mask hides.
    """

    def __init__(self, batch_size: int, seq_len: int, kept: torch.Tensor | None = None):
        self.batch_size, self.seq_len = batch_size, seq_len
        self.index = None if kept is None else kept.flatten().nonzero().squeeze(1)  # (N,) of b * T + t
        self.row_of_position = None if kept is None else kept.flatten().cumsum(0) - 1  # (B * T,) -> row in N

    def pad(self, rows: torch.Tensor) -> torch.Tensor:
        """(N, F) -> (B, T, F), zeros at the positions left out."""
        if self.index is None:
            return rows.view(self.batch_size, self.seq_len, -1)
        grid = rows.new_zeros(self.batch_size * self.seq_len, rows.size(-1)).index_copy(0, self.index, rows)
        return grid.view(self.batch_size, self.seq_len, -1)

    def unpad(self, grid: torch.Tensor) -> torch.Tensor:
        """(B, T, F) -> (N, F)."""
        flat = grid.reshape(self.batch_size * self.seq_len, -1)
        return flat if self.index is None else flat.index_select(0, self.index)

    def at(self, rows: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The rows (N, F) at positions (B, M) of each sequence: (B, M, F). Each position must be kept."""
        flat_positions = positions + torch.arange(self.batch_size, device=positions.device)[:, None] * self.seq_len
        return rows[flat_positions if self.index is None else self.row_of_position[flat_positions]]
