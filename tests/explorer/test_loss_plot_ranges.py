"""The training plots' value axes while a run is followed: set from what is drawn, on a steady grid, instead of
pyqtgraph's auto-range, which measured every curve's bounds again on every frame of a run."""

import math

import pyqtgraph as pg
import pytest

from bertcore.training.pretraining import StepStats
from explorer.runs._qt.loss_plots import LossPlots
from explorer.runs.curve_series import steady_range


def step(number: int, loss: float) -> StepStats:
    return StepStats(step=number, total_steps=400, loss=loss, mlm_loss=0.9 * loss, nsp_loss=0.69,
                     mlm_accuracy=0.1, nsp_accuracy=0.5, learning_rate=1e-3 * min(1.0, number / 40),
                     grad_norm=1.0, tokens=0, tokens_per_second=0.0, elapsed_seconds=0.0)


def test_steady_range_holds_the_values_on_a_grid_of_half_their_order_of_magnitude():
    assert steady_range(6.2, 9.1) == (6.0, 9.5)
    assert steady_range(0.0, 3.7e-4) == (0.0, pytest.approx(4e-4))
    assert steady_range(5.0, 5.0) == (pytest.approx(4.95), pytest.approx(5.05))  # flat: a step either side
    assert steady_range(0.0, 0.0) == (-0.5, 0.5)
    low, high = steady_range(-0.31, 0.82)
    assert low <= -0.31 and high >= 0.82
    with pytest.raises(ValueError, match="not finite"):
        steady_range(0.0, math.inf)


def follow(plots: LossPlots, steps: range) -> list[tuple[float, float]]:
    """The loss plot's y range after each redraw."""
    ranges = []
    for number in steps:
        plots.add(step(number, 2.0 + 7.0 * math.exp(-number / 120)))
        plots.flush()
        plots.graphics.grab()  # painted: pyqtgraph's auto-range acts when the view paints
        ranges.append(tuple(plots.loss_plot.viewRange()[1]))
    return ranges


@pytest.mark.slow
def test_a_followed_run_keeps_every_value_in_view_without_measuring_the_curves_each_frame(qtbot, monkeypatch):
    measured = []
    original = pg.ViewBox.childrenBounds
    monkeypatch.setattr(pg.ViewBox, "childrenBounds",
                        lambda self, *args, **kwargs: measured.append(1) or original(self, *args, **kwargs))
    plots = LossPlots()
    qtbot.addWidget(plots)
    plots.resize(700, 600)
    plots.show()
    ranges = follow(plots, range(1, 301))
    assert len(measured) <= 10  # before the first values only; pyqtgraph's auto-range measured 603 times here
    assert len(set(ranges)) <= 15  # the loss falls from 9 to 2.6 here, over 0.5-wide cells
    low, high = ranges[-1]
    assert low <= 0.69 and high >= 9.0  # every value drawn is in view (NSP's 0.69 the lowest)


@pytest.mark.slow
def test_after_a_zoom_the_axis_is_the_users_and_the_auto_button_follows_again(qtbot):
    plots = LossPlots()
    qtbot.addWidget(plots)
    plots.resize(700, 600)
    plots.show()
    follow(plots, range(1, 50))
    plots.loss_plot.getViewBox().setYRange(3.0, 4.0, padding=0)
    plots.loss_plot.getViewBox().sigRangeChangedManually.emit([False, True])  # what a wheel or a drag sends
    follow(plots, range(50, 120))
    assert plots.loss_plot.viewRange()[1] == [3.0, 4.0]
    plots.loss_plot.autoBtn.clicked.emit(plots.loss_plot.autoBtn)  # what a click on "A" sends
    follow(plots, range(120, 122))
    low, high = plots.loss_plot.viewRange()[1]
    assert low <= 4.0 and high >= 8.0
