"""The cells of a grid image whose cell (r, c) spans [c, c+1] × [r, r+1] in view coordinates (the attention
heatmap, the logit lens, the change grid, the syntax heads): which cell is under a point (`cell_at`), a cell's centre
(`cell_centre`), and the number of every cell written in one paint (`CellNumbers`).

A `pg.TextItem` per cell costs about a millisecond to make and again to lay out whenever the view moves, so a
12 × 12 grid of them held the GUI thread for ~200 ms; `CellNumbers` is one item that maps each cell's centre to
screen pixels and writes its text there, unscaled, in dark ink on light cells and light ink on dark ones.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor

DARK_INK, LIGHT_INK = QColor("#111111"), QColor("#f4f4f4")


def cell_at(plot: pg.PlotItem, shape: tuple[int, ...], scene_pos: QPointF) -> tuple[int, int]:
    """(row, column) of the grid of `shape` (rows, columns) under a scene point, (-1, -1) outside it."""
    if not plot.vb.sceneBoundingRect().contains(scene_pos):
        return -1, -1
    point = plot.vb.mapSceneToView(scene_pos)
    row, column = math.floor(point.y()), math.floor(point.x())
    if len(shape) >= 2 and 0 <= row < shape[0] and 0 <= column < shape[1]:
        return row, column
    return -1, -1


def cell_centre(plot: pg.PlotItem, row: int, column: int) -> QPointF:
    """The scene point at the middle of a cell (tests, scripted clicks)."""
    return plot.vb.mapViewToScene(QPointF(column + 0.5, row + 0.5))


class CellNumbers(pg.GraphicsObject):
    """Texts for the cells of an (rows, columns) grid whose cell (r, c) spans [c, c+1] × [r, r+1] in view
    coordinates; add it to the plot over the image with `ignoreBounds=True`."""

    def __init__(self):
        super().__init__()
        self.texts: list[list[str]] = []
        self.on_light: np.ndarray = np.zeros((0, 0), bool)

    def set_cells(self, texts: list[list[str]], on_light: np.ndarray) -> None:
        """`texts[r][c]` for each cell ([] for none); `on_light[r, c]`: the cell's colour is light (dark ink)."""
        self.prepareGeometryChange()
        self.texts = texts
        self.on_light = np.asarray(on_light, bool)
        self.update()

    def text(self, row: int, column: int) -> str:
        return self.texts[row][column]

    def boundingRect(self) -> QRectF:
        return QRectF(0, 0, len(self.texts[0]) if self.texts else 0, len(self.texts))

    def paint(self, painter, *_args) -> None:
        to_device = painter.transform()
        painter.resetTransform()  # write in pixels, so the text is not stretched with the cells
        for row, row_texts in enumerate(self.texts):
            for column, text in enumerate(row_texts):
                centre = to_device.map(QPointF(column + 0.5, row + 0.5))
                painter.setPen(DARK_INK if self.on_light[row, column] else LIGHT_INK)
                painter.drawText(QRectF(centre.x() - 50, centre.y() - 10, 100, 20), Qt.AlignmentFlag.AlignCenter,
                                 text)
