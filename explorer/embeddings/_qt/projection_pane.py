"""The Embeddings tab's projection pane: a 2-D PCA of token hidden states (a
`bertcore.analysis.embedding_views.Projection`), drawn as one `ScatterPlotItem` fed with `setData` and per-point
brushes so that it pans without stutter. Hover names the token and shows its sentence with the token marked; a
click asks for that sentence pair to be inspected (`inspectPair`). Points are coloured by segment, token kind or
task label (when the sample has labels), with a legend above the plot.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import curve_pen, style_canvas, style_plot
from explorer.common._qt.widget_names import named
from explorer.embeddings.requests import marked_sentence

CATEGORY_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                    "#bcbd22", "#17becf")
KIND_COLOURS = {"special": "#7f7f7f", "word": "#1f77b4", "subword": "#2ca02c", "punctuation": "#d62728"}
SEGMENT_NAMES = {0: "sentence A", 1: "sentence B"}
POINT_SIZE = 6
HOVER_RADIUS_PX = 8


class ProjectionPane(QWidget):
    """The projection's legend, plot (objectName projectionPlot) and hover line, for one projection at a time."""

    inspectPair = Signal(str, str)  # the sentence pair of a clicked point

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("projectionPane")
        self.projection: Any = None  # the Projection drawn, or None before the first
        self.pairs: list[tuple[str, str]] = []  # the sample's sentence pairs, by sentence index
        self.colour_by = "segment"  # a key of explorer.embeddings.requests.COLOUR_BY
        self.colours: list[str] = []  # (N,) the colour of each point, as drawn
        self.hovered_index = -1

        self.scatter_plot = pg.PlotWidget()
        self.scatter_plot.setObjectName("projectionPlot")
        style_canvas(self.scatter_plot)
        style_plot(self.scatter_plot.getPlotItem(), auto_range_button=True)
        self.scatter = pg.ScatterPlotItem(size=POINT_SIZE, pen=None, pxMode=True)
        self.scatter_plot.addItem(self.scatter)
        self.hover_marker = pg.ScatterPlotItem(size=POINT_SIZE + 8, pen=curve_pen("k", width=2), brush=None)
        self.hover_marker.setZValue(10)
        self.scatter_plot.addItem(self.hover_marker, ignoreBounds=True)
        self.legend_label = named(QLabel(" "), "projectionLegend", "projection legend")
        self.legend_label.setTextFormat(Qt.TextFormat.RichText)  # coloured dots; the names in it are escaped
        self.legend_label.setWordWrap(True)  # a task's many labels take more lines, not more width
        self.projection_hover = plain_label(named(QLabel(" "), "projectionHoverLabel", "point under the mouse"))
        self.projection_hover.setWordWrap(True)
        self.projection_hover.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.projection_hover.setMinimumHeight(2 * self.fontMetrics().height() + 6)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.legend_label)
        layout.addWidget(self.scatter_plot, 1)
        layout.addWidget(self.projection_hover)
        self.scatter_plot.scene().sigMouseMoved.connect(self._on_scatter_moved)
        self.scatter_plot.scene().sigMouseClicked.connect(self._on_scatter_clicked)

    def show_projection(self, projection: Any, pairs: list[tuple[str, str]]) -> None:
        """Draw a new projection (its points framed in the view) of the sample drawn from `pairs`."""
        self.projection, self.pairs = projection, pairs
        self._draw_points(keep_range=False)

    def set_colour_by(self, key: str) -> None:
        """Colour the points by `key` ("segment", "kind", "label"), keeping the view where it is."""
        self.colour_by = key
        if self.projection is not None:
            self._draw_points(keep_range=True)

    def point_colours(self) -> list[str]:
        """(N,) the colour of each point under the current "colour by" (segments when the sample has no labels)."""
        sample = self.projection.sample
        key = self.colour_by
        if key == "label" and sample.labels is None:
            key = "segment"
        if key == "segment":
            values, palette = sample.segment, {0: CATEGORY_COLOURS[0], 1: CATEGORY_COLOURS[1]}
        elif key == "kind":
            values, palette = sample.kind, KIND_COLOURS
        else:
            values = sample.labels
            palette = {label: CATEGORY_COLOURS[i % len(CATEGORY_COLOURS)]
                       for i, label in enumerate(sorted(set(values.tolist()), key=str))}
        return [palette.get(value.item() if hasattr(value, "item") else value, "#333333") for value in values]

    def _draw_points(self, keep_range: bool) -> None:
        self.colours = self.point_colours()
        brushes = {colour: pg.mkBrush(QColor(colour)) for colour in set(self.colours)}  # one brush per colour
        self.scatter.setData(pos=self.projection.points, brush=[brushes[colour] for colour in self.colours],
                             size=POINT_SIZE, pen=None)
        self._show_legend()
        self.hover_marker.setData([], [])
        self.hovered_index = -1
        if not keep_range:
            self.scatter_plot.getPlotItem().vb.autoRange(padding=0.04)
        ratio = self.projection.explained_variance_ratio
        self.scatter_plot.setLabel("bottom", f"PC 1 ({ratio[0]:.0%} of the variance)")  # in style_plot's ink
        self.scatter_plot.setLabel("left", f"PC 2 ({ratio[1]:.0%})")

    def _show_legend(self) -> None:
        sample = self.projection.sample
        if self.colour_by == "kind":
            entries = [(KIND_COLOURS[kind], kind) for kind in KIND_COLOURS if kind in set(sample.kind.tolist())]
        elif self.colour_by == "label" and sample.labels is not None:
            labels = sorted(set(sample.labels.tolist()), key=str)
            entries = [(CATEGORY_COLOURS[i % len(CATEGORY_COLOURS)], str(label)) for i, label in enumerate(labels)]
        else:
            entries = [(CATEGORY_COLOURS[segment], name) for segment, name in SEGMENT_NAMES.items()]
        self.legend_label.setText("  ".join(f"<span style='color:{colour}; font-size:14pt'>●</span> "
                                            f"{html.escape(name, quote=False)}" for colour, name in entries))

    def point_at(self, scene_pos: QPointF) -> int:
        """Index of the point within HOVER_RADIUS_PX of a scene position (the nearest), else -1."""
        if self.projection is None:
            return -1
        view = self.scatter_plot.getPlotItem().vb
        if not view.sceneBoundingRect().contains(scene_pos):
            return -1
        point = view.mapSceneToView(scene_pos)
        width, height = view.viewPixelSize()  # data units per pixel
        points = self.projection.points
        distances = ((points[:, 0] - point.x()) / width) ** 2 + ((points[:, 1] - point.y()) / height) ** 2
        nearest = int(np.argmin(distances))
        return nearest if distances[nearest] <= HOVER_RADIUS_PX**2 else -1

    def _on_scatter_moved(self, scene_pos: QPointF) -> None:
        index = self.point_at(scene_pos)
        if index == self.hovered_index:
            return
        self.hovered_index = index
        if index < 0:
            self.hover_marker.setData([], [])
            self.projection_hover.setText(" ")
            return
        self.hover_marker.setData(pos=self.projection.points[index : index + 1])
        first_line = self.projection.describe(index).split("\n")[0]
        self.projection_hover.setText(f"{first_line} — click to inspect\n"
                                      f"{marked_sentence(self.projection.sample, index)}")

    def _on_scatter_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        index = self.point_at(event.scenePos())
        if index >= 0:
            self.inspect_point(index)

    def inspect_point(self, index: int) -> None:
        """Ask for the pair point `index` came from to be inspected."""
        text_a, text_b = self.pairs[int(self.projection.sample.sentence_index[index])]
        self.inspectPair.emit(text_a, text_b)

    def write_csv(self, path) -> Path:
        """The points as CSV: coordinates, token, kind, segment, position and the sentence pair's text."""
        from explorer.common.export_data import write_rows_csv

        if self.projection is None:
            raise ValueError("there is no projection to export yet")
        projection = self.projection
        sample = projection.sample
        rows = [["x", "y", "token", "kind", "segment", "position", "sentence", "text"]]
        for index in range(sample.num_points):
            sentence = int(sample.sentence_index[index])
            rows.append([f"{projection.points[index, 0]:.6g}", f"{projection.points[index, 1]:.6g}",
                         str(sample.tokens[index]), str(sample.kind[index]), "AB"[int(sample.segment[index])],
                         str(int(sample.position[index])), str(sentence), sample.texts[sentence]])
        return write_rows_csv(path, rows)
