"""Layers × heads, each cell coloured by how far that head's attention moved between two checkpoints.

One image of (L, H) values (rows: layers, top to bottom; columns: heads), the value written in every cell, a
colour bar naming the unit (Jensen–Shannon divergence, bits; in a power of ten, "10⁻⁵ bits", when the largest value
is too small for three decimals: `head_change.value_exponent`), the hovered head's number below, and the clicked
head framed. Items are made once and fed with new data: the image with `setImage`, the numbers with
`CellNumbers.set_cells`; only a new grid shape sets the axes again.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QSizePolicy, QVBoxLayout, QWidget

from explorer.common._qt.cell_numbers import CellNumbers, cell_at, cell_centre
from explorer.common._qt.heatmap_style import SELECTED_PEN, colour_lookup, insert_scale_bar, make_scale_bar
from explorer.common._qt.picture_item import PictureItem
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import CAPTION_STYLE, style_canvas, style_plot
from explorer.common.attention_math import to_rgba
from explorer.what_changed.head_change import power_of_ten, value_exponent

UNIT = "JS divergence, bits"
BRIGHT_FRACTION = 0.62  # above this fraction of the scale the colour map is light: write the number in black


class HeadChangeGrid(QWidget):
    """The (L, H) divergences of a comparison; left click picks a head (headClicked(layer, head), 0-based)."""

    HINT = "hover a head for its number · click it to see A, B and B − A"
    headClicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headChangeGrid")
        self.setAccessibleName("What changed: layers × heads")
        self.values = np.zeros((0, 0), np.float64)  # (L, H) bits, as shown
        self.levels = (0.0, 1.0)
        self.exponent = 0  # the cells and the colour bar count in 10 ** exponent bits
        self.selected = (-1, -1)

        self.graphics = pg.GraphicsLayoutWidget()
        style_canvas(self.graphics)
        self.graphics.ci.setContentsMargins(4, 4, 4, 4)
        self.plot = style_plot(self.graphics.addPlot(), x_label="head", y_label="layer", mouse=False)
        self.plot.invertY(True)
        self.image_item = PictureItem()
        self.plot.addItem(self.image_item)
        self.numbers = CellNumbers()
        self.numbers.setZValue(5)
        self.plot.addItem(self.numbers, ignoreBounds=True)
        self.frame = QGraphicsRectItem()
        pen = QPen(SELECTED_PEN, 3)
        pen.setCosmetic(True)
        self.frame.setPen(pen)
        self.frame.setZValue(10)
        self.frame.setVisible(False)
        self.plot.addItem(self.frame, ignoreBounds=True)
        self.color_bar = make_scale_bar()
        self.color_bar.getAxis("left").setLabel(UNIT, **CAPTION_STYLE)
        insert_scale_bar(self.plot, self.color_bar)

        self.hover_label = plain_label(QLabel(self.HINT))
        self.hover_label.setObjectName("headChangeHoverLabel")
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.hover_label)
        scene = self.graphics.scene()
        scene.sigMouseClicked.connect(self._on_mouse_clicked)
        scene.sigMouseMoved.connect(self._on_mouse_moved)
        self.clear()  # axes for no heads (left to themselves, they count -0.5..0.5 in thousandths)

    @property
    def shape(self) -> tuple[int, int]:
        return self.values.shape  # type: ignore[return-value]

    def show_values(self, values: np.ndarray, levels: tuple[float, float]) -> None:
        """(L, H) divergences in bits over colour `levels`."""
        values = np.asarray(values, np.float64)
        new_shape = values.shape != self.values.shape
        self.values, self.levels = values, levels
        num_layers, num_heads = values.shape
        lookup = colour_lookup()
        self.image_item.set_picture(to_rgba(values, levels, lookup), QRectF(0, 0, num_heads, num_layers))
        self.color_bar.setLevels(levels)
        self._show_exponent(value_exponent(float(levels[1])))
        if new_shape:
            self._build(num_layers, num_heads)
        fractions = (values - levels[0]) / max(levels[1] - levels[0], 1e-30)
        if self.exponent:
            texts = [[f"{value * 10.0 ** -self.exponent:.2f}" for value in row] for row in values]
        else:
            texts = [[f"{value:.3f}" for value in row] for row in values]
        self.numbers.set_cells(texts, fractions > BRIGHT_FRACTION)
        if self.selected[0] >= num_layers or self.selected[1] >= num_heads:
            self.select(-1, -1)
        self.hover_label.setText(self.HINT)  # what it said was a value of the comparison before

    def _show_exponent(self, exponent: int) -> None:
        """The colour bar's ticks and name in 10 ** exponent bits, as the cells are written."""
        if exponent == self.exponent:
            return
        self.exponent = exponent
        self.color_bar.axis.setScale(10.0 ** -exponent)  # the ticks' axis; its name is on the bar's left axis
        label = f"JS divergence, {power_of_ten(exponent)} bits" if exponent else UNIT
        self.color_bar.getAxis("left").setLabel(label, **CAPTION_STYLE)

    def _build(self, num_layers: int, num_heads: int) -> None:
        """The axes and the view for a new grid shape."""
        self.plot.getAxis("left").setTicks([[(layer + 0.5, str(layer + 1)) for layer in range(num_layers)]])
        self.plot.getAxis("bottom").setTicks([[(head + 0.5, str(head + 1)) for head in range(num_heads)]])
        self.plot.vb.setRange(xRange=(0, max(1, num_heads)), yRange=(0, max(1, num_layers)), padding=0)
        self.plot.vb.updateMatrix()

    def clear(self) -> None:
        """Nothing compared (after a fault)."""
        self.values = np.zeros((0, 0), np.float64)
        self._show_exponent(0)
        self.image_item.clear()
        self.numbers.set_cells([], np.zeros((0, 0), bool))
        self._build(0, 0)
        self.select(-1, -1)
        self.hover_label.setText(self.HINT)

    def select(self, layer: int, head: int) -> None:
        """Frame a head (-1, -1: none)."""
        self.selected = (layer, head)
        self.frame.setVisible(layer >= 0)
        if layer >= 0:
            self.frame.setRect(QRectF(head, layer, 1, 1))

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int]:
        """(layer, head) under a scene point, (-1, -1) outside the grid."""
        return cell_at(self.plot, self.values.shape, scene_pos)

    def cell_centre(self, layer: int, head: int) -> QPointF:
        """The scene point at the middle of a head's cell (tests, scripted clicks)."""
        return cell_centre(self.plot, layer, head)

    def describe(self, layer: int, head: int) -> str:
        return f"layer {layer + 1}, head {head + 1}: {bits_text(float(self.values[layer, head]))}"

    def leaveEvent(self, event) -> None:
        self.hover_label.setText(self.HINT)  # no head is under the mouse any more
        super().leaveEvent(event)

    def _on_mouse_clicked(self, event) -> None:
        layer, head = self.cell_at(event.scenePos())
        if layer >= 0 and event.button() == Qt.MouseButton.LeftButton:
            self.headClicked.emit(layer, head)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        layer, head = self.cell_at(scene_pos)
        self.hover_label.setText(self.describe(layer, head) if layer >= 0 else self.HINT)


def bits_text(bits: float) -> str:
    """"0.2140 bits", or with three significant digits when that would read 0.0000: "4.65e-05 bits"."""
    return f"{bits:.4f} bits" if bits == 0 or abs(bits) >= 1e-3 else f"{bits:.3g} bits"
