"""All layers x heads in one ImageItem (bertviz's "model view" without 144 widgets).

explorer.attention_math.overview_image assembles the (L*c, H*c) picture in numpy; this view shows it,
draws the cell grid and layer/head labels as single items, and maps clicks and hovers back to
(layer, head) and token positions.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QVBoxLayout, QWidget

from explorer._qt.head_marks import ScoreLegend, make_badge, score_lookup_table, set_badge
from explorer._qt.head_views import HIGHLIGHT_PEN, SELECTED_PEN, HoverReadout, color_map
from explorer.attention_math import bin_edges

GRID_PEN = pg.mkPen((255, 255, 255), width=1.5, cosmetic=True)


class ModelOverview(HoverReadout, QWidget):
    headClicked = Signal(int, int)  # layer, head
    hovered = Signal(int)  # original position of the query row under the mouse, -1 when none

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.num_layers = 0
        self.num_heads = 0
        self.cell = 1
        self.positions = np.zeros(0, np.intp)
        self.tokens: list[str] = []
        self.image = np.zeros((0, 0), np.float32)
        self._hover_inside = False

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.plot = self.graphics.addPlot()
        self.plot.invertY(True)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.showAxis("top")
        self.plot.hideAxis("bottom")
        for name in ("left", "top"):
            axis = self.plot.getAxis(name)
            axis.setPen("k")
            axis.setTextPen("k")
        self.plot.getAxis("left").setLabel("layer", color="k")
        self.plot.getAxis("top").setLabel("head", color="k")
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.image_item.setColorMap(color_map())
        self.plot.addItem(self.image_item)
        self.grid_lines = pg.PlotCurveItem(pen=GRID_PEN, connect="pairs")
        self.grid_lines.setZValue(5)
        self.plot.addItem(self.grid_lines, ignoreBounds=True)
        # where the highlighted token sits inside every cell: one row line and one column line per cell
        self.token_lines = pg.PlotCurveItem(pen=pg.mkPen(HIGHLIGHT_PEN, width=1, cosmetic=True), connect="pairs")
        self.token_lines.setZValue(6)
        self.plot.addItem(self.token_lines, ignoreBounds=True)
        self.ablated_items: list[QGraphicsRectItem] = []
        self.selection = QGraphicsRectItem()
        selection_pen = QPen(SELECTED_PEN)
        selection_pen.setCosmetic(True)
        selection_pen.setWidthF(3)
        self.selection.setPen(selection_pen)
        self.selection.setZValue(8)
        self.selection.setVisible(False)
        self.plot.vb.addItem(self.selection, ignoreBounds=True)
        self.color_bar = pg.ColorBarItem(values=(0, 1), colorMap=color_map(), interactive=False, width=14)
        self.color_bar.setImageItem(self.image_item, insert_in=self.plot)
        # head-lab marks (set_head_annotations): importance fills each cell, a role badge sits in its corner
        self.head_scores: np.ndarray | None = None  # (L, H)
        self.head_badges: np.ndarray | None = None  # (L, H) str
        self.head_details: np.ndarray | None = None  # (L, H) str
        self.score_item = pg.ImageItem(axisOrder="row-major")
        self.score_item.setLookupTable(score_lookup_table())
        self.score_item.setZValue(4)  # over the attention, under the grid lines
        self.score_item.setVisible(False)
        self.plot.addItem(self.score_item, ignoreBounds=True)
        self.badge_items: list[pg.TextItem] = []
        self.score_legend = ScoreLegend()

        self.hover_label = QLabel(" ")
        self.hover_label.setObjectName("overviewHoverLabel")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.score_legend)
        layout.addWidget(self.hover_label)
        self.graphics.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)

    def set_overview(self, image: np.ndarray, cell: int, num_layers: int, num_heads: int,
                     positions: np.ndarray, tokens: list[str], levels: tuple[float, float]) -> None:
        """image (L*cell, H*cell) from attention_math.overview_image."""
        shape_changed = (num_layers, num_heads, cell) != (self.num_layers, self.num_heads, self.cell)
        self.image = image
        self.cell, self.num_layers, self.num_heads = cell, num_layers, num_heads
        self.positions = np.asarray(positions, np.intp)
        self.tokens = tokens
        self.image_item.setImage(image, autoLevels=False, levels=levels)
        self.color_bar.setLevels(levels)
        if shape_changed:
            self._layout_grid()

    def _layout_grid(self) -> None:
        cell, height, width = self.cell, self.num_layers * self.cell, self.num_heads * self.cell
        xs, ys = [], []
        for head in range(1, self.num_heads):
            xs += [head * cell, head * cell]
            ys += [0, height]
        for layer in range(1, self.num_layers):
            xs += [0, width]
            ys += [layer * cell, layer * cell]
        self.grid_lines.setData(np.array(xs, float), np.array(ys, float))
        self.plot.getAxis("left").setTicks([[((layer + 0.5) * cell, str(layer + 1))
                                             for layer in range(self.num_layers)]])
        self.plot.getAxis("top").setTicks([[((head + 0.5) * cell, str(head + 1))
                                            for head in range(self.num_heads)]])
        self.plot.vb.setRange(xRange=(0, max(1, width)), yRange=(0, max(1, height)), padding=0)
        self._place_head_marks()

    def set_head_annotations(self, scores: np.ndarray | None = None, badges: np.ndarray | None = None,
                             details: np.ndarray | None = None, caption: str | None = None) -> None:
        """Head-lab marks on every head, (L, H) each; None: not drawn. scores in [0, 1] fill each head's cell
        with its importance colour (the attention is hidden meanwhile; a legend shows `caption`, or without
        scores shows it as a note), badges are short role names in each cell's corner, details a line the
        hover readout adds."""
        self.head_scores = None if scores is None else np.asarray(scores, np.float32)
        self.head_badges = None if badges is None else np.asarray(badges, str)
        self.head_details = None if details is None else np.asarray(details, str)
        self.score_legend.show_caption(caption, with_scale=scores is not None)
        self.color_bar.setVisible(scores is None)  # its colours are the attention's
        self._place_head_marks()

    def _place_head_marks(self) -> None:
        grid = (self.num_layers, self.num_heads)
        scores = self.head_scores if self.head_scores is not None and self.head_scores.shape == grid else None
        self.score_item.setVisible(scores is not None)
        if scores is not None:
            self.score_item.setImage(scores, autoLevels=False, levels=(0.0, 1.0))
            self.score_item.setRect(QRectF(0, 0, self.num_heads * self.cell, self.num_layers * self.cell))
        badges = self.head_badges if self.head_badges is not None and self.head_badges.shape == grid else None
        needed = 0 if badges is None else badges.size
        while len(self.badge_items) < needed:
            self.badge_items.append(make_badge(self.plot.vb))
        for index, badge in enumerate(self.badge_items):
            if index >= needed:
                set_badge(badge, "", 0, 0)
                continue
            layer, head = divmod(index, self.num_heads)
            set_badge(badge, badges[layer, head], head * self.cell, layer * self.cell)

    def set_head_mask(self, head_mask: np.ndarray) -> None:
        """Grey veil over every switched-off head (one rect item per ablated head, reused)."""
        off = np.argwhere(np.asarray(head_mask) < 0.5)
        while len(self.ablated_items) < len(off):
            veil = QGraphicsRectItem()
            veil.setBrush(QBrush(QColor(235, 235, 235, 215)))
            veil.setPen(QPen(Qt.PenStyle.NoPen))
            veil.setZValue(7)
            self.plot.vb.addItem(veil, ignoreBounds=True)
            self.ablated_items.append(veil)
        for index, veil in enumerate(self.ablated_items):
            veil.setVisible(index < len(off))
            if index < len(off):
                layer, head = off[index]
                veil.setRect(QRectF(head * self.cell, layer * self.cell, self.cell, self.cell))

    def select(self, layer: int, head: int) -> None:
        self.selection.setVisible(layer >= 0 and head >= 0)
        self.selection.setRect(QRectF(head * self.cell, layer * self.cell, self.cell, self.cell))

    def cell_of(self, scene_pos: QPointF) -> tuple[int, int, int, int]:
        """(layer, head, row, column) under a scene point; row/column index visible tokens; -1s outside."""
        if self.num_layers == 0 or not self.plot.vb.sceneBoundingRect().contains(scene_pos):
            return -1, -1, -1, -1
        point = self.plot.vb.mapSceneToView(scene_pos)
        x, y = point.x(), point.y()
        if not (0 <= x < self.num_heads * self.cell and 0 <= y < self.num_layers * self.cell):
            return -1, -1, -1, -1
        layer, head = int(y // self.cell), int(x // self.cell)
        edges = bin_edges(len(self.positions), self.cell)  # the tokens that were averaged into each pixel
        row = int(edges[min(self.cell - 1, math.floor(y - layer * self.cell))])
        column = int(edges[min(self.cell - 1, math.floor(x - head * self.cell))])
        return layer, head, row, column

    def highlight_position(self, position: int) -> None:
        hits = np.flatnonzero(self.positions == position) if position >= 0 else np.zeros(0)
        if not hits.size or self.num_layers == 0:
            self.token_lines.setData([], [])
            return
        # visible index -> offset inside a cell, in the cell's (possibly downsampled) pixels
        offset = (int(hits[0]) + 0.5) * self.cell / len(self.positions)
        height, width = self.num_layers * self.cell, self.num_heads * self.cell
        xs, ys = [], []
        for head in range(self.num_heads):
            xs += [head * self.cell + offset] * 2
            ys += [0, height]
        for layer in range(self.num_layers):
            xs += [0, width]
            ys += [layer * self.cell + offset] * 2
        self.token_lines.setData(np.array(xs, float), np.array(ys, float))


    def _on_mouse_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        layer, head, _, _ = self.cell_of(event.scenePos())
        if layer >= 0:
            self.headClicked.emit(layer, head)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        layer, head, row, column = self.cell_of(scene_pos)
        if layer < 0:
            self._end_hover()
            return
        self._hover_inside = True
        query, key = int(self.positions[row]), int(self.positions[column])
        point = self.plot.vb.mapSceneToView(scene_pos)
        value = float(self.image[math.floor(point.y()), math.floor(point.x())])
        pooled = " (block mean)" if self.cell < len(self.positions) else ""
        details = self.head_details
        detail = f" · {details[layer, head]}" if details is not None and details.shape == (
            self.num_layers, self.num_heads) else ""
        self.hover_label.setText(
            f"layer {layer + 1}, head {head + 1}: {self.tokens[query]} ({query}) → {self.tokens[key]} ({key}): "
            f"{value:.4f}{pooled}{detail} — click to open"
        )
        self.hovered.emit(query)
