"""The Runs tab's plots: one per metric, every shown run in its colour on the same axes, its training curve smoothed
over its faint raw values and its held-out points as dots on the same axes; a key of the runs' colours under each
plot (never over its curves); a hover line and, beside the mouse, a small table of every run's value at its x; a
note under each plot naming what it could not draw.

What each item draws comes from `explorer.runs.workbench.overlay.SeriesView` (the x axis, log transforms,
smoothing, and the pixel-column min/max of a long curve); here are only pyqtgraph items, made once per (run, curve)
and fed with `setData`. The axes follow the data until the user pans or zooms a plot (double-click to follow
again); the value axis spans the 5th to 95th percentile of each curve's values (TensorBoard's "ignore outliers")
unless that is switched off. On a log axis the items hold log10 of their values and the axis (`RunsAxis`, a
`LogValueAxis`) writes at its ticks the values they stand for (1, 2, 5, 10, 20 …); no axis ever scales its numbers
by an SI prefix ("x1e+09", or 0.001 drawn as 1).

When it redraws: the state's events mark the plots they concern and start a single-shot timer (at most `max_fps`
passes a second: ten live runs growing make one pass per follower round, not one per run). A pass draws the plots
in view that were marked (a plot scrolled out of view is drawn when it comes back), in slices of at most
`SLICE_S` of the GUI thread, the rest in the next turns of the event loop, so a key press or a paint never waits
for a whole pass (smoothing 50 runs of 100,000 points again takes a few hundred milliseconds). A plot's canvas is
repainted once its items are all updated, not between slices. An event arriving meanwhile ends the pass and starts
the next (what it had drawn stays drawn).
"""

from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, Qt, QTimer, Signal
from PySide6.QtWidgets import QGraphicsItem, QGridLayout, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from explorer.common._qt.exporting import CopyPicture, export_button, export_png, export_svg, render_picture
from explorer.common._qt.log_axis import LogValueAxis, NoSIPrefix
from explorer.common._qt.plot_style import curve_pen, style_canvas, style_plot
from explorer.runs.workbench.overlay import RELATIVE, STEP, TOKENS, WALL, X_AXES, SeriesView
from explorer.runs.workbench.state import GrowingCurve, MetricPlot, RunEntry, WorkbenchState

PLOT_HEIGHT = 230
COLUMNS = 2
HOVER_ROWS = 12  # runs named in a hover readout; the rest are counted
KEY_UP_TO = 12  # runs a plot's colour key names (more: the run list's colours name them)
SLICE_S = 0.004  # the longest stretch of GUI thread a redraw pass takes before letting the event loop run
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


@dataclass
class PlotItemSet:
    """What one (run, curve) draws on a plot: its SeriesView over the curve it was made for (a run that starts
    again has new curves, and gets new items), the raw item and, for a training curve, the smoothed one."""

    run: RunEntry
    curve: GrowingCurve
    view: SeriesView
    raw: pg.GraphicsObject
    smooth: pg.PlotCurveItem | None


class HoverReadout(QLabel):
    """A small table beside the mouse, over the canvas (never in the layout: showing it moves nothing), that lets
    the mouse through."""

    OFFSET = 14  # px from the mouse

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self.setObjectName("hoverReadout")
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setStyleSheet("QLabel#hoverReadout { background: rgba(255, 255, 255, 235); border: 1px solid #b0b0b0;"
                           " padding: 3px; font-size: 8pt; color: #111; }")
        self.hide()

    def show_at(self, text: str, mouse: QPoint) -> None:
        if not text:
            self.hide()
            return
        self.setText(text)
        self.adjustSize()
        room = self.parentWidget().rect()
        x = mouse.x() + self.OFFSET
        if x + self.width() > room.right():
            x = mouse.x() - self.OFFSET - self.width()  # left of the mouse, near the right edge
        y = min(max(0, mouse.y() + self.OFFSET), max(0, room.bottom() - self.height()))
        self.move(max(0, x), y)
        self.show()
        self.raise_()


class MetricPlotView(QWidget):
    """One metric's plot, its colour key, its hover readout and its note."""

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
        self.items: dict[tuple[int, str], PlotItemSet] = {}  # (run id, curve name) -> its items
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
        self.readout = HoverReadout(self.canvas)
        self.key = QLabel("")  # the runs' colours, under the plot
        self.key.setObjectName("plotKey")
        self.key.setTextFormat(Qt.TextFormat.RichText)
        self.key.setWordWrap(True)
        self.key.setStyleSheet("QLabel#plotKey { background: white; padding: 0 4px 2px 4px; font-size: 8pt; }")
        self.key.setVisible(False)
        self.note = QLabel("")
        self.note.setVisible(False)
        self.note.setObjectName("plotNote")
        self.note.setStyleSheet("color: #8a5a00; font-size: 8pt")
        self.note.setWordWrap(True)
        self.export = export_button(self, "plotExportButton", [
            ("Copy picture", "", CopyPicture(lambda: render_picture(self.picture_parts()))),
            ("Plot as PNG…", f"{_file_name(group)}.png", lambda path: export_png(self.picture_parts(), path)),
            ("Plot as SVG…", f"{_file_name(group)}.svg",
             lambda path: export_svg(self.picture_parts(), path, title=group)),
        ])
        self.title = QLabel(f"<b>{html.escape(group)}</b>")
        self.title.setObjectName("plotTitle")
        header = QHBoxLayout()
        header.setContentsMargins(4, 0, 0, 0)
        header.addWidget(self.title, 1)
        header.addWidget(self.export)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(0)
        layout.addLayout(header)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.key)
        layout.addWidget(self.note)
        self.canvas.setMinimumHeight(PLOT_HEIGHT)
        self.canvas.scene().sigMouseMoved.connect(self._mouse_moved)
        self.canvas.viewport().installEventFilter(self)
        self.redraws = 0
        self._hover_x: float | None = None
        self._key_shown: tuple | None = None
        self._moved_by_code = False
        self.on_x_moved = None  # set by MetricPlots: the plot's x range changed (pan, zoom): redraw its detail

    def picture_parts(self) -> list[QWidget]:
        """What a picture of the plot holds: the canvas and, under it, the runs' colours."""
        return [self.canvas, self.key] if self.key.isVisible() else [self.canvas]

    def eventFilter(self, watched, event) -> bool:
        if event.type() == event.Type.Leave:
            self.hide_hover()
        elif event.type() == event.Type.MouseButtonDblClick:
            self.following = True
            self.x_shown = self.y_shown = None
            self.dirty = True
            if self.on_x_moved is not None:
                self.on_x_moved(self)
        return False

    def hide_hover(self) -> None:
        self.hover_line.setVisible(False)
        self._hover_x = None
        self.readout.hide()

    def _user_moved(self, *_args) -> None:
        self.following = False

    def _x_moved(self, *_args) -> None:
        if not self._moved_by_code and self.on_x_moved is not None:
            self.dirty = True
            self.on_x_moved(self)

    # ---- items
    def item_for(self, run: RunEntry, name: str, held_out: bool) -> PlotItemSet:
        key = (run.run_id, name)
        curve = run.curves[name]
        found = self.items.get(key)
        if found is not None and found.curve is not curve:  # the run started again: its curves are new
            self._remove(key)
            found = None
        if found is None:
            view = SeriesView(curve.source, run.context, held_out)
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
            found = self.items[key] = PlotItemSet(run, curve, view, raw, smooth)
        return found

    def _remove(self, key: tuple[int, str]) -> None:
        items = self.items.pop(key)
        self.drawn.pop(key, None)
        for item in (items.raw, items.smooth):
            if item is not None:
                self.plot.removeItem(item)

    def keep_only(self, keys: set) -> None:
        for key in list(self.items):
            if key not in keys:
                self._remove(key)

    def name_runs(self, plot: MetricPlot) -> None:
        """The colour key under the plot: each run's line in its colour and its name, a dot for held-out points
        when there are some; past KEY_UP_TO runs, the run list's colours name them."""
        runs: dict[int, RunEntry] = {}
        held_out = False
        for entry, _name, is_held_out in plot.members:
            runs.setdefault(entry.run_id, entry)
            held_out |= is_held_out
        wanted = (tuple((entry.name, entry.colour) for entry in runs.values()), held_out)
        if wanted == self._key_shown:
            return
        self._key_shown = wanted
        if len(runs) > KEY_UP_TO:
            text = (f"<span style='color:#555'>{len(runs)} runs, in the colours of the run list"
                    + (" · ● held-out" if held_out else "") + "</span>")
        else:
            text = " &nbsp; ".join(f"<span style='white-space:nowrap'><b style='color:{colour}'>━━</b>&nbsp;"
                                   f"{html.escape(name)}</span>" for name, colour in wanted[0])
            if held_out:
                text += " &nbsp; <span style='color:#555; white-space:nowrap'>● held-out</span>"
        self.key.setText(text)
        self.key.setVisible(bool(runs))

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
        if not view.sceneBoundingRect().contains(position):
            self.hide_hover()
            return
        x = view.mapSceneToView(position).x()
        self._hover_x = x
        self.hover_line.setPos(x)
        self.hover_line.setVisible(True)
        self.readout.show_at(self.readout_text(x), self.canvas.mapFromScene(position))

    def readout_text(self, x: float) -> str:
        """Every shown run's value at drawn x, a row each: its colour, name, smoothed value, value and step, under a
        line saying where x is ("step 1,200"); the training curves first, then the held-out points, each the highest
        value first (as the lines lie on the plot)."""
        rows = []
        smoothed_any = False
        for (_run_id, name), items in self.items.items():
            found = items.view.value_at(x)
            if found is None:
                continue
            step, value, smoothed = found
            run = items.run
            label = f"{run.name} {name}" if items.view.held_out or name != self.group else run.name
            shown = smoothed if smoothed is not None else value
            smoothed_any |= smoothed is not None
            cells = [f"<b style='color:{run.colour}'>{'●' if items.view.held_out else '━'}</b> {html.escape(label)}",
                     "" if smoothed is None else f"{smoothed:.5g}", f"{value:.5g}", f"{step:,}"]
            rows.append((items.view.held_out, -shown if math.isfinite(shown) else math.inf, _row(cells)))
        if not rows:
            return ""
        rows.sort(key=lambda row: row[:2])
        more = (f"<tr><td colspan='4' style='color:#666'>and {len(rows) - HOVER_ROWS} more</td></tr>"
                if len(rows) > HOVER_ROWS else "")
        axis = self.axis_key[0] if self.axis_key else STEP
        where = _x_words(x, axis, self.axis_key[1] if self.axis_key else False)
        heading = _row([html.escape(where), "smoothed" if smoothed_any else "", "value", "step"], colour="#666")
        return ("<table cellspacing='0' cellpadding='0'>" + heading + "".join(row for *_, row in rows[:HOVER_ROWS])
                + more + "</table>")


def _row(cells: list[str], colour: str = "") -> str:
    """A hover readout's row: a name, then numbers set right with room between them."""
    style = f" style='color:{colour}'" if colour else ""
    numbers = "".join(f"<td align='right' style='padding-left:10px'>{cell}</td>" for cell in cells[1:])
    return f"<tr{style}><td>{cells[0]}</td>{numbers}</tr>"


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

    redrawn = Signal()  # a pass ended with every plot it set out to draw drawn

    def __init__(self, state: WorkbenchState, parent: QWidget | None = None, *, max_fps: float = 10.0):
        super().__init__(parent)
        self.setObjectName("metricPlots")
        self.state = state
        self.plots: dict[str, MetricPlotView] = {}
        self.order: list[str] = []
        self.redraw_count = 0  # passes finished
        self.last_redraw_s = 0.0  # from the start of the last pass finished to its end
        self.longest_slice_s = 0.0  # of the GUI thread, in any pass since this was last set to 0
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
        self._next_slice = QTimer(self)
        self._next_slice.setSingleShot(True)
        self._next_slice.setInterval(0)
        self._next_slice.timeout.connect(self._continue)
        self._after_layout = QTimer(self)  # a redraw once the plots just added are shown
        self._after_layout.setSingleShot(True)
        self._after_layout.setInterval(0)
        self._after_layout.timeout.connect(self.redraw)
        self._pass = None  # the pass under way: a generator drawing a step at a time
        self._pass_began = 0.0
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
        """Redraw soon: the pass under way ends (what it drew stays), a new one starts when the timer fires."""
        self._end_pass()
        if not self._timer.isActive():
            self._timer.start()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        for plot in self.plots.values():
            plot.dirty = True
        self.schedule()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.schedule()  # what changed while the tab was hidden is drawn now

    def busy(self) -> bool:
        """Whether a redraw is waiting or under way."""
        return self._pass is not None or self._timer.isActive() or self._after_layout.isActive()

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
        """Start a pass over the plots in view that changed (see the module docstring); its first slice runs now."""
        self._timer.stop()
        self._after_layout.stop()
        self._end_pass()
        if self._layout_stale:
            plots_before = set(self.plots)
            wanted = self._relayout()
            if set(self.plots) - plots_before and self.isVisible():
                # Qt shows a widget added to a shown layout at the event loop's next turn: draw it then, in view
                self._after_layout.start()
                return
        else:
            wanted = self.state.plots()
        todo = [(self.plots[plot.group], plot) for plot in wanted
                if self.plots[plot.group].dirty and self.visible(self.plots[plot.group])]
        self._pass = self._passing(todo, self.state.mode, self.state.smoothing)
        self._pass_began = time.perf_counter()
        self._continue()

    def _continue(self) -> None:
        if self._pass is None:
            return
        began = time.perf_counter()
        try:
            next(self._pass)  # at least one step a slice
            while time.perf_counter() - began < SLICE_S:
                next(self._pass)
        except StopIteration:
            self._pass = None
            self.redraw_count += 1
            self.last_redraw_s = time.perf_counter() - self._pass_began
            self.redrawn.emit()
        except BaseException:
            self._pass = None  # a pass that failed is over: the next event starts another
            raise
        else:
            self._next_slice.start()  # after the events waiting: a key press, a paint, the lag probe's tick
        self.longest_slice_s = max(self.longest_slice_s, time.perf_counter() - began)

    def _end_pass(self) -> None:
        self._next_slice.stop()
        if self._pass is not None:
            self._pass.close()  # its plot in progress repaints what it has
            self._pass = None

    def _passing(self, todo: list[tuple[MetricPlotView, MetricPlot]], mode, smoothing: float):
        for widget, plot in todo:
            viewport = widget.canvas.viewport()
            viewport.setUpdatesEnabled(False)  # one repaint once its items are all set, not one per slice
            try:
                yield from self._drawing(widget, plot, mode, smoothing)
            finally:
                viewport.setUpdatesEnabled(True)
                viewport.update()

    def draw_all(self) -> None:
        """Draw every plot now, seen or not, in one go (exports, tests)."""
        self._timer.stop()
        self._end_pass()
        for plot in self._relayout():
            for _step in self._drawing(self.plots[plot.group], plot, self.state.mode, self.state.smoothing):
                pass

    def _drawing(self, widget: MetricPlotView, plot: MetricPlot, mode, smoothing: float):
        """Draw one plot, yielding after each curve's arrays and each item's data (the slices' boundaries)."""
        widget.set_axes(mode.axis, mode.log_x, mode.log_y)
        members = []
        for entry, name, held_out in plot.members:
            items = widget.item_for(entry, name, held_out)
            members.append(items)
            items.view.update(mode, smoothing)
            if widget.following:
                items.view.y_extent(self.state.ignore_outliers)  # its percentiles in this step, not all at the end
            yield
        views = [items.view for items in members]
        x_range = self._x_range(widget, views)
        budget = max(200, round(widget.canvas.width()))
        x_min, x_max = x_range if x_range is not None else (-math.inf, math.inf)
        for (entry, name, _), items in zip(plot.members, members, strict=True):
            key = (entry.run_id, name)
            shown = (items.view.version, x_min, x_max, budget, items.smooth is not None)
            if widget.drawn.get(key) == shown:
                continue
            widget.drawn[key] = shown
            if items.smooth is None:
                items.raw.setData(items.view.x, items.view.y)
            else:
                items.raw.setData(*items.view.display(x_min, x_max, budget, smoothed=False))
                items.smooth.setData(*items.view.display(x_min, x_max, budget, smoothed=True))
            yield
        if widget.following:
            self._follow(widget, views, x_range)
        note = self._note(plot, views, mode)
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
                # a margin each side: the last point (a live run's newest) off the frame, the end label not cut
                margin = 0.015 * (x_range[1] - x_range[0])
                wanted = _steady(x_range[0] - margin, x_range[1] + margin)
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
        items = self.plots[group].items[(run_id, name)]
        item = items.smooth if smoothed and items.smooth is not None else items.raw
        x, y = item.getData()
        return (np.zeros(0), np.zeros(0)) if x is None else (np.asarray(x), np.asarray(y))

    def shutdown(self) -> None:
        self._timer.stop()
        self._after_layout.stop()
        self._end_pass()
