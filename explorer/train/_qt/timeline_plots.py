"""What the Train tab's three analysis timelines (syntax, probes, health) share: step plots on the loss curves' step
axis, the marker that follows the step slider, clicks that choose a step, a colour per layer, and redrawing only
what is on screen.

Each timeline is a `TimelineView`: it follows an `explorer.train.analysis_timeline.AnalysisTimeline` (its `changed`
event says "records" or "step") and redraws from it, at once when shown, else when it is next shown. Its step plots
are linked to the loss plot's step axis (`link_steps`): the same range, zoomed and followed with it, with the loss
plots' value-axis width so that a step stands at the same x in every plot. A click in a step plot asks for that step
(`stepChosen`): the Train tab moves its step slider there, and every view follows the slider.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import add_legend, curve_pen, style_canvas, style_plot
from explorer.runs._qt.loss_plots import LEFT_AXIS_WIDTH
from explorer.train.analysis_timeline import AnalysisTimeline, layer_name

MARKER_COLOUR = "#d62728"  # the loss plots' step marker
ONSET_COLOUR = "#2ca02c"
BASELINE_COLOUR = "#7f7f7f"
WARNING_STYLE = "color: #b34700;"
LAYER_MAP = "viridis"
LAYER_MAP_SPAN = (0.0, 0.85)  # viridis' last yellows are unreadable on white


@lru_cache(maxsize=32)
def layer_colours(count: int) -> tuple[QColor, ...]:
    """`count` colours from dark (the embeddings, the lowest layer) to bright (the top layer)."""
    colour_map = pg.colormap.get(LAYER_MAP)
    stops = np.linspace(*LAYER_MAP_SPAN, max(count, 1)) if count > 1 else np.array([0.0])
    return tuple(colour_map.map(float(stop), mode="qcolor") for stop in stops)


def step_plot(graphics: pg.GraphicsLayoutWidget, row: int, y_label: str) -> pg.PlotItem:
    """A plot of values over steps in row `row` of `graphics`: the loss plots' value-axis width, plain step numbers,
    no mouse zoom (the loss plot's step axis leads; a click chooses a step)."""
    plot = graphics.addPlot(row=row, col=0)
    style_plot(plot, y_label=y_label, mouse=False)
    plot.getAxis("left").setWidth(LEFT_AXIS_WIDTH)
    plot.getAxis("bottom").enableAutoSIPrefix(False)
    plot.setClipToView(True)
    return plot


def legend(plot: pg.PlotItem, columns: int = 1, *, left: bool = False) -> pg.LegendItem:
    """A one-row key in the plot's top right corner (`left`: top left, for figures that rise as a run learns) on a
    white box as tall as its text: pyqtgraph's 9 px margins made the box 39 px tall, half of a step plot in a small
    window, hiding the curves under it."""
    item = add_legend(plot, (6 if left else -6, 2), columns=columns, backdrop=True)
    item.layout.setContentsMargins(3, 0, 3, 0)
    return item


class TimelineView(QWidget):
    """A timeline of analysis records over steps (see the module docstring). A subclass makes its plots in `_build`
    (listing its step plots in `self.step_plots`), draws the timeline's records in `_draw_records` and the chosen
    step in `_draw_step`."""

    stepChosen = Signal(int)  # the user clicked a step plot at this step

    EMPTY_TEXT = ("No analysis records yet: a run analyses its weights every \"Analyse every\" steps (the form); "
                  "a run without records can be analysed over its checkpoints (Analyse checkpoints).")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.timeline: AnalysisTimeline | None = None
        self.step: int | None = None  # the step the marker stands at
        self.drawn_version = -1  # the timeline's version drawn last
        self.redraw_count = 0
        self.caption = plain_label(QLabel(self.EMPTY_TEXT))
        self.caption.setWordWrap(True)
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.caption.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.graphics = pg.GraphicsLayoutWidget()
        style_canvas(self.graphics)
        self.step_plots: list[pg.PlotItem] = []
        self.markers: list[pg.InfiniteLine] = []
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self._layout.addWidget(self.caption)
        self._build()
        self._layout.addWidget(self.graphics, 1)
        for plot in self.step_plots:
            marker = pg.InfiniteLine(angle=90, movable=False, pen=curve_pen(MARKER_COLOUR))
            marker.setVisible(False)
            marker.setZValue(20)
            plot.addItem(marker, ignoreBounds=True)
            self.markers.append(marker)
        self.step_plots[-1].setLabel("bottom", "step")
        self.graphics.scene().sigMouseClicked.connect(self._on_clicked)

    # ---- what a subclass gives ----
    def _build(self) -> None:
        raise NotImplementedError

    def _draw_records(self, timeline: AnalysisTimeline) -> None:
        raise NotImplementedError

    def _draw_step(self, timeline: AnalysisTimeline, index: int | None) -> None:
        """The record `index` (nearest to the marker's step; None: no record or no step) in the caption."""
        raise NotImplementedError

    # ---- following the state ----
    def follow(self, timeline: AnalysisTimeline) -> None:
        """Draw `timeline` now and whenever it announces a change."""
        self.timeline = timeline
        timeline.changed.connect(self._on_changed)
        self.drawn_version = -1
        self._redraw()

    def link_steps(self, plot: pg.PlotItem) -> None:
        """Share `plot`'s step axis (the loss plot's)."""
        for own in self.step_plots:
            own.setXLink(plot)

    def _on_changed(self, timeline: AnalysisTimeline, what: str) -> None:
        if what == "step":
            self.step = timeline.step
            self._show_markers()
            if self.isVisible():
                self._draw_step(timeline, self._record_index())
            return
        if self.isVisible():
            self._redraw()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._redraw()  # what arrived while hidden (nothing, when the version drawn is the newest)

    def _redraw(self) -> None:
        timeline = self.timeline
        if timeline is None:
            return
        if timeline.version != self.drawn_version:
            self.drawn_version = timeline.version
            self.redraw_count += 1
            self._draw_records(timeline)
        self.step = timeline.step
        self._show_markers()
        self._draw_step(timeline, self._record_index())

    def _record_index(self) -> int | None:
        if self.timeline is None or self.step is None:
            return len(self.timeline) - 1 if self.timeline is not None and len(self.timeline) else None
        return self.timeline.nearest(self.step)

    def _show_markers(self) -> None:
        for marker in self.markers:
            marker.setVisible(self.step is not None)
            if self.step is not None:
                marker.setValue(self.step)

    def _on_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        for plot in self.step_plots:
            if plot.vb.sceneBoundingRect().contains(event.scenePos()):
                step = plot.vb.mapSceneToView(event.scenePos()).x()
                if math.isfinite(step):
                    self.stepChosen.emit(max(0, round(step)))
                return

    # ---- for subclasses and tests ----
    def step_scene_x(self, step: float, plot: pg.PlotItem | None = None) -> float:
        """Where `step` stands on screen (scene x) in a step plot (tests, scripted clicks)."""
        plot = plot or self.step_plots[0]
        return plot.vb.mapViewToScene(pg.Point(step, 0)).x()


class LayerCurves:
    """One curve per layer in a plot (embeddings first, when the figures have them), made when the layer count
    changes, each named in the plot's legend."""

    def __init__(self, plot: pg.PlotItem, legend_item: pg.LegendItem | None, *, symbols: bool = True,
                 width: float = 1.5):
        self.plot = plot
        self.legend = legend_item
        self.symbols = symbols
        self.width = width
        self.curves: list[pg.PlotDataItem] = []
        self.names: list[str] = []

    def show(self, steps: np.ndarray, values: np.ndarray, *, embeddings_first: bool = True) -> None:
        """values (S, K): column k is layer k's curve (layer 0 the embeddings when `embeddings_first`)."""
        count = values.shape[1] if values.ndim == 2 else 0
        names = [layer_name(k) if embeddings_first else f"layer {k + 1}" for k in range(count)]
        if names != self.names:
            self._make(names)
        for column, curve in enumerate(self.curves):
            column_values = values[:, column]
            known = np.isfinite(column_values)
            curve.setData(steps[known], column_values[known])

    def clear(self) -> None:
        for curve in self.curves:
            curve.setData([], [])

    def _make(self, names: list[str]) -> None:
        for curve in self.curves:
            self.plot.removeItem(curve)  # and its legend entry
        colours = layer_colours(len(names))
        self.curves = []
        for name, colour in zip(names, colours, strict=True):
            options = {"symbol": "o", "symbolSize": 4, "symbolBrush": colour, "symbolPen": None} if self.symbols else {}
            curve = pg.PlotDataItem(pen=curve_pen(colour, width=self.width), name=name if self.legend else None,
                                    **options)
            self.plot.addItem(curve)
            self.curves.append(curve)
        self.names = names
