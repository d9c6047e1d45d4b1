"""The training plots keep what seldom changes (the axes, the held-out points and their dashed lines) as pixels
between the frames that repaint it (Qt's item cache). What they show must be what plots without any cache show,
through every change those items go through: new points, a new value range, a zoom, a resize, the step marker,
a cleared run, the fine-tuning layout."""

import dataclasses
import math

import pytest
from PySide6.QtWidgets import QGraphicsItem

from bertcore.training.finetuning import TaskEvalStats, TaskStepStats
from bertcore.training.pretraining import EvalStats, StepStats
from explorer.runs._qt.loss_plots import LossPlots
from explorer.runs.curve_layout import FINETUNING
from tests.explorer.conftest import shown
from tests.explorer.test_loss_plot_ranges import step


def pretraining_step(number: int, loss: float) -> StepStats:
    """The ranges test's step, with a held-out evaluation every 40 steps."""
    if number % 40:
        return step(number, loss)
    held_out = EvalStats(step=number, loss=loss + 0.3, mlm_loss=loss, nsp_loss=0.6, mlm_accuracy=number / 400,
                         nsp_accuracy=0.6, num_examples=64)
    return dataclasses.replace(step(number, loss), eval=held_out)


def finetuning_step(number: int) -> TaskStepStats:
    held_out = None
    if number % 10 == 0:
        held_out = TaskEvalStats(step=number, loss=1.0 / number ** 0.5, main_metric="accuracy", num_examples=32,
                                 metrics={"accuracy": 0.5 + number / 200, "macro_f1": 0.45 + number / 220})
    return TaskStepStats(step=number, total_steps=60, loss=1.2 / number ** 0.5,
                         metrics={"accuracy": 0.5 + number / 150}, learning_rate=2e-5, grad_norm=1.0, tokens=0,
                         tokens_per_second=0.0, elapsed_seconds=0.0, epoch=number / 20, eval=held_out)


def assert_same_pixels(cached: LossPlots, plain: LossPlots) -> None:
    for plots in (cached, plain):
        plots.flush()
    for item in plain.graphics.scene().items():  # items made since (a curve's first held-out point) included
        item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
    assert cached.graphics.grab().toImage() == plain.graphics.grab().toImage()


@pytest.mark.slow
def test_plots_kept_as_pixels_show_what_plots_drawn_afresh_show(qtbot):
    cached, plain = (shown(qtbot, LossPlots(), (700, 560)) for _ in range(2))
    both = (cached, plain)
    kept = QGraphicsItem.CacheMode.DeviceCoordinateCache
    assert cached.loss_plot.getAxis("left").cacheMode() == kept

    def feed(steps, record=lambda number: pretraining_step(number, 2.0 + 7.0 * math.exp(-number / 60))):
        for number in steps:
            for plots in both:
                plots.add(record(number))
                plots.flush()
                plots.graphics.grab()  # a frame: what is cached now must be redrawn when it changes

    feed(range(1, 121))
    assert cached.eval_point_count() == 3
    assert cached._eval_items["loss"].scatter.cacheMode() == kept
    assert_same_pixels(cached, plain)
    feed(range(121, 125), lambda number: pretraining_step(number, 30.0))  # a spike: a new loss range, new ticks
    assert_same_pixels(cached, plain)
    for plots in both:
        plots.loss_plot.setXRange(60, 110, padding=0)  # zoomed: every point moves, some leave the view
    assert_same_pixels(cached, plain)
    for plots in both:
        plots.resize(520, 640)
    assert_same_pixels(cached, plain)
    for plots in both:
        plots.set_marker(80)
    assert_same_pixels(cached, plain)
    for plots in both:
        plots.set_layout(FINETUNING)  # cleared, then a fine-tuning run's held-out points joined by dashed lines
    feed(range(1, 61), finetuning_step)
    assert cached.eval_point_count() == 6
    assert_same_pixels(cached, plain)
