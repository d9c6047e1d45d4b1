"""The heatmaps' layout math, without Qt: picture sizes, thumbnails in a grid, token labels that fit an axis."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.common.heatmap_layout import (
    MAX_LABEL_CHARS,
    PIXEL_QUANTUM,
    grid_columns,
    label_ticks,
    picture_pixels,
    short_label,
    shown_index,
    thumbnail_side,
)


def test_a_token_shows_at_its_index_among_the_positions_shown():
    shown = np.array([1, 2, 3, 5, 6])  # [CLS] (0) and a [SEP] (4) hidden
    assert [shown_index(shown, position) for position in (1, 3, 5, 6)] == [0, 2, 3, 4]
    assert shown_index(shown, 0) == shown_index(shown, 4) == shown_index(shown, -1) == -1


def test_a_picture_is_rounded_up_so_that_a_small_resize_keeps_it():
    assert picture_pixels(0) == PIXEL_QUANTUM and picture_pixels(1) == PIXEL_QUANTUM
    assert picture_pixels(100) == picture_pixels(120) == 128
    assert picture_pixels(129) == 160


@pytest.mark.parametrize(("heads", "width", "height", "columns"), [
    (12, 400, 300, 4),  # 4 x 3 beats 3 x 4 and 6 x 2 in a landscape box
    (12, 300, 400, 3),
    (12, 1200, 100, 12),  # a strip: one row
    (1, 500, 500, 1),
    (4, 400, 400, 2),
])
def test_the_grid_takes_the_columns_that_make_thumbnails_largest(heads, width, height, columns):
    assert grid_columns(heads, width, height) == columns


def test_a_thumbnail_side_fills_its_cell_and_leaves_the_gaps():
    side = thumbnail_side(12, 400, 300, gap=0.05)  # 4 columns and 3 gaps of 5%
    assert side == pytest.approx(400 / 4.15)
    assert thumbnail_side(0, 400, 300) == thumbnail_side(1, 400, 300) == 300  # no heads yet: one whole cell


def test_long_word_pieces_are_cut_with_an_ellipsis():
    assert short_label("a" * MAX_LABEL_CHARS) == "a" * MAX_LABEL_CHARS
    cut = short_label("##" + "x" * 20)
    assert len(cut) == MAX_LABEL_CHARS and cut.endswith("…") and cut.startswith("##x")


def test_labels_are_thinned_to_a_round_stride_that_fits():
    stride, centres = label_ticks(0, 10, 10, length_px=100, spacing_px=13)  # wants 1.3 cells apart
    assert stride == 2 and centres == [0.5, 2.5, 4.5, 6.5, 8.5]
    stride, centres = label_ticks(0, 512, 512, length_px=512, spacing_px=13)
    assert stride == 16 and len(centres) * 13 <= 512 and centres[0] == 0.5
    assert label_ticks(10, 0, 10, 100, 13) == label_ticks(0, 10, 10, 100, 13)  # an inverted (query) axis
    assert label_ticks(0, 100_000, 100_000, 10, 13)[0] == 130_000  # past every round stride: the stride wanted
    assert label_ticks(20, 30, 10, 100, 13) is None  # no cell in view
    assert label_ticks(3.2, 7.9, 10, 1000, 13) == (1, [3.5, 4.5, 5.5, 6.5, 7.5, 8.5])  # each cell in view
