"""Live training curves: the loss, a metric plot and the learning rate, with held-out points.

What each plot holds follows a `explorer.runs.curve_layout.CurveLayout`: for pretraining the total / MLM / NSP loss
and MLM / NSP accuracy; for fine-tuning the task's loss and metrics (accuracy, macro_f1, entity_f1,
exact_match, f1, pearson, spearman) held out, joined. `set_layout` switches (a Train or a Fine-tune run, a
watched run folder of either kind). Records arrive as the engines yield them or as a metrics file is read back
(`bertcore.training.pretraining.StepStats` / `EvalStats`,
`bertcore.training.finetuning.TaskStepStats` / `TaskEvalStats`).

Plot items are created once per curve, empty, whenever the layout is (re)set, before a run's first step (made at
that step they held the GUI thread ~60 ms); a curve is named in the legend when its first value arrives, so the
legend names only what is there. They are fed with `setData`; new points land in growing numpy buffers
(`explorer.runs.curve_series`) and a single-shot timer redraws at most `max_fps` times a second however fast steps
arrive. Long runs stay smooth: curves are drawn only over the steps in view (clip to view), reduced with the "peak"
method (a min and a max per pixel column, so spikes stay visible) from an incrementally built `PeakPyramid` rather
than by pyqtgraph's own `setDownsampling(mode="peak")`, which recomputes over every point at every repaint
(measured at 100k steps: ~35 ms a frame with pyqtgraph's, see benchmarks/gui_lag_training.py --long).

Painting cost is what decides the GUI's lag during a run (measured: a repaint of the three plots took
~18 ms with a translucent grid and ~3 ms without, most of it replaying the axis pictures), so there is no
grid, the step axis spans the run's total steps from the start instead of growing with every step
(an axis whose range changes re-computes its ticks and text on each repaint), and while the view follows the
run the value axes are set from what is drawn on a steady grid rather than by pyqtgraph's auto-range. Each step
repaints the canvas: the axes and held-out marks, which seldom change, are kept as pixmaps (`KEPT_AS_PIXELS`, a
repaint's GUI time 5.0-6.3 -> 4.3-4.8 ms in benchmarks/gui_lag_training.py's run).

"Log loss" draws the loss plot on a logarithmic axis: every item on it (the training curves, smoothed and raw, and
the held-out points) is fed log10 of its values, and its axis (`LogValueAxis`) names the values its ticks stand for.
A value ≤ 0 has no logarithm: it is left out, and a note beside the box says how many. pyqtgraph's own Transforms
menu (log x / log y, FFT, …), and its Downsample, Average and Points entries, act only on the items that know them
and are hidden: its log y transformed the held-out points and not the curves, under an axis named "loss (x1e+09)".
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QGraphicsItem, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from explorer.common._qt.line_label import LineLabel
from explorer.common._qt.log_axis import LogValueAxis
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import SMALL_TEXT, add_legend, curve_pen, style_canvas, style_plot
from explorer.common._qt.scientific_axis import ScientificAxis
from explorer.common._qt.signal_blocker import blocked
from explorer.runs.curve_layout import (
    LOSS_PLOT,
    METRIC_PLOT,
    PRETRAINING,
    Curve,
    CurveLayout,
    is_held_out,
    record_values,
    summary_line,
)
from explorer.runs.curve_series import CurveSeries, steady_range

LEFT_AXIS_WIDTH = 72  # pixels, the label included
KEPT_AS_PIXELS = QGraphicsItem.CacheMode.DeviceCoordinateCache  # what seldom changes, for the frames that repaint it
KEY_ROW_HEIGHT = 15  # pixels: the row above a plot that holds its key, one line of 8 pt text
HIDDEN_MENUS = ("Transforms", "Downsample", "Average", "Points")  # pyqtgraph's, for items these plots do not hold


_NOTHING = object()


class LossPlots(QWidget):
    """Three linked plots (loss, a metric, learning rate) with a draggable step marker."""

    markerMoved = Signal(int)  # the user dragged the step marker to this step

    def __init__(self, parent: QWidget | None = None, *, max_fps: float = 30.0, smoothing: float = 0.6,
                 layout: CurveLayout = PRETRAINING):
        super().__init__(parent)
        self.setObjectName("lossPlots")
        self.layout_spec = layout
        self._smoothing = smoothing
        self._smoothing_on = True
        self._series: dict[str, CurveSeries] = {}
        self._eval_series: dict[str, CurveSeries] = {}
        self._last_step = -math.inf
        self._last_values: dict[str, float] = {}
        self._last_held_out: dict[str, float] = {}
        self._step_extent: int | None = None  # the step axis spans [0, this] while the user has not zoomed
        self._follow_steps = True
        self._showing_planned_steps = False  # the empty step axis spans a planned run, not the data
        self.redraw_count = 0
        self._drawn: dict[int, object] = {}  # id(curve item) -> what it shows (see _update_needed)
        self._value_ranges: dict[int, tuple[float, float]] = {}  # plot number -> the y range set while following
        self._log_loss = False  # the loss plot's items hold log10 of the values (LogValueAxis names them)
        self._not_positive: dict[str, tuple[int, int]] = {}  # loss-plot series key -> (its version, values <= 0)

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setObjectName("lossGraphics")
        style_canvas(self.graphics)
        self.loss_plot = self._make_plot("loss", row=0, left_axis=LogValueAxis("left"))
        self.accuracy_plot = self._make_plot(layout.metric_title, row=1)
        self.lr_plot = self._make_plot("learning rate", row=2, left_axis=ScientificAxis("left"))
        self.plots = (self.loss_plot, self.accuracy_plot, self.lr_plot)  # by curve_layout's plot numbers
        self.accuracy_plot.setXLink(self.loss_plot)
        self.lr_plot.setXLink(self.loss_plot)
        self.lr_plot.setLabel("bottom", "step")
        self.accuracy_plot.setYRange(0.0, 1.0)
        for plot in self.plots:
            # Plain step numbers: an SI prefix made an empty axis read "step (x0.001)".
            plot.getAxis("bottom").enableAutoSIPrefix(False)
            # One width for the value axes, wide enough for "1.0e-04": the linked step axes line up.
            plot.getAxis("left").setWidth(LEFT_AXIS_WIDTH)
            plot.getViewBox().sigRangeChangedManually.connect(self._user_moved_view)
            plot.autoBtn.clicked.connect(self._follow_again)  # the "A" button: follow the run again

        self._raw_items: dict[str, pg.PlotCurveItem] = {}
        self._smooth_items: dict[str, pg.PlotCurveItem] = {}
        self._eval_items: dict[str, pg.PlotDataItem] = {}
        self._make_train_items()

        self.markers = []
        for plot in self.plots:
            marker = pg.InfiniteLine(angle=90, movable=plot is self.loss_plot, pen=curve_pen("#d62728"))
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
        self.log_check = QCheckBox("Log loss")
        self.log_check.setObjectName("logScaleCheck")
        self.log_check.setToolTip("Draw the loss plot on a logarithmic axis: every curve and held-out point (a value "
                                  "≤ 0 has no logarithm and is left out)")
        self.log_check.toggled.connect(self.set_log_scale)
        self.log_note = plain_label(QLabel())
        self.log_note.setObjectName("logScaleNote")
        self.log_note.setStyleSheet("color: #7a4b00;")
        self.log_note.hide()
        # the newest step in words grows with the run ("step 12,345 · loss …"): in a LineLabel it never asks for the
        # room (a plain label's width was the plots' minimum, and the window's: it widened itself as a run went on);
        # right-aligned, so a line longer than its box keeps its newest numbers in view
        self.summary_line = LineLabel()
        self.summary_label = plain_label(self.summary_line.label)
        self.summary_label.setText("no steps yet")
        self.summary_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.summary_label.setObjectName("lossSummaryLabel")
        self.summary_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        controls = QHBoxLayout()
        controls.addWidget(self.smoothing_check)
        controls.addWidget(self.smoothing_spin)
        controls.addSpacing(12)
        controls.addWidget(self.log_check)
        controls.addWidget(self.log_note)
        controls.addWidget(self.summary_line, 1)
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
        # the menu stays: its Export and axis ranges are the only ones these plots have
        style_plot(plot, y_label=title, menu=True, auto_range_button=True)
        for name in HIDDEN_MENUS:
            plot.setContextMenuActionVisible(name, False)
        self._key_above(plot)
        plot.setClipToView(True)
        for name in ("left", "bottom"):
            plot.getAxis(name).setCacheMode(KEPT_AS_PIXELS)
        return plot

    def _user_moved_view(self, *_args) -> None:
        self._follow_steps = False  # the user zoomed or panned: leave their view alone

    def _follow_again(self, *_args) -> None:
        self._follow_steps = True
        self._value_ranges.clear()
        self._schedule()

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
    def _make_curve(plot: pg.PlotItem, pen) -> pg.PlotCurveItem:
        # CurveSeries holds finite values only, already reduced to the view by its PeakPyramid ("peak" method), so
        # the bare curve item does: PlotDataItem's own clipping and downsampling pipeline cost a fifth of a frame.
        item = pg.PlotCurveItem(pen=pen, skipFiniteCheck=True)
        plot.addItem(item)
        return item

    def _make_train_items(self) -> None:
        """The layout's training curves, empty and not yet in the legend (see the module docstring)."""
        for curve in self.layout_spec.train:
            plot = self.plots[curve.plot]
            if curve.smoothed:
                faint = curve_pen(pg.mkColor(curve.colour).lighter(160))
                self._raw_items[curve.key] = self._make_curve(plot, faint)
                self._smooth_items[curve.key] = self._make_curve(plot, curve_pen(curve.colour))
            else:
                self._raw_items[curve.key] = self._make_curve(plot, curve_pen(curve.colour))

    def _train_series(self, curve: Curve) -> CurveSeries:
        """The series of a training curve; its first value puts the curve in the legend."""
        series = self._series.get(curve.key)
        if series is None:
            series = self._series[curve.key] = CurveSeries(self._smoothing)
            named = self._smooth_items.get(curve.key, self._raw_items[curve.key])
            self.plots[curve.plot].legend.addItem(named, curve.name)
        return series

    def _held_out_series(self, curve: Curve) -> CurveSeries:
        series = self._eval_series.get(curve.key)
        if series is None:
            series = self._eval_series[curve.key] = CurveSeries(self._smoothing)
            pen = curve_pen(curve.colour, width=1.5, dashed=True) if curve.joined else None
            item = pg.PlotDataItem(pen=pen, name=curve.name, symbol=curve.symbol, symbolSize=7,
                                   symbolBrush=curve.colour, symbolPen="k")
            item.curve.setCacheMode(KEPT_AS_PIXELS)
            item.scatter.setCacheMode(KEPT_AS_PIXELS)
            self.plots[curve.plot].addItem(item)
            self._eval_items[curve.key] = item
        return series

    # ---- data in ----
    def set_layout(self, layout: CurveLayout) -> None:
        """Draw another kind of run's curves (pretraining or fine-tuning); clears what is drawn."""
        if layout is self.layout_spec:
            return
        self.layout_spec = layout
        self.accuracy_plot.setLabel("left", layout.metric_title)
        self.clear()

    @staticmethod
    def _key_above(plot: pg.PlotItem) -> None:
        """The plot's key on a row of its own above its curves, right-aligned: inside the plot it sat over them (a
        loss that settles near its start, an NSP accuracy that reaches 1, a finished run's last steps under "total
        MLM NSP"). The row is the plot's title row, one line of small text tall."""
        plot.setTitle(" ", size=SMALL_TEXT)
        plot.layout.setRowFixedHeight(0, KEY_ROW_HEIGHT)
        key = add_legend(plot, (0, 0), columns=3)
        key.setParentItem(plot)
        key.layout.setContentsMargins(0, 0, 0, 0)
        key.layout.setVerticalSpacing(0)
        key.anchor((1, 0), (1, 0), offset=(-10, 0))

    def clear(self) -> None:
        """Forget every point and every curve (a new run, another run folder)."""
        for items in (self._raw_items, self._smooth_items, self._eval_items):
            for item in items.values():
                for plot in self.plots:
                    if item in plot.items:
                        plot.removeItem(item)  # and its legend entry
            items.clear()
        self._series.clear()
        self._eval_series.clear()
        self._drawn.clear()
        self._value_ranges.clear()
        self._make_train_items()
        self._last_step = -math.inf
        self._last_values, self._last_held_out = {}, {}
        self._follow_steps = True
        self._showing_planned_steps = False
        self.accuracy_plot.setYRange(0.0, 1.0)
        self.set_step_extent(None)
        self.summary_label.setText("no steps yet")
        self.set_marker(None)
        self._redraw()

    def add_all(self, records) -> None:
        """Append step and evaluation records, in order."""
        for stats in records:
            self.add(stats)

    def add(self, stats) -> None:
        """A training step (and its held-out evaluation, if it ran one), or a held-out evaluation alone."""
        values = record_values(stats)
        if is_held_out(stats):
            for key, value in values.items():
                curve = self.layout_spec.held_out_curve(key)
                if curve is not None and math.isfinite(value):
                    self._held_out_series(curve).append(float(stats.step), value)
                    self._fit_metric_range(curve, value)
            self._last_held_out = values
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
        for curve in self.layout_spec.train:
            value = values.get(curve.key, math.nan)
            if math.isfinite(value):
                self._train_series(curve).append(float(step), value)
                self._fit_metric_range(curve, value)
        self._last_values = values
        if stats.eval is not None:
            self.add(stats.eval)
        else:
            self._schedule()

    def _fit_metric_range(self, curve: Curve, value: float) -> None:
        """The metric plot spans 0..1, or -1..1 once a correlation (pearson, spearman) goes negative."""
        if curve.plot == METRIC_PLOT and value < 0 and self.accuracy_plot.viewRange()[1][0] > -1:
            self.accuracy_plot.setYRange(-1.0, 1.0)

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
            raw, log = self._raw_items[key], self._is_logged(key)
            if key in self._smooth_items:
                self._show_curve(self._smooth_items[key], series, view, smoothed=self._smoothing_on, log=log)
                if self._smoothing_on:
                    self._show_curve(raw, series, view, smoothed=False, log=log)
                elif self._update_needed(raw, None):
                    raw.setData([], [])
            else:
                self._show_curve(raw, series, view, smoothed=False, log=log)
        for key, series in self._eval_series.items():
            item, log = self._eval_items[key], self._is_logged(key, held_out=True)
            if self._update_needed(item, (series.version, log)):
                item.setData(*_on_scale(series.x, series.y, log))
        self._show_log_note()
        if self._follow_steps:
            self._follow_values()
        if self._last_step > -math.inf:
            self.summary_label.setText(summary_line(self.layout_spec, int(self._last_step), self._last_values,
                                                    self._last_held_out))

    def _follow_values(self, only: int | None = None) -> None:
        """The loss and learning-rate plots span what they draw on a steady grid (`steady_range`), set only when
        that changes, instead of pyqtgraph's auto-range, which measured every item's bounds again at every frame
        (measured: a training frame's redraw and paint 5.3-5.7 -> 4.1-4.3 ms of CPU with the bare curve items).
        On the log scale what they draw are logs, so the grid is one of decades' fractions. `only`: that plot."""
        extents: dict[int, list[float]] = {}
        curves = [(curve, self._smooth_items.get(curve.key)) for curve in self.layout_spec.train]
        curves += [(curve, self._raw_items.get(curve.key)) for curve in self.layout_spec.train]
        curves += [(curve, self._eval_items.get(curve.key)) for curve in self.layout_spec.held_out]
        for curve, item in curves:
            if item is None or curve.plot == METRIC_PLOT or (only is not None and curve.plot != only):
                continue
            y = item.getData()[1]
            if y is not None and len(y):
                extents.setdefault(curve.plot, []).extend((float(np.min(y)), float(np.max(y))))
        for number, values in extents.items():
            wanted = steady_range(min(values), max(values))
            if self._value_ranges.get(number) != wanted:
                self._value_ranges[number] = wanted
                self.plots[number].setYRange(*wanted, padding=0.02)

    def _update_needed(self, item: pg.GraphicsObject, shown: object) -> bool:
        """False when `item` already shows `shown` (what its data depends on); else remember it, True.

        Held-out dots change every few hundred steps but rebuilt their scatter points on every redraw: with
        the curves of unchanged series, half of the redraw time and a third of the paint while training.
        """
        if self._drawn.get(id(item), _NOTHING) == shown:
            return False
        self._drawn[id(item)] = shown
        return True

    def _show_curve(self, item: pg.PlotCurveItem, series: CurveSeries, view: tuple, smoothed: bool,
                    log: bool = False) -> None:
        if self._update_needed(item, (series.version, view, smoothed, log)):
            x_min, x_max, budget = view
            item.setData(*_on_scale(*series.display(x_min, x_max, budget, smoothed=smoothed), log))

    # ---- the log scale ----
    def set_log_scale(self, on: bool) -> None:
        """Draw the loss plot's items (curves and held-out points) as log10 of their values, on a log axis."""
        on = bool(on)
        if on != self.log_check.isChecked():
            with blocked(self.log_check):
                self.log_check.setChecked(on)
        if on == self._log_loss:
            return
        self._log_loss = on
        self.loss_plot.getAxis("left").set_log(on)
        self.loss_plot.setLabel("left", "loss (log)" if on else "loss")
        self._value_ranges.pop(LOSS_PLOT, None)
        self._redraw()
        if not self._follow_steps:  # a zoomed value range means nothing on the other scale: fit what is drawn
            self._follow_values(only=LOSS_PLOT)

    @property
    def log_scale(self) -> bool:
        return self._log_loss

    def _is_logged(self, key: str, held_out: bool = False) -> bool:
        if not self._log_loss:
            return False
        curve = self.layout_spec.held_out_curve(key) if held_out else \
            next((curve for curve in self.layout_spec.train if curve.key == key), None)
        return curve is not None and curve.plot == LOSS_PLOT

    def _show_log_note(self) -> None:
        """How many of the loss plot's values the log scale cannot draw (≤ 0), counted once per series version."""
        left_out = 0
        if self._log_loss:
            for held_out, all_series in ((False, self._series), (True, self._eval_series)):
                for key, series in all_series.items():
                    if not self._is_logged(key, held_out):
                        continue
                    cache_key = f"{'held-out ' if held_out else ''}{key}"
                    version, count = self._not_positive.get(cache_key, (None, 0))
                    if version != series.version:
                        count = int(np.count_nonzero(series.y <= 0))
                        self._not_positive[cache_key] = (series.version, count)
                    left_out += count
        self.log_note.setVisible(left_out > 0)
        if left_out:
            self.log_note.setText(f"{left_out:,} value{'s' if left_out > 1 else ''} ≤ 0 not drawn (no logarithm)")

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
        for key in self._smooth_items:
            self._series[key].set_smoothing(smoothing)
        self._redraw()

    # ---- the step marker ----
    def set_marker(self, step: int | None) -> None:
        """Show the vertical step marker at `step` (None hides it)."""
        for marker in self.markers:
            marker.setVisible(step is not None)
            if step is not None:
                with blocked(marker):
                    marker.setValue(step)

    def _marker_dragged(self) -> None:
        step = round(self.markers[0].value())
        for marker in self.markers[1:]:
            marker.setValue(step)
        self.markerMoved.emit(step)

    # ---- for tests and the panel ----
    def point_count(self, key: str = "loss") -> int:
        """How many training points the `key` curve holds."""
        return self._series[key].size if key in self._series else 0

    def eval_point_count(self, key: str = "loss") -> int:
        return self._eval_series[key].size if key in self._eval_series else 0

    def series(self, key: str, held_out: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of a training curve (or of a held-out series), copies; empty when it has none."""
        series = (self._eval_series if held_out else self._series).get(key)
        if series is None:
            return np.zeros(0), np.zeros(0)
        return series.x.copy(), series.y.copy()

    def legend_names(self) -> list[str]:
        """The legend entries of the three plots, top to bottom (what a user reads the curves by)."""
        return [label.text for plot in self.plots for _, label in plot.legend.items]

    def last_step(self) -> int | None:
        return None if self._last_step == -math.inf else int(self._last_step)

    def flush(self) -> None:
        """Redraw now (tests; the end of a run)."""
        self._redraw_timer.stop()
        self._redraw()


def _on_scale(x: np.ndarray, y: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) as drawn: as they are, or on the log scale log10(y) where y > 0 (the rest has no logarithm)."""
    if not log:
        return x, y
    keep = y > 0
    return x[keep], np.log10(y[keep])
