"""Where things go in the attention heatmaps, without Qt: a picture's resolution, thumbnails in a grid, token
labels that fit an axis, and where a token shows among the ones a view shows. The Qt views
(`explorer.common._qt.token_axis`, `token_heatmap`, `head_grid`) ask here and only draw.
"""

from __future__ import annotations

import math

import numpy as np

PIXEL_QUANTUM = 32  # picture sizes are rounded up to this many pixels, so a small resize reuses them
GRID_GAP = 0.05  # space between thumbnails, as a fraction of a thumbnail
MAX_LABEL_CHARS = 12
NICE_STRIDES = (1, 2, 3, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256)


def shown_index(positions: np.ndarray, position: int) -> int:
    """Where the token at original `position` is among `positions`, the original positions a view shows (hidden
    special tokens left out): its row and column there; -1 when it is -1 or hidden."""
    hits = np.flatnonzero(positions == position) if position >= 0 else ()
    return int(hits[0]) if len(hits) else -1


def picture_pixels(pixels: float) -> int:
    """A picture's resolution for a view `pixels` wide: rounded up, so a small resize keeps the picture."""
    return max(PIXEL_QUANTUM, math.ceil(pixels / PIXEL_QUANTUM) * PIXEL_QUANTUM)


def grid_columns(num_heads: int, width: float, height: float, gap: float = GRID_GAP) -> int:
    """How many columns give `num_heads` square thumbnails the most room in width x height pixels."""
    best, best_size = 1, -1.0
    for columns in range(1, max(1, num_heads) + 1):
        rows = math.ceil(num_heads / columns)
        size = min(width / (columns + gap * (columns - 1)), height / (rows + gap * (rows - 1)))
        if size > best_size + 1e-9:
            best, best_size = columns, size
    return best


def thumbnail_side(num_heads: int, width: float, height: float, gap: float = GRID_GAP) -> float:
    """The side in pixels of each of `num_heads` square thumbnails laid out by `grid_columns`."""
    num_heads = max(1, num_heads)
    columns = grid_columns(num_heads, width, height, gap)
    rows = math.ceil(num_heads / columns)
    return min(width / (columns + gap * (columns - 1)), height / (rows + gap * (rows - 1)))


def short_label(token: str) -> str:
    """A token as an axis names it: long WordPieces cut to MAX_LABEL_CHARS, ending in "…"."""
    return token if len(token) <= MAX_LABEL_CHARS else token[: MAX_LABEL_CHARS - 1] + "…"


def label_ticks(low: float, high: float, count: int, length_px: float,
                spacing_px: float) -> tuple[int, list[float]] | None:
    """Which of `count` token labels (cell i spans i..i+1) an axis showing low..high over `length_px` pixels
    has room for, at least `spacing_px` apart: every k-th one, k a round number. (k, the cell centres to
    label), or None when no cell is in view."""
    low, high = sorted((low, high))
    first, last = max(0, math.floor(low)), min(count - 1, math.ceil(high))
    if last < first:
        return None
    wanted = (high - low) * spacing_px / length_px
    stride = next((nice for nice in NICE_STRIDES if nice >= wanted), math.ceil(wanted))
    start = math.ceil(first / stride) * stride
    return stride, [index + 0.5 for index in range(start, last + 1, stride)]
