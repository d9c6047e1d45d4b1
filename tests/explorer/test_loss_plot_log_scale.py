"""Log scale is a real option of the training plots' loss: every item on the plot is drawn on it (the training
curves, smoothed and raw, and the held-out points), its ticks name values ("0.01", "1", "10"), never an exponent
multiplier ("loss (x1e+09)"), a value ≤ 0 is left out and said, and pyqtgraph's generic Transforms menu (which
transformed some items and not others) is gone."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from bertcore.training.pretraining import EvalStats
from explorer.runs._qt.loss_plots import LossPlots
from explorer.runs.curve_layout import LOSS_PLOT
from tests.explorer.conftest import shown
from tests.explorer.test_loss_plot_ranges import step


def falling_loss(number: int) -> float:
    return 9.0 * math.exp(-number / 30)  # from 9 to ~0.0004: four decades


def feed(plots: LossPlots, steps) -> None:
    for number in steps:
        record = step(number, falling_loss(number))
        if number % 40 == 0:
            held_out = EvalStats(step=number, loss=1.3 * falling_loss(number), mlm_loss=falling_loss(number),
                                 nsp_loss=0.6, mlm_accuracy=0.5, nsp_accuracy=0.6, num_examples=64)
            record = dataclasses.replace(record, eval=held_out)
        plots.add(record)
    plots.flush()


def drawn(item) -> tuple[np.ndarray, np.ndarray]:
    x, y = item.getData()
    return np.asarray(x if x is not None else []), np.asarray(y if y is not None else [])


@pytest.mark.slow
def test_every_item_of_the_loss_plot_is_drawn_on_the_log_scale(qtbot):
    plots = shown(qtbot, LossPlots(), (800, 640))
    feed(plots, range(1, 301))
    linear = {key: drawn(item)[1].copy() for key, item in plots._raw_items.items() if plots.point_count(key)}
    plots.log_check.setChecked(True)
    plots.flush()
    plots.graphics.grab()
    for curve in plots.layout_spec.train:
        if curve.plot != LOSS_PLOT or not plots.point_count(curve.key):
            continue
        steps, values = plots.series(curve.key)
        for item in (plots._raw_items[curve.key], plots._smooth_items.get(curve.key)):
            x, y = drawn(item)
            assert len(y) and np.all(np.isfinite(y)), curve.key
            if item is plots._raw_items[curve.key]:
                np.testing.assert_allclose(y, np.log10(values[np.searchsorted(steps, x)]), rtol=1e-6)
            else:  # the smoothed curve: the logs of what the linear plot drew
                assert y.max() <= math.log10(values.max()) + 1e-6
        if curve.key in ("loss", "mlm_loss"):
            assert drawn(plots._raw_items[curve.key])[1].min() < math.log10(0.01)  # four decades, as logs
    for key in ("loss", "mlm_loss"):
        steps, values = plots.series(key, held_out=True)
        x, y = drawn(plots._eval_items[key])
        assert len(x) == len(steps) > 0
        np.testing.assert_allclose(y, np.log10(values), rtol=1e-6)  # the held-out points too
    low, high = plots.loss_plot.viewRange()[1]
    assert low <= math.log10(falling_loss(300)) and high >= math.log10(9.0 * 1.3)  # every value in view
    plots.log_check.setChecked(False)
    plots.flush()
    np.testing.assert_allclose(drawn(plots._raw_items["loss"])[1], linear["loss"])  # back as it was


def test_the_log_axis_names_values_not_an_exponent_multiplier(qtbot):
    plots = shown(qtbot, LossPlots(), (700, 560))
    feed(plots, range(1, 121))
    plots.set_log_scale(True)
    plots.flush()
    plots.graphics.grab()
    axis = plots.loss_plot.getAxis("left")
    assert "x1e" not in axis.labelString() and "(x" not in axis.labelString()
    assert axis.tickStrings([-3.0, -2.0, -1.0, 0.0, 1.0], axis.scale, 1.0) == ["0.001", "0.01", "0.1", "1", "10"]
    assert axis.tickStrings([math.log10(2.0), math.log10(5.0), math.log10(20.0)], axis.scale, None) == \
        ["2", "5", "20"]
    levels = axis.tickValues(*plots.loss_plot.viewRange()[1], 300)
    shown_values = [10 ** value for _, values in levels for value in values]
    assert shown_values and all(value > 0 for value in shown_values)


def test_values_at_or_below_zero_are_left_out_of_the_log_scale_and_said(qtbot):
    plots = shown(qtbot, LossPlots(), (700, 560))
    feed(plots, range(1, 21))
    plots.add(dataclasses.replace(step(21, 0.0), mlm_loss=0.0))  # a loss of exactly 0 (a regression head, say)
    plots.set_log_scale(True)
    plots.flush()
    x, y = drawn(plots._raw_items["loss"])
    assert 21 not in x and np.all(np.isfinite(y))
    assert plots.log_note.isVisibleTo(plots) and "≤ 0" in plots.log_note.text() and "2" in plots.log_note.text()
    plots.set_log_scale(False)
    plots.flush()
    assert not plots.log_note.isVisibleTo(plots)
    assert 21 in drawn(plots._raw_items["loss"])[0]


def test_pyqtgraphs_transforms_menu_is_not_offered(qtbot):
    plots = shown(qtbot, LossPlots(), (700, 560))
    for plot in plots.plots:
        visible = {action.text() for action in plot.ctrlMenu.actions() if action.isVisible()}
        assert "Transforms" not in visible, visible


def test_a_short_log_axis_labels_only_what_has_room(qtbot):
    from explorer.common._qt.log_axis import MIN_TICK_GAP_PX, LogValueAxis

    axis = LogValueAxis("left")
    axis.set_log(True)
    for size_px, decades in ((60, 1), (100, 1), (400, 1), (200, 4), (120, 4)):
        levels = axis.logTickValues(0.0, float(decades), size_px, [])
        values = sorted(value for _, level in levels for value in level)
        gaps = np.diff(values) * size_px / decades
        assert values and gaps.min() >= MIN_TICK_GAP_PX - 1e-9, (size_px, decades, values)
    assert len(axis.logTickValues(0.0, 1.0, 400, [])[1][1]) == 8  # room for 2 … 9 in one tall decade
