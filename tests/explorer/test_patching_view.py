"""The patching view at a real model's size (12 heads), across a model switch and on a gap too small to read: heads
numbered from 1 as everywhere else in the window (never "0 0" / "8 8" when the axis thins its labels), nothing of
the previous model left, and a colour scale that does not stretch a 0.18-logit gap's ratios to −3 … +3.5."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtCore import QPointF

from explorer.explain._qt.patching_view import PatchingView

LAYERS, HEADS = 6, 12
TOKENS = [f"tok{position}" for position in range(20)]


def result(scores, clean=3.0, corrupted=-1.0):
    return SimpleNamespace(scores=np.asarray(scores, np.float32), clean_value=clean, corrupted_value=corrupted)


@pytest.fixture
def view(qtbot):
    view = PatchingView()
    qtbot.addWidget(view)
    view.resize(700, 600)  # the Explain tab's right half at the window's 1400 px
    view.show()
    qtbot.waitExposed(view)
    return view


def head_scores() -> np.ndarray:
    return np.linspace(-0.2, 1.1, LAYERS * HEADS, dtype=np.float32).reshape(LAYERS, HEADS)


def test_heads_are_numbered_from_one_and_a_thinned_axis_never_doubles_them(view):
    view.show_patching(TOKENS, LAYERS, result(np.zeros((LAYERS, len(TOKENS)))), result(head_scores()))
    axis = view.heads_columns
    assert axis.labels == [str(head) for head in range(1, HEADS + 1)]
    (stride, centres), = axis.tickValues(0, HEADS, 90)  # a narrow axis: every other label or fewer
    assert stride > 1
    strings = axis.tickStrings(centres, 1, stride)
    assert strings == [str(int(centre) + 1) for centre in centres], strings  # "9", never "8 9" or "8 8"
    view.grab()  # drawn at the view's own size too
    (stride, centres), = axis.tickValues(0, HEADS, axis.geometry().width())
    assert all(" " not in text for text in axis.tickStrings(centres, 1, stride))


def test_the_hover_and_the_layer_bars_count_heads_from_one(view):
    view.show_patching(TOKENS, LAYERS, None, result(head_scores()))
    view.grab()
    scene_point = view.heads_plot.vb.mapViewToScene(QPointF(0.5, 2.5))  # layer 3, the first head
    view._on_moved(scene_point)
    assert view.hover_label.text().startswith("layer 3, head 1:"), view.hover_label.text()
    view.show_layer(2)
    assert list(view.layer_bars.opts["x"]) == list(range(1, HEADS + 1))
    np.testing.assert_allclose(view.layer_heights(), head_scores()[2])


def test_another_model_leaves_nothing_of_the_previous_ones_maps(view):
    view.show_patching(TOKENS, LAYERS, result(np.ones((LAYERS + 1, len(TOKENS)))), result(head_scores()))
    view.grab()
    view._on_moved(view.heads_plot.vb.mapViewToScene(QPointF(3.5, 1.5)))
    assert view.hover_label.text().strip()
    view.show_patching([], 2, None, None)  # what the Explain tab draws for a new model
    assert view.residual_rows.labels == [] and view.residual_tokens.labels == []
    assert view.heads_rows.labels == [] and view.heads_columns.labels == []
    assert not view.hover_label.text().strip()
    assert not view.residual_image.isVisible() and not view.heads_image.isVisible()
    view._on_moved(view.heads_plot.vb.mapViewToScene(QPointF(3.5, 1.5)))  # the old cells are not read out either
    assert not view.hover_label.text().strip()


def test_a_gap_too_small_to_read_is_said_and_not_stretched_over_the_scale(view):
    noisy = np.random.default_rng(0).uniform(-3.0, 3.5, (LAYERS, HEADS)).astype(np.float32)
    view.show_patching(TOKENS, LAYERS, None, result(noisy, clean=5.12, corrupted=4.94))
    assert view.levels == (-1.0, 1.0)
    caption = view.caption.text()
    assert "0.18" in caption and "too small" in caption
    view.show_patching(TOKENS, LAYERS, None, result(np.clip(noisy, -0.2, 1.4)))  # a 4-logit gap: read as it is
    assert view.levels == (pytest.approx(-1.4), pytest.approx(1.4))
    assert "too small" not in view.caption.text()
