"""Where the output is restored (objectName `patchingView`): activation patching from the clean into the
corrupted run, layer × position and layer × head, 0 = as corrupted, 1 = as clean.

Left: one cell per (layer output, position) of the residual stream; right: one cell per (layer, head) output,
layers and heads counted from 1 as everywhere in the window. Both use the diverging map around 0 on one symmetric
scale (at least ±1), so a red cell restores the clean output and a blue one pushes it further away. A cell is a
difference of logits divided by the gap between the clean and the corrupted logit: under MIN_READABLE_GAP that
ratio magnifies hundredths of a logit to whole units (a 0.18 gap spread the scale over −3 … +3.5), so the view says
the edit is too small to read and keeps the scale at ±1. Clicking a layer (a row of either map) frames that row in
the heads map and draws its heads as bars underneath (`layerClicked`, then `show_layer`).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QVBoxLayout, QWidget

from explorer.common._qt.heatmap_style import diverging_color_map, diverging_lookup
from explorer.common._qt.line_label import ElidedLabel
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import curve_pen, show_title, style_canvas, style_plot
from explorer.common._qt.token_axis import TokenAxis
from explorer.common._qt.widget_names import named

EMPTY_TEXT = ("No patching yet: edit the corrupted copy of the input (same number of tokens) and press "
              "“Run patching”.")
MIN_READABLE_GAP = 0.5  # logits between the clean and the corrupted run, below which the maps are not read as shares


def layer_names(rows: int, num_layers: int) -> list[str]:
    """Row names of the residual map: the embeddings first when it has L + 1 rows, then each layer's output,
    layers counted 1..L as the Inspect tab counts them."""
    names = [f"layer {layer + 1}" for layer in range(num_layers)]
    return ["embeddings", *names] if rows == num_layers + 1 else names[:rows]


def _label(axis: TokenAxis, labels: list[str]) -> None:
    """Name the axis' cells, unless it names these already (a partial result redraws the same input)."""
    if getattr(axis, "given_labels", None) != labels:
        axis.given_labels = list(labels)
        axis.set_labels(labels)


class PatchingView(QWidget):
    layerClicked = Signal(int)  # a layer index (0-based), from a click on a row of either map

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("patchingView")
        self.setAccessibleName("Activation patching")
        self.canvas = pg.GraphicsLayoutWidget()
        style_canvas(self.canvas)
        self.residual_rows = TokenAxis("left")
        self.residual_tokens = TokenAxis("bottom")
        self.residual_plot = style_plot(self.canvas.addPlot(row=0, col=0, axisItems={
            "left": self.residual_rows, "bottom": self.residual_tokens}), mouse=False)
        self.heads_rows = TokenAxis("left")
        self.heads_columns = TokenAxis("bottom", upright=True, name_positions=False)  # head numbers 1..H, centred
        self.heads_plot = style_plot(self.canvas.addPlot(row=0, col=1, axisItems={
            "left": self.heads_rows, "bottom": self.heads_columns}), mouse=False)
        self.bar = pg.ColorBarItem(values=(-1, 1), colorMap=diverging_color_map(), interactive=False, width=12)
        self.bar.getAxis("left").setLabel("restored (0 corrupted, 1 clean)")
        self.canvas.addItem(self.bar, row=0, col=2)
        self.layer_plot = style_plot(self.canvas.addPlot(row=1, col=0, colspan=2), x_label="head",
                                     y_label="restored", mouse=False)
        self.canvas.ci.layout.setRowStretchFactor(0, 3)
        self.canvas.ci.layout.setRowStretchFactor(1, 1)
        self.canvas.ci.layout.setColumnStretchFactor(0, 3)
        self.canvas.ci.layout.setColumnStretchFactor(1, 1)
        self.residual_image = pg.ImageItem(axisOrder="row-major")
        self.heads_image = pg.ImageItem(axisOrder="row-major")
        for plot, image in ((self.residual_plot, self.residual_image), (self.heads_plot, self.heads_image)):
            image.setLookupTable(diverging_lookup())
            plot.addItem(image)
            plot.invertY(True)
        show_title(self.residual_plot, "Residual stream: layer × position")
        show_title(self.heads_plot, "Heads: layer × head")
        self.layer_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brush="#8fb3e0")
        self.layer_plot.addItem(self.layer_bars)
        self.layer_plot.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=curve_pen("#5cb85c", dotted=True)))
        self.layer_plot.addItem(pg.InfiniteLine(pos=0.0, angle=0, pen=curve_pen("#888888")))
        self.frame = QGraphicsRectItem()
        pen = QPen(Qt.GlobalColor.black)
        pen.setCosmetic(True)
        pen.setWidthF(2)
        self.frame.setPen(pen)
        self.frame.setVisible(False)
        self.heads_plot.addItem(self.frame, ignoreBounds=True)
        self.caption = plain_label(named(QLabel(EMPTY_TEXT), "patchingCaption", "what the patching maps show"))
        self.caption.setWordWrap(True)
        self.hover_label = named(ElidedLabel(" "), "patchingHover", "the cell under the mouse")  # never wider
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.hover_label)
        layout.addWidget(self.caption)
        self.residual: np.ndarray | None = None
        self.heads: np.ndarray | None = None
        self.tokens: list[str] = []
        self.num_layers = 0
        self.levels = (-1.0, 1.0)
        self.selected: int | None = None
        self.canvas.scene().sigMouseClicked.connect(self._on_clicked)
        self.canvas.scene().sigMouseMoved.connect(self._on_moved)

    def show_patching(self, tokens: list[str], num_layers: int, residual=None, heads=None, note: str = "") -> None:
        """`residual` (L or L + 1, T) and `heads` (L, H) Patching results (either may be None, not there yet)."""
        self.tokens, self.num_layers = list(tokens), num_layers
        self.residual = None if residual is None else np.asarray(residual.scores, np.float32)
        self.heads = None if heads is None else np.asarray(heads.scores, np.float32)
        result = residual if residual is not None else heads
        gap = None if result is None else abs(float(result.clean_value) - float(result.corrupted_value))
        values = [np.nanmax(np.abs(array)) for array in (self.residual, self.heads) if array is not None and array.size]
        reach = max([1.0] + [float(value) for value in values if np.isfinite(value)])
        if gap is not None and gap < MIN_READABLE_GAP:
            reach = 1.0  # the ratios of a tiny gap are not stretched over the scale (beyond ±1 saturates)
        self.levels = (-reach, reach)
        self.bar.setLevels(self.levels)
        for image, array in ((self.residual_image, self.residual), (self.heads_image, self.heads)):
            image.setVisible(array is not None)
            if array is not None:
                image.setImage(np.nan_to_num(array), levels=self.levels, autoLevels=False)
        # another model's (or no) maps leave no axis names or readout behind
        rows = (0, 0) if self.residual is None else self.residual.shape
        _label(self.residual_rows, [] if self.residual is None else layer_names(rows[0], num_layers))
        _label(self.residual_tokens, [] if self.residual is None else self.tokens)
        self.residual_plot.setRange(xRange=(0, max(1, rows[1])), yRange=(0, max(1, rows[0])), padding=0)
        cells = (0, 0) if self.heads is None else self.heads.shape
        _label(self.heads_rows, [] if self.heads is None else layer_names(cells[0], num_layers))
        _label(self.heads_columns, [str(head + 1) for head in range(cells[1])])  # heads 1..H, as in Inspect
        self.heads_plot.setRange(xRange=(0, max(1, cells[1])), yRange=(0, max(1, cells[0])), padding=0)
        if result is None:
            self.hover_label.setText(" ")
        notes = [part.note for part in (residual, heads) if part is not None and getattr(part, "note", None)]
        note = " ".join([note, *dict.fromkeys(notes)]).strip()
        if result is None:
            self.caption.setText(note or EMPTY_TEXT)
        else:
            clean, corrupted = float(result.clean_value), float(result.corrupted_value)
            if gap < MIN_READABLE_GAP and not notes:
                note = (f"{note} The edit moves the target's logit by only {gap:.2g}: too small to read what "
                        "restores it, since every cell divides a change of hundredths by that gap. The colours stop at "
                        "±1 (the hover gives each value); edit a word the output depends on more.").strip()
            self.caption.setText(
                f"{note + ' ' if note else ''}The target's logit: clean {clean:.4g}, corrupted {corrupted:.4g}. A "
                "cell is the logit when that one activation is copied from the clean run into the corrupted one, "
                "rescaled so 0 = corrupted and 1 = clean. Click a layer to see its heads.")
        self.show_layer(self.selected)

    def show_layer(self, layer: int | None) -> None:
        """Frame `layer` in the heads map and draw its heads as bars (None: no layer chosen)."""
        self.selected = layer
        heads = self.heads
        if layer is None or heads is None or not 0 <= layer < heads.shape[0]:
            self.frame.setVisible(False)
            self.layer_bars.setOpts(x=[], height=[])
            show_title(self.layer_plot, "Click a layer in either map to see its heads")
            return
        self.frame.setRect(QRectF(0, layer, heads.shape[1], 1))
        self.frame.setVisible(True)
        self.layer_bars.setOpts(x=np.arange(1, heads.shape[1] + 1), height=heads[layer], width=0.7)  # heads 1..H
        self.layer_plot.setXRange(0.4, heads.shape[1] + 0.6, padding=0)
        show_title(self.layer_plot, f"Layer {layer + 1}: each head's output patched alone")

    def layer_heights(self) -> np.ndarray:
        """The bars drawn for the chosen layer (tests)."""
        return np.asarray(self.layer_bars.opts.get("height", []), np.float32)

    def _cell(self, point) -> tuple[str, int, int] | None:
        for name, plot, array in (("residual", self.residual_plot, self.residual),
                                  ("heads", self.heads_plot, self.heads)):
            if array is None or not plot.sceneBoundingRect().contains(point):
                continue
            where = plot.vb.mapSceneToView(point)
            row, column = int(np.floor(where.y())), int(np.floor(where.x()))
            if 0 <= row < array.shape[0] and 0 <= column < array.shape[1]:
                return name, row, column
        return None

    def layer_of_row(self, name: str, row: int) -> int | None:
        """The layer a row of a map stands for (None: the embeddings row)."""
        if name == "residual" and self.residual is not None and self.residual.shape[0] == self.num_layers + 1:
            return row - 1 if row > 0 else None
        return row

    def _on_clicked(self, event) -> None:
        cell = self._cell(event.scenePos())
        if cell is not None:
            layer = self.layer_of_row(cell[0], cell[1])
            if layer is not None:
                self.layerClicked.emit(layer)

    def _on_moved(self, point) -> None:
        cell = self._cell(point)
        if cell is None:
            return
        name, row, column = cell
        array = self.residual if name == "residual" else self.heads
        rows = layer_names(array.shape[0], self.num_layers)
        where = f"position {column} {self.tokens[column]!r}" if name == "residual" else f"head {column + 1}"
        self.hover_label.setText(f"{rows[row]}, {where}: restored {float(array[row, column]):.3f}")
