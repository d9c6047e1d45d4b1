"""The Runs tab's plots: one per metric, every shown run in its colour on the same axes, its training curve smoothed
over its faint raw values and its held-out points as dots on the same axes; a hover line reading every run's value
at the mouse's x; a note under each plot naming what it could not draw.

What each item draws comes from `explorer.runs.workbench.overlay.SeriesView` (the x axis, log transforms,
smoothing, and the pixel-column min/max of a long curve); here are only pyqtgraph items, made once per (run, curve)
and fed with `setData`. A redraw is asked for by the state's events and done by a single-shot timer, for the plots
in view only: a plot scrolled out of view is drawn when it comes back. The axes follow the data until the user pans
or zooms a plot (double-click, or "View all", to follow again); the value axis spans the 5th to 95th percentile of
each curve's values (TensorBoard's "ignore outliers") unless that is switched off. On a log axis the items hold
log10 of their values and the axis (`RunsAxis`, a `LogValueAxis`) writes at its ticks the values they stand for
(1, 2, 5, 10, 20 …); no axis ever scales its numbers by an SI prefix ("x1e+09", or 0.001 drawn as 1).
"""

from __future__ import annotations

import html
import math
import time
from datetime import datetime

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, QTimer, Signal
from PySide6.QtWidgets import QGraphicsItem, QGridLayout, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from explorer.common._qt.exporting import export_button, export_png, export_svg
from explorer.common._qt.log_axis import LogValueAxis, NoSIPrefix
from explorer.common._qt.plot_style import add_legend, curve_pen, style_canvas, style_plot
from explorer.runs.workbench.overlay import RELATIVE, STEP, TOKENS, WALL, X_AXES, SeriesView
from explorer.runs.workbench.state import MetricPlot, WorkbenchState

PLOT_HEIGHT = 260
COLUMNS = 2
HOVER_ROWS = 12  # runs named in a hover readout; the rest are counted
LEGEND_UP_TO = 8  # runs a plot's legend names
KEPT_AS_PIXELS = QGraphicsItem.CacheMode.DeviceCoordinateCache  # axes: repainted from a picture while they hold


class RunsAxis(LogValueAxis):
    """A value or step axis of a Runs plot: plain numbers, never an SI scale, and on a log axis the values its ticks
    stand for (a horizontal one spaces its labelled ticks further apart: its labels are wider than they are tall)."""

    def __init__(self, orientation: str):
        super().__init__(orientation)
        if orientation in ("top", "bottom"):
            self.min_tick_gap_px = 48


class DurationAxis(RunsAxis):
    """Seconds since a run began, as h:mm:ss (on a log axis too)."""

    def tickStrings(self, values, scale, spacing):
        if self.logMode:
            return self.logTickStrings(values, scale, spacing)
        return [_duration(value * scale, spacing) for value in values]

    def logTickStrings(self, values, scale, spacing):
        return [_duration(10.0 ** float(value) * scale, 0.5) for value in values]


def _duration(seconds: float, spacing: float) -> str:
    sign = "-" if seconds < 0 else ""
    hours, rest = divmod(abs(seconds), 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{sign}{int(hours)}:{int(minutes):02d}:{seconds:02.0f}"
    return f"{sign}{int(minutes)}:{seconds:04.1f}" if spacing < 1 else f"{sign}{int(minutes)}:{seconds:02.0f}"


class WallAxis(NoSIPrefix, pg.DateAxisItem):
    """Wall time as dates and times (never log: the state refuses log x on it)."""

    def __init__(self, orientation: str):
        super().__init__(orientation)
        self.enableAutoSIPrefix(False)


def _bottom_axis(axis: str) -> pg.AxisItem:
    return WallAxis("bottom") if axis == WALL else DurationAxis("bottom") if axis == RELATIVE else RunsAxis("bottom")


class MetricPlotView(QWidget):
    """One metric's plot, its hover readout and its note."""

    def __init__(self, group: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.group = group
        self.setObjectName(f"metricPlot_{group}")
        self.canvas = pg.PlotWidget(axisItems={"left": RunsAxis("left"), "bottom": RunsAxis("bottom")})
        self.canvas.setObjectName("metricCanvas")
        style_canvas(self.canvas)
        self.plot = self.canvas.getPlotItem()
        style_plot(self.plot, y_label=group, mouse=True, menu=False)
        self.plot.setTitle(None)
        self.plot.setClipToView(False)
        self.axis_key: tuple | None = None
        self.items: dict[tuple[int, str], tuple] = {}  # (run id, curve) -> (view, raw item, smooth item or None)
        self.drawn: dict[tuple[int, str], tuple] = {}
        self.following = True
        self.dirty = True
        self.x_shown: tuple | None = None  # the ranges set while following (set again only when they change)
        self.y_shown: tuple | None = None
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setCacheMode(KEPT_AS_PIXELS)
        self.plot.getViewBox().sigRangeChangedManually.connect(self._user_moved)
        self.plot.getViewBox().sigXRangeChanged.connect(self._x_moved)
        self.hover_line = pg.InfiniteLine(angle=90, movable=False, pen=curve_pen("#888888", dotted=True))
        self.hover_line.setVisible(False)
        self.plot.addItem(self.hover_line, ignoreBounds=True)
        self.readout = QLabel("")
        self.readout.setVisible(False)
        self.readout.setObjectName("hoverReadout")
        self.readout.setTextFormat(Qt.TextFormat.RichText)
        self.readout.setWordWrap(True)
        self.note = QLabel("")
        self.note.setVisible(False)
        self.note.setObjectName("plotNote")
        self.note.setStyleSheet("color: #8a5a00")
        self.note.setWordWrap(True)
        self.export = export_button(self, "plotExportButton", [
            ("Plot as PNG…", f"{_file_name(group)}.png", lambda path: export_png(self.canvas, path)),
            ("Plot as SVG…", f"{_file_name(group)}.svg", lambda path: export_svg(self.canvas, path, title=group)),
        ])
        self.title = QLabel(f"<b>{html.escape(group)}</b>")
        self.title.setObjectName("plotTitle")
        header = QHBoxLayout()
        header.setContentsMargins(4, 0, 0, 0)
        header.addWidget(self.title, 1)
        header.addWidget(self.export)
        self.legend = add_legend(self.plot, (-8, 4))
        self.legend.setBrush(pg.mkBrush(255, 255, 255))  # opaque: a translucent box blended at every repaint
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(1)
        layout.addLayout(header)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.readout)
        layout.addWidget(self.note)
        self.canvas.setMinimumHeight(PLOT_HEIGHT)
        self.canvas.scene().sigMouseMoved.connect(self._mouse_moved)
        self.canvas.viewport().installEventFilter(self)
        self.redraws = 0
        self._hover_x: float | None = None
        self._moved_by_code = False
        self.on_x_moved = None  # set by MetricPlots: the plot's x range changed (pan, zoom): redraw its detail

    def eventFilter(self, watched, event) -> bool:
        if event.type() == event.Type.Leave:
            self.hover_line.setVisible(False)
            self._hover_x = None
            self.readout.setText("")
            self.readout.setVisible(False)
        elif event.type() == event.Type.MouseButtonDblClick:
            self.following = True
            self.x_shown = self.y_shown = None
            self.dirty = True
            if self.on_x_moved is not None:
                self.on_x_moved(self)
        return False

    def _user_moved(self, *_args) -> None:
        self.following = False

    def _x_moved(self, *_args) -> None:
        if not self._moved_by_code and self.on_x_moved is not None:
            self.dirty = True
            self.on_x_moved(self)

    # ---- items
    def item_for(self, state: WorkbenchState, run, name: str, held_out: bool) -> tuple:
        key = (run.run_id, name)
        found = self.items.get(key)
        if found is None:
            view = SeriesView(run.curves[name].source, run.context, held_out)
            colour = pg.mkColor(run.colour)
            if held_out:
                raw = pg.PlotDataItem(pen=curve_pen(colour, width=1.0, dashed=True), symbol="o", symbolSize=6,
                                      symbolBrush=colour, symbolPen="k")
                smooth = None
            else:
                # Faint as a lighter colour, not a translucent one: blending every segment doubled a repaint's cost,
                # and so did a pen wider than a pixel (benchmarks/runs_redraw.py, its live part).
                raw = pg.PlotCurveItem(pen=curve_pen(pg.mkColor(colour).lighter(170)), skipFiniteCheck=True)
                smooth = pg.PlotCurveItem(pen=curve_pen(colour), skipFiniteCheck=True)
            for item in (raw, smooth):
                if item is not None:
                    self.plot.addItem(item)
            found = self.items[key] = (view, raw, smooth, run)
        return found

    def keep_only(self, keys: set) -> None:
        for key in list(self.items):
            if key not in keys:
                _view, raw, smooth, _ = self.items.pop(key)
                self.drawn.pop(key, None)
                for item in (raw, smooth):
                    if item is not None:
                        self.plot.removeItem(item)

    def name_runs(self, plot: MetricPlot) -> None:
        """A legend of the runs' names on a plot of a few runs (more are named by the list's colours and the
        hover)."""
        runs = []
        for entry, name, _held_out in plot.members:
            if entry.run_id not in [run.run_id for run, _ in runs]:
                runs.append((entry, self.items[(entry.run_id, name)]))
        wanted = [(entry.name, items[2] if items[2] is not None else items[1]) for entry, items in runs]
        wanted = wanted if len(wanted) <= LEGEND_UP_TO else []
        if wanted == getattr(self, "_legend_shown", None):
            return
        self._legend_shown = wanted
        self.legend.clear()
        for name, item in wanted:
            self.legend.addItem(item, name)

    def set_axes(self, axis: str, log_x: bool, log_y: bool) -> None:
        key = (axis, log_x, log_y)
        if key == self.axis_key:
            return
        if self.axis_key is None or key[0] != self.axis_key[0]:
            self.plot.setAxisItems({"bottom": _bottom_axis(axis)})
            self.plot.getAxis("bottom").setCacheMode(KEPT_AS_PIXELS)
        self.axis_key = key
        style_plot(self.plot, x_label=X_AXES[axis] + (" (log)" if log_x else ""),
                   y_label=self.group + (" (log)" if log_y else ""), mouse=True, menu=False)
        self.plot.getAxis("bottom").setLogMode(log_x)
        self.plot.getAxis("left").setLogMode(log_y)
        self.following = True
        self.x_shown = self.y_shown = None

    # ---- hover
    def _mouse_moved(self, position: QPointF) -> None:
        view = self.plot.getViewBox()
        if not self.plot.sceneBoundingRect().contains(position):
            return
        x = view.mapSceneToView(position).x()
        self._hover_x = x
        self.hover_line.setPos(x)
        self.hover_line.setVisible(True)
        text = self.readout_text(x)
        self.readout.setText(text)
        self.readout.setVisible(bool(text))

    def readout_text(self, x: float) -> str:
        """Every shown run's value at drawn x: "step 1,200 · lr-3e-4 2.314 (smoothed 2.401) · …"."""
        rows = []
        for (_run_id, name), (view, _raw, _smooth, run) in self.items.items():
            found = view.value_at(x)
            if found is None:
                continue
            step, value, smoothed = found
            text = f"{value:.5g}" + (f" (smoothed {smoothed:.5g})" if smoothed is not None else "")
            label = f"{run.name} {name}" if view.held_out or name != self.group else run.name
            rows.append((run.colour, f"<b style='color:{run.colour}'>■</b> {html.escape(label)}: {text} "
                                     f"<span style='color:#777'>@ step {step:,}</span>"))
        if not rows:
            return ""
        shown = rows[:HOVER_ROWS]
        more = f" · and {len(rows) - HOVER_ROWS} more" if len(rows) > HOVER_ROWS else ""
        axis = self.axis_key[0] if self.axis_key else STEP
        where = _x_words(x, axis, self.axis_key[1] if self.axis_key else False)
        return f"<span style='color:#555'>{where}</span> · " + " · ".join(text for _, text in shown) + more


def _steady(low: float, high: float) -> tuple[float, float]:
    """[low, high] widened to a grid of a twentieth of its order of magnitude (a flat range: one step around it)."""
    span = high - low
    if not (math.isfinite(low) and math.isfinite(high)):
        return (0.0, 1.0)
    if span <= 0:
        span = abs(high) * 0.1 or 1.0
        low, high = low - span / 2, high + span / 2
    step = 10.0 ** math.floor(math.log10(span)) / 20
    return math.floor(low / step) * step, math.ceil(high / step) * step


def _x_words(x: float, axis: str, log_x: bool) -> str:
    value = 10.0**x if log_x else x
    if axis == WALL:
        return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
    if axis == RELATIVE:
        return f"{value / 60:,.1f} min"
    if axis == TOKENS:
        return f"{value:,.0f} tokens"
    return f"step {value:,.0f}"


def _file_name(group: str) -> str:
    return "".join(character if character.isalnum() or character in "-_." else "_" for character in group) or "plot"


class MetricPlots(QWidget):
    """Every metric plot of the shown runs, in a scrolled grid; see the module docstring."""

    redrawn = Signal()

    def __init__(self, state: WorkbenchState, parent: QWidget | None = None, *, max_fps: float = 10.0):
        super().__init__(parent)
        self.setObjectName("metricPlots")
        self.state = state
        self.plots: dict[str, MetricPlotView] = {}
        self.order: list[str] = []
        self.redraw_count = 0
        self.last_redraw_s = 0.0
        self.scroll = QScrollArea()
        self.scroll.setObjectName("metricPlotsScroll")
        self.scroll.setWidgetResizable(True)
        self.inner = QWidget()
        self.grid = QGridLayout(self.inner)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.scroll.setWidget(self.inner)
        self.empty = QLabel("Tick runs on the left to draw them here.")
        self.empty.setObjectName("plotsEmptyLabel")
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)  # its text changes (what the filters leave out): never widen the window
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.empty)
        layout.addWidget(self.scroll, 1)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(max(1, round(1000 / max_fps)))
        self._timer.timeout.connect(self.redraw)
        self._layout_stale = True
        self.scroll.verticalScrollBar().valueChanged.connect(self.schedule)
        state.ticks_changed.connect(self._on_ticks)
        state.curves_changed.connect(self._on_curves)
        state.view_changed.connect(self._on_view)
        state.runs_changed.connect(self._on_layout_change)

    # ---- what the state said
    def _on_layout_change(self, *_args) -> None:
        self._layout_stale = True
        self.schedule()

    def _on_ticks(self) -> None:
        for plot in self.plots.values():
            plot.dirty = True
        self._on_layout_change()

    def _on_curves(self, run_ids: set) -> None:
        for plot in self.plots.values():
            if any(run_id in run_ids for run_id, _ in plot.items):
                plot.dirty = True
        self._layout_stale = True  # a new metric may have appeared
        self.schedule()

    def _on_view(self, what: str) -> None:
        for plot in self.plots.values():
            plot.dirty = True
        if what == "metrics":
            self._layout_stale = True
        self.schedule()

    def schedule(self, *_args) -> None:
        if not self._timer.isActive():
            self._timer.start()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        for plot in self.plots.values():
            plot.dirty = True
        self.schedule()

    # ---- drawing
    def _relayout(self) -> list[MetricPlot]:
        wanted = self.state.plots()
        names = [plot.group for plot in wanted]
        if names != self.order:
            for name in self.order:
                if name not in names:
                    widget = self.plots.pop(name)
                    self.grid.removeWidget(widget)
                    widget.deleteLater()
            for index, name in enumerate(names):
                widget = self.plots.get(name)
                if widget is None:
                    widget = self.plots[name] = MetricPlotView(name)
                    widget.on_x_moved = self._plot_moved
                self.grid.addWidget(widget, index // COLUMNS, index % COLUMNS)
            self.order = names
        for plot in wanted:
            self.plots[plot.group].keep_only({(entry.run_id, name) for entry, name, _ in plot.members})
        self.empty.setVisible(not wanted)
        self.scroll.setVisible(bool(wanted))
        self._layout_stale = False
        return wanted

    def _plot_moved(self, plot: MetricPlotView) -> None:
        self.schedule()

    def visible(self, plot: MetricPlotView) -> bool:
        if not plot.isVisible() or not self.isVisible():
            return False
        viewport = self.scroll.viewport()
        top_left = plot.mapTo(viewport, plot.rect().topLeft())
        return top_left.y() < viewport.height() and top_left.y() + plot.height() > 0

    def redraw(self) -> None:
        """Draw what changed in the plots in view (see the module docstring)."""
        began = time.perf_counter()
        wanted = self._relayout() if self._layout_stale else self.state.plots()
        mode, smoothing = self.state.mode, self.state.smoothing
        for plot in wanted:
            widget = self.plots[plot.group]
            if not widget.dirty or not self.visible(widget):
                continue
            self._draw(widget, plot, mode, smoothing)
        self.redraw_count += 1
        self.last_redraw_s = time.perf_counter() - began
        self.redrawn.emit()

    def draw_all(self) -> None:
        """Draw every plot now, seen or not (exports, tests)."""
        self._timer.stop()
        wanted = self._relayout()
        for plot in wanted:
            self._draw(self.plots[plot.group], plot, self.state.mode, self.state.smoothing)

    def _draw(self, widget: MetricPlotView, plot: MetricPlot, mode, smoothing: float) -> None:
        widget.set_axes(mode.axis, mode.log_x, mode.log_y)
        views = []
        for entry, name, held_out in plot.members:
            view, raw, smooth, _ = widget.item_for(self.state, entry, name, held_out)
            view.update(mode, smoothing)
            views.append((view, raw, smooth))
        x_range = self._x_range(widget, [view for view, _, _ in views])
        budget = max(200, round(widget.canvas.width()))
        x_min, x_max = x_range if x_range is not None else (-math.inf, math.inf)
        for (entry, name, _), (view, raw, smooth) in zip(plot.members, views, strict=True):
            key = (entry.run_id, name)
            shown = (view.version, x_min, x_max, budget, smooth is not None)
            if widget.drawn.get(key) == shown:
                continue
            widget.drawn[key] = shown
            if smooth is None:
                raw.setData(view.x, view.y)
            else:
                raw.setData(*view.display(x_min, x_max, budget, smoothed=False))
                smooth.setData(*view.display(x_min, x_max, budget, smoothed=True))
        if widget.following:
            self._follow(widget, [view for view, _, _ in views], x_range)
        note = self._note(plot, [view for view, _, _ in views], mode)
        widget.note.setText(note)
        widget.note.setVisible(bool(note))
        widget.name_runs(plot)
        widget.dirty = False
        widget.redraws += 1

    def _x_range(self, widget: MetricPlotView, views: list[SeriesView]) -> tuple[float, float] | None:
        if not widget.following:
            return tuple(widget.plot.getViewBox().viewRange()[0])
        extents = [extent for extent in (view.x_extent() for view in views) if extent is not None]
        if not extents:
            return None
        return min(low for low, _ in extents), max(high for _, high in extents)

    def _follow(self, widget: MetricPlotView, views: list[SeriesView], x_range) -> None:
        """Span what is drawn on a steady grid (`steady_range`): a live run's axes then change only when its data
        cross a grid line, and an axis that keeps its range is repainted from its cached picture."""
        ranges = [extent for extent in (view.y_extent(self.state.ignore_outliers) for view in views)
                  if extent is not None]
        widget._moved_by_code = True
        try:
            if x_range is not None:
                wanted = _steady(*x_range)
                if wanted != widget.x_shown:
                    widget.x_shown = wanted
                    widget.plot.setXRange(*wanted, padding=0.0)
            if ranges:
                low, high = min(r[0] for r in ranges), max(r[1] for r in ranges)
                span = high - low or abs(high) * 0.1 or 1.0
                wanted = _steady(low - 0.05 * span, high + 0.05 * span)
                if wanted != widget.y_shown:
                    widget.y_shown = wanted
                    widget.plot.setYRange(*wanted, padding=0.0)
        finally:
            widget._moved_by_code = False

    @staticmethod
    def _note(plot: MetricPlot, views: list[SeriesView], mode) -> str:
        no_x = sorted({entry.name for (entry, _, _), view in zip(plot.members, views, strict=True)
                       if view.no_x and len(view.x) == 0})
        non_positive = sum(view.non_positive for view in views)
        parts = []
        if no_x:
            parts.append(f"not on the {X_AXES[mode.axis]} axis (the run does not log it): " + ", ".join(no_x[:4])
                         + (f" and {len(no_x) - 4} more" if len(no_x) > 4 else ""))
        if non_positive:
            which = " and ".join(name for name, on in (("x", mode.log_x), ("y", mode.log_y)) if on)
            parts.append(f"{non_positive:,} point{'s' if non_positive != 1 else ''} at or below 0 not drawn on log "
                         f"{which}")
        return "; ".join(parts)

    # ---- for tests and the tab
    def plot_names(self) -> list[str]:
        return list(self.order)

    def item_data(self, group: str, run_id: int, name: str, smoothed: bool = False) -> tuple[np.ndarray, np.ndarray]:
        _view, raw, smooth, _ = self.plots[group].items[(run_id, name)]
        item = smooth if smoothed and smooth is not None else raw
        x, y = item.getData()
        return (np.zeros(0), np.zeros(0)) if x is None else (np.asarray(x), np.asarray(y))

    def shutdown(self) -> None:
        self._timer.stop()
