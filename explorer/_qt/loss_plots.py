"""Live training curves: loss (total / MLM / NSP), accuracy (MLM / NSP), learning rate, held-out points.

Thin over the trainer's own records: `bertcore.trainer.StepStats` (with its step's `EvalStats`) and
`EvalStats`, as a run yields them or as `run_watch.stats_from_record` reads them from a metrics file.
Plot items are created once and fed with `setData`; new points land in growing numpy buffers and a
single-shot timer redraws at most `max_fps` times a second however fast steps arrive. Long runs stay
smooth: curves are drawn only over the steps in view (clip to view), reduced with the "peak" method (a min
and a max per pixel column, so spikes stay visible) from an incrementally built `PeakPyramid` rather than
by pyqtgraph's own `setDownsampling(mode="peak")`, which recomputes over every point at every repaint
(measured at 100k steps: ~35 ms a frame with pyqtgraph's, see benchmarks/gui_lag_training.py --long).

Painting cost is what decides the GUI's lag during a run (measured: a repaint of the three plots took
~18 ms with a translucent grid and ~3 ms without, most of it replaying the axis pictures), so there is no
grid, and the step axis spans the run's total steps from the start instead of growing with every step
(an axis whose range changes re-computes its ticks and text on each repaint).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from bertcore.trainer import EvalStats, StepStats

# (statistic, legend name, colour) for each plot's training curves.
LOSS_CURVES = (("loss", "total", "#1f77b4"), ("mlm_loss", "MLM", "#ff7f0e"), ("nsp_loss", "NSP", "#2ca02c"))
ACCURACY_CURVES = (("mlm_accuracy", "MLM", "#ff7f0e"), ("nsp_accuracy", "NSP", "#2ca02c"))
LR_CURVES = (("learning_rate", "learning rate", "#9467bd"),)
LEFT_AXIS_WIDTH = 72  # pixels, the label included
SMOOTHED = {"loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy"}


class PeakPyramid:
    """Min and max of y over blocks of 2, 4, 8, … points, extended incrementally as points arrive.

    What pyqtgraph's "peak" downsampling computes on every repaint (a min/max over all N points of every
    curve: ~10 ms per frame at 100k steps here) is kept instead: each redraw only folds in the new complete
    blocks, and a view then costs O(pixels), whatever the run's length. Spikes stay visible.
    """

    def __init__(self):
        self._mins: list[np.ndarray] = []  # level k: blocks of 2 ** (k + 1) points, amortised-doubling buffers
        self._maxs: list[np.ndarray] = []
        self._counts: list[int] = []  # complete blocks summarised at each level

    def reset(self) -> None:
        self._mins, self._maxs, self._counts = [], [], []

    @property
    def levels(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(mins, maxs) per level, as views of the summarised blocks."""
        return [(mins[:count], maxs[:count])
                for mins, maxs, count in zip(self._mins, self._maxs, self._counts, strict=True)]

    def update(self, y: np.ndarray) -> None:
        """Fold in the complete blocks of `y` (all points so far) that are not summarised yet."""
        below_min, below_max = y, y
        for level in range(64):
            complete = len(below_min) // 2
            if complete == 0:
                break
            if level == len(self._counts):
                self._mins.append(np.empty(max(16, complete)))
                self._maxs.append(np.empty(max(16, complete)))
                self._counts.append(0)
            done = self._counts[level]
            if complete > done:
                if complete > len(self._mins[level]):
                    self._mins[level] = np.resize(self._mins[level], 2 * complete)
                    self._maxs[level] = np.resize(self._maxs[level], 2 * complete)
                start, stop = 2 * done, 2 * complete
                new_mins, new_maxs = self._mins[level][done:complete], self._maxs[level][done:complete]
                np.minimum(below_min[start:stop:2], below_min[start + 1 : stop : 2], out=new_mins)
                np.maximum(below_max[start:stop:2], below_max[start + 1 : stop : 2], out=new_maxs)
                self._counts[level] = complete
            below_min, below_max = self._mins[level][:complete], self._maxs[level][:complete]

    def view(self, x: np.ndarray, y: np.ndarray, lo: int, hi: int, budget: int) -> tuple[np.ndarray, np.ndarray]:
        """Points to draw for indices [lo, hi): the raw points when they fit in `budget`, else two points
        (min, max) per block, with blocks as small as the budget allows."""
        count = hi - lo
        if count <= budget or not self._counts:
            return x[lo:hi], y[lo:hi]
        level = min(len(self._counts) - 1, max(0, math.ceil(math.log2(2 * count / budget)) - 1))
        block = 2 ** (level + 1)
        mins, maxs = self._mins[level][: self._counts[level]], self._maxs[level][: self._counts[level]]
        first, last = lo // block, min(len(mins), hi // block)
        starts = np.arange(first, last) * block
        xs = np.repeat(x[starts], 2)
        ys = np.empty(2 * (last - first))
        ys[0::2], ys[1::2] = mins[first:last], maxs[first:last]
        tail = last * block  # the points after the last complete block, as they are
        return np.concatenate([xs, x[tail:hi]]), np.concatenate([ys, y[tail:hi]])


class ScientificAxis(pg.AxisItem):
    """Tick values in scientific notation ("2.0e-05"), for learning rates: an SI prefix read "(x1e-06)"
    beside ticks of 20…100, true but a sum to do in one's head."""

    def __init__(self, orientation: str):
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values, scale, spacing):
        largest = max((abs(value) for value in values), default=0.0)
        # Enough digits that neighbouring ticks differ: 1.00e-03, 1.05e-03, … for a narrow range.
        digits = max(1, math.ceil(math.log10(largest / spacing))) if largest > 0 and spacing > 0 else 1
        return ["0" if value == 0 else f"{value * scale:.{digits}e}" for value in values]


_NOTHING = object()
_EDITS = itertools.count()  # every change of any series takes the next number: "unchanged since drawn" is cheap


class _Series:
    """x/y values in amortised-doubling numpy buffers, plus a debiased EMA of y (TensorBoard's smoothing),
    each with a PeakPyramid for drawing long runs. `version` changes whenever the values do."""

    def __init__(self, smoothing: float):
        self.version = next(_EDITS)
        self._x = np.empty(1024, dtype=np.float64)
        self._y = np.empty(1024, dtype=np.float64)
        self._ema = np.empty(1024, dtype=np.float64)
        self.size = 0
        self._smoothing = smoothing
        self._ema_raw = 0.0
        self._ema_count = 0
        self.raw_pyramid = PeakPyramid()
        self.smooth_pyramid = PeakPyramid()

    def append(self, x: float, y: float) -> None:
        if not (math.isfinite(x) and math.isfinite(y)):
            return  # a diverged step: the run's message says so; the curves stay drawable without checks
        if self.size == len(self._x):
            self._x = np.resize(self._x, 2 * self.size)
            self._y = np.resize(self._y, 2 * self.size)
            self._ema = np.resize(self._ema, 2 * self.size)
        self._x[self.size] = x
        self._y[self.size] = y
        self._ema[self.size] = self._next_ema(y)
        self.size += 1
        self.version = next(_EDITS)

    def _next_ema(self, y: float) -> float:
        self._ema_raw = self._smoothing * self._ema_raw + (1.0 - self._smoothing) * y
        self._ema_count += 1
        return self._ema_raw / (1.0 - self._smoothing**self._ema_count)  # debiased

    def set_smoothing(self, smoothing: float) -> None:
        self._smoothing = smoothing
        self._ema_raw, self._ema_count = 0.0, 0
        for index in range(self.size):
            self._ema[index] = self._next_ema(float(self._y[index]))
        self.smooth_pyramid.reset()
        self.version = next(_EDITS)

    def truncate_from(self, x: float) -> None:
        """Drop every point at or after `x`."""
        keep = int(np.searchsorted(self.x, x, side="left"))
        if keep < self.size:
            self.size = keep
            self.raw_pyramid.reset()
            self.set_smoothing(self._smoothing)

    @property
    def x(self) -> np.ndarray:
        return self._x[: self.size]

    @property
    def y(self) -> np.ndarray:
        return self._y[: self.size]

    @property
    def smoothed(self) -> np.ndarray:
        return self._ema[: self.size]

    def display(self, x_min: float, x_max: float, budget: int, smoothed: bool) -> tuple[np.ndarray, np.ndarray]:
        """What to draw for the steps in [x_min, x_max] (one point beyond each side, so lines reach the edge)."""
        x, y = self.x, (self.smoothed if smoothed else self.y)
        pyramid = self.smooth_pyramid if smoothed else self.raw_pyramid
        pyramid.update(y)
        lo = max(0, int(np.searchsorted(x, x_min, side="left")) - 1)
        hi = min(self.size, int(np.searchsorted(x, x_max, side="right")) + 1)
        return pyramid.view(x, y, lo, hi, budget)


class LossPlots(QWidget):
    """Three linked plots (loss, accuracy, learning rate) with a draggable step marker."""

    markerMoved = Signal(int)  # the user dragged the step marker to this step

    def __init__(self, parent: QWidget | None = None, *, max_fps: float = 30.0, smoothing: float = 0.6):
        super().__init__(parent)
        self.setObjectName("lossPlots")
        self._smoothing = smoothing
        self._smoothing_on = True
        self._series: dict[str, _Series] = {}
        self._eval_series: dict[str, _Series] = {}
        self._last_step = -math.inf
        self._summary = ""
        self._step_extent: int | None = None  # the step axis spans [0, this] while the user has not zoomed
        self._follow_steps = True
        self._showing_planned_steps = False  # the empty step axis spans a planned run, not the data
        self.redraw_count = 0
        self._drawn: dict[int, object] = {}  # id(curve item) -> what it shows (see _update_needed)

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setObjectName("lossGraphics")
        self.graphics.setBackground("w")
        self.loss_plot = self._make_plot("loss", row=0)
        self.accuracy_plot = self._make_plot("accuracy", row=1)
        self.lr_plot = self._make_plot("learning rate", row=2, left_axis=ScientificAxis("left"))
        self.accuracy_plot.setXLink(self.loss_plot)
        self.lr_plot.setXLink(self.loss_plot)
        self.lr_plot.setLabel("bottom", "step")
        self.accuracy_plot.setYRange(0.0, 1.0)
        for plot in (self.loss_plot, self.accuracy_plot, self.lr_plot):
            # Plain step numbers: an SI prefix made an empty axis read "step (x0.001)".
            plot.getAxis("bottom").enableAutoSIPrefix(False)
            # One width for the value axes, wide enough for "1.0e-04": the linked step axes line up.
            plot.getAxis("left").setWidth(LEFT_AXIS_WIDTH)
        for plot in (self.loss_plot, self.accuracy_plot, self.lr_plot):
            plot.getViewBox().sigRangeChangedManually.connect(self._user_moved_view)

        self._raw_items: dict[str, pg.PlotDataItem] = {}
        self._smooth_items: dict[str, pg.PlotDataItem] = {}
        self._eval_items: dict[str, pg.PlotDataItem] = {}
        for plot, curves in ((self.loss_plot, LOSS_CURVES), (self.accuracy_plot, ACCURACY_CURVES),
                             (self.lr_plot, LR_CURVES)):
            for key, name, colour in curves:
                self._series[key] = _Series(smoothing)
                smoothed = key in SMOOTHED
                raw_pen = pg.mkPen(pg.mkColor(colour).lighter(160) if smoothed else colour, width=1)
                self._raw_items[key] = self._make_curve(plot, raw_pen, None if smoothed else name)
                if smoothed:
                    self._smooth_items[key] = self._make_curve(plot, pg.mkPen(colour, width=1), name)
                    self._eval_series[key] = _Series(smoothing)
                    # Held-out points carry no legend entry; the summary line explains the dots.
                    item = pg.PlotDataItem(pen=None, symbol="o", symbolSize=7, symbolBrush=colour, symbolPen="k")
                    plot.addItem(item)
                    self._eval_items[key] = item

        self.markers = []
        for plot in (self.loss_plot, self.accuracy_plot, self.lr_plot):
            marker = pg.InfiniteLine(angle=90, movable=plot is self.loss_plot, pen=pg.mkPen("#d62728", width=1))
            marker.setVisible(False)
            plot.addItem(marker, ignoreBounds=True)
            self.markers.append(marker)
        self.markers[0].sigDragged.connect(self._marker_dragged)
        self.loss_plot.sigXRangeChanged.connect(self._schedule)  # zoom / pan: redraw at the new detail

        self.smoothing_check = QCheckBox("Smooth")
        self.smoothing_check.setObjectName("smoothingCheck")
        self.smoothing_check.setChecked(True)
        self.smoothing_check.setToolTip("Draw each training curve smoothed (an exponential moving average, as "
                                        "TensorBoard does) over its raw values, drawn faint")
        self.smoothing_check.toggled.connect(self.set_smoothing_enabled)
        self.smoothing_spin = QDoubleSpinBox()
        self.smoothing_spin.setObjectName("smoothingSpin")
        self.smoothing_spin.setRange(0.0, 0.999)
        self.smoothing_spin.setSingleStep(0.05)
        self.smoothing_spin.setDecimals(3)
        self.smoothing_spin.setValue(smoothing)
        self.smoothing_spin.setToolTip("How much each smoothed point keeps of the one before (0 = no smoothing, "
                                       "0.99 = very smooth)")
        self.smoothing_spin.editingFinished.connect(lambda: self.set_smoothing(self.smoothing_spin.value()))
        self.summary_label = QLabel("no steps yet")
        self.summary_label.setObjectName("lossSummaryLabel")
        self.summary_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        controls = QHBoxLayout()
        controls.addWidget(self.smoothing_check)
        controls.addWidget(self.smoothing_spin)
        controls.addStretch(1)
        controls.addWidget(self.summary_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(controls)
        layout.addWidget(self.graphics, 1)

        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(max(1, round(1000.0 / max_fps)))
        self._redraw_timer.timeout.connect(self._redraw)

    def _make_plot(self, title: str, row: int, left_axis: pg.AxisItem | None = None) -> pg.PlotItem:
        plot = self.graphics.addPlot(row=row, col=0, axisItems={"left": left_axis} if left_axis else None)
        plot.setLabel("left", title)
        plot.addLegend(offset=(-10, 2), labelTextSize="8pt", colCount=3)
        plot.setClipToView(True)
        plot.setMenuEnabled(True)
        return plot

    def _user_moved_view(self, *_args) -> None:
        self._follow_steps = False  # the user zoomed or panned: leave their view alone

    def set_step_extent(self, total_steps: int | None) -> None:
        """Make the step axis span [0, total_steps] (None: follow the data)."""
        self._step_extent = total_steps
        if total_steps is None:
            self.loss_plot.enableAutoRange(x=True)
        elif self._follow_steps:
            self.loss_plot.setXRange(0, max(1, total_steps), padding=0.01)

    def show_planned_steps(self, total_steps: int | None) -> None:
        """Before the first step: let the empty step axis span [0, total_steps] (a run about to start, or the
        form's step count) rather than an arbitrary 0..1. No effect once steps have arrived, or after a zoom."""
        if self._last_step != -math.inf or not self._follow_steps or not total_steps:
            return
        self._showing_planned_steps = True
        self.loss_plot.setXRange(0, max(1, total_steps), padding=0.01)

    @staticmethod
    def _make_curve(plot: pg.PlotItem, pen, name: str | None) -> pg.PlotDataItem:
        # _Series holds finite values only, already reduced to the view by its PeakPyramid (the "peak" method).
        item = pg.PlotDataItem(pen=pen, name=name, skipFiniteCheck=True)
        item.setClipToView(True)
        plot.addItem(item)
        return item

    # ---- data in ----
    def clear(self) -> None:
        for store in (self._series, self._eval_series):
            for key in store:
                store[key] = _Series(self._smoothing)
        self._last_step = -math.inf
        self._follow_steps = True
        self._showing_planned_steps = False
        self.set_step_extent(None)
        self.summary_label.setText("no steps yet")
        self.set_marker(None)
        self._redraw()

    def add_all(self, records) -> None:
        """Append `StepStats` and `EvalStats`, in order."""
        for stats in records:
            self.add(stats)

    def add(self, stats: StepStats | EvalStats) -> None:
        """A training step (and its held-out evaluation, if it ran one), or a held-out evaluation alone."""
        if isinstance(stats, EvalStats):
            for key, series in self._eval_series.items():
                series.append(float(stats.step), float(getattr(stats, key)))
            self._schedule()
            return
        step = stats.step
        if step <= self._last_step:
            # A resumed run replays the steps after its last checkpoint: the new values replace them.
            for series in self._series.values():
                series.truncate_from(float(step))
        self._last_step = step
        total = stats.total_steps or None  # 0: a metrics file that does not say
        if self._showing_planned_steps:
            self._showing_planned_steps = False
            if total is None and self._follow_steps:
                self.set_step_extent(self._step_extent)  # the plan was a placeholder: follow the data again
        if total is not None and total != self._step_extent and self._follow_steps:
            self.set_step_extent(total)
        for key, series in self._series.items():
            series.append(float(step), float(getattr(stats, key)))
        self._summarise(stats)
        if stats.eval is not None:
            self.add(stats.eval)
        else:
            self._schedule()

    def _summarise(self, stats: StepStats) -> None:
        parts = ["dots = held-out", f"step {stats.step:,}"]
        for key, label in (("loss", "loss"), ("mlm_accuracy", "MLM acc"), ("nsp_accuracy", "NSP acc")):
            value = getattr(stats, key)
            if math.isfinite(value):
                parts.append(f"{label} {value:.3f}")
        self._summary = "  ·  ".join(parts)

    def _schedule(self, *_args) -> None:
        if not self._redraw_timer.isActive():
            self._redraw_timer.start()

    def _visible_steps(self) -> tuple[float, float, int]:
        """(first, last step in view, points the plot can show), the whole run when the axis follows the data."""
        view = self.loss_plot.getViewBox()
        budget = max(200, round(view.width()))  # about one min/max pair per pixel column
        if view.autoRangeEnabled()[0]:
            return -math.inf, math.inf, budget
        x_min, x_max = view.viewRange()[0]
        return x_min, x_max, budget

    def _redraw(self) -> None:
        self.redraw_count += 1
        view = self._visible_steps()
        for key, series in self._series.items():
            raw = self._raw_items[key]
            if key in self._smooth_items:
                self._show_curve(self._smooth_items[key], series, view, smoothed=self._smoothing_on)
                if self._smoothing_on:
                    self._show_curve(raw, series, view, smoothed=False)
                elif self._update_needed(raw, None):
                    raw.setData([], [])
            else:
                self._show_curve(raw, series, view, smoothed=False)
        for key, series in self._eval_series.items():
            item = self._eval_items[key]
            if self._update_needed(item, series.version):
                item.setData(series.x, series.y)
        if self._last_step > -math.inf:
            self.summary_label.setText(self._summary)

    def _update_needed(self, item: pg.PlotDataItem, shown: object) -> bool:
        """False when `item` already shows `shown` (what its data depends on); else remember it, True.

        Held-out dots change every few hundred steps but rebuilt their scatter points on every redraw: with
        the curves of unchanged series, half of the redraw time and a third of the paint while training.
        """
        if self._drawn.get(id(item), _NOTHING) == shown:
            return False
        self._drawn[id(item)] = shown
        return True

    def _show_curve(self, item: pg.PlotDataItem, series: _Series, view: tuple, smoothed: bool) -> None:
        if self._update_needed(item, (series.version, view, smoothed)):
            x_min, x_max, budget = view
            item.setData(*series.display(x_min, x_max, budget, smoothed=smoothed))

    # ---- smoothing ----
    def set_smoothing_enabled(self, enabled: bool) -> None:
        self._smoothing_on = bool(enabled)
        self.smoothing_spin.setEnabled(self._smoothing_on)
        self._redraw()

    def set_smoothing(self, smoothing: float) -> None:
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing is {smoothing}; use a weight in [0, 1) (0 turns smoothing off)")
        if smoothing == self._smoothing:
            return
        self._smoothing = smoothing
        for key in SMOOTHED:
            self._series[key].set_smoothing(smoothing)
        self._redraw()

    # ---- the step marker ----
    def set_marker(self, step: int | None) -> None:
        """Show the vertical step marker at `step` (None hides it)."""
        for marker in self.markers:
            marker.setVisible(step is not None)
            if step is not None:
                marker.blockSignals(True)
                marker.setValue(step)
                marker.blockSignals(False)

    def _marker_dragged(self) -> None:
        step = round(self.markers[0].value())
        for marker in self.markers[1:]:
            marker.setValue(step)
        self.markerMoved.emit(step)

    # ---- for tests and the panel ----
    def point_count(self, key: str = "loss") -> int:
        """How many training points the `key` curve holds."""
        return self._series[key].size

    def eval_point_count(self, key: str = "loss") -> int:
        return self._eval_series[key].size

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of a training curve, copies."""
        return self._series[key].x.copy(), self._series[key].y.copy()

    def last_step(self) -> int | None:
        return None if self._last_step == -math.inf else int(self._last_step)

    def flush(self) -> None:
        """Redraw now (tests; the end of a run)."""
        self._redraw_timer.stop()
        self._redraw()
