"""All layers x heads in one picture (bertviz's "model view" without 144 widgets).

explorer.inspector.attention_images draws the (L*c, H*c) picture (in the inspection worker, or in the panel when
an option changes); this view shows it, draws the cell grid and layer/head labels as single items, names
its colour scale on a colour bar, and maps clicks and hovers back to (layer, head) and token positions. It zooms
and pans (`explorer.common._qt.zoom_view`) to look at a few heads closely; a cell stays a block mean of the tokens (up
to 64 × 64 pixels a head): clicking one opens it in the head detail, which zooms down to single tokens.

Extension hooks: `set_head_frames(colours)` frames chosen heads in a colour (e.g. by importance or role);
`set_head_notes(texts, colours)` also writes a short note in each head's corner and keeps both in place
when the cells change size.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QSizePolicy, QVBoxLayout, QWidget

from explorer.common._qt.heatmap_style import HIGHLIGHT_PEN, SELECTED_PEN, insert_scale_bar, make_scale_bar, show_scale
from explorer.common._qt.picture_item import PictureItem
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import clear_curve, style_canvas, style_plot
from explorer.common._qt.token_axis import HoverReadout
from explorer.common._qt.zoom_view import ZoomViewBox
from explorer.common.attention_math import DEFAULT_COLOUR_SCALE, bin_edges
from explorer.common.heatmap_layout import shown_index
from explorer.inspector.attention_images import OverviewPicture

GRID_PEN = pg.mkPen((255, 255, 255), width=1.5, cosmetic=True)


class ModelOverview(HoverReadout, QWidget):
    headClicked = Signal(int, int)  # layer, head
    hovered = Signal(int)  # original position of the query row under the mouse, -1 when none
    cellHovered = Signal(int, int)  # original (query, key) positions under the mouse, (-1, -1) when none

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.num_layers = 0
        self.num_heads = 0
        self.cell = 1
        self.positions = np.zeros(0, np.intp)
        self.tokens: list[str] = []
        self.image = np.zeros((0, 0), np.float32)  # (L*c, H*c) the values drawn, for hovering
        self.frame_items: list[QGraphicsRectItem] = []
        self.note_items: list[pg.TextItem] = []
        self._notes: tuple = (None, None)  # (texts, colours) of set_head_notes
        self._hover_inside = False

        self.graphics = pg.GraphicsLayoutWidget()
        style_canvas(self.graphics)
        self.plot = style_plot(self.graphics.addPlot(viewBox=ZoomViewBox()))
        self.plot.invertY(True)
        # Square cells keep each head's pattern undistorted; the layer and head numbers are text beside the
        # image (not axes, which would stretch across whatever room the locked aspect leaves).
        self.plot.hideAxis("bottom")
        self.plot.hideAxis("left")
        self.plot.setAspectLocked(True)
        self.number_items: list[pg.TextItem] = []
        self.layer_kinds = None  # ModernBERT's global / local layers (set_layer_kinds)
        self.image_item = PictureItem()
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
        self.color_bar = make_scale_bar()
        insert_scale_bar(self.plot, self.color_bar)

        self.hover_label = plain_label(QLabel(" "))
        self.hover_label.setObjectName("overviewHoverLabel")
        # a hover readout names two tokens and a value: however long, it is cut rather than widening the window
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.hover_label)
        self.graphics.scene().sigMouseClicked.connect(self._on_mouse_clicked)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.plot.vb.sigRangeChanged.connect(self._rehover)

    def set_picture(self, picture: OverviewPicture, num_layers: int, num_heads: int, positions: np.ndarray,
                    tokens: list[str], scale: str = DEFAULT_COLOUR_SCALE) -> None:
        """A picture from attention_images.draw_overview: (L*cell, H*cell) values and their colours."""
        cell = picture.cell
        shape_changed = (num_layers, num_heads, cell) != (self.num_layers, self.num_heads, self.cell)
        self.image = picture.values
        self.cell, self.num_layers, self.num_heads = cell, num_layers, num_heads
        self.positions = np.asarray(positions, np.intp)
        self.tokens = tokens
        height, width = picture.image.shape[:2]
        self.image_item.set_picture(picture.image, QRectF(0, 0, width, height))  # one unit a pixel
        show_scale(self.color_bar, scale, picture.levels)
        if shape_changed:
            self._layout_grid()

    def set_layer_kinds(self, kinds) -> None:
        """Each layer's kind (family_display.LayerKind) beside its number, or plain numbers (None)."""
        if kinds != self.layer_kinds:
            self.layer_kinds = kinds
            if self.num_layers:
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
        for item in self.number_items:
            self.plot.vb.removeItem(item)
        margin = cell * 0.06
        self.number_items = [pg.TextItem("layer \\ head", color="#555", anchor=(1, 1))]
        self.number_items[0].setPos(-margin, -margin)
        kinds = self.layer_kinds if self.layer_kinds is not None and len(self.layer_kinds) == self.num_layers else None
        for layer in range(self.num_layers):
            # ModernBERT: each layer's number with its kind, G(lobal) or L(ocal), in the kind's colour
            text, colour = (str(layer + 1), "k") if kinds is None else (f"{layer + 1} {kinds[layer].short}",
                                                                        kinds[layer].colour)
            item = pg.TextItem(text, color=colour, anchor=(1, 0.5))
            item.setPos(-margin, (layer + 0.5) * cell)
            self.number_items.append(item)
        for head in range(self.num_heads):
            item = pg.TextItem(str(head + 1), color="k", anchor=(0.5, 1))
            item.setPos((head + 0.5) * cell, -margin)
            self.number_items.append(item)
        for item in self.number_items:
            self.plot.vb.addItem(item, ignoreBounds=True)
        pad = cell * (0.45 if kinds is None else 0.75)  # room for the layer (and kind) and head numbers
        edge = cell * 0.05  # so that the selected head's frame is not cut off at the right and bottom
        self.plot.vb.set_content(QRectF(-pad, -pad, max(1, width) + pad + edge, max(1, height) + pad + edge),
                                 min_span=cell)  # at most one head fills the view: its cells are block means
        self.plot.vb.view_all()
        self._place_notes()

    def view_all(self) -> None:
        """Zoom out to every layer and head."""
        self.plot.vb.view_all()

    def set_head_mask(self, head_mask: np.ndarray) -> None:
        """Grey veil over every switched-off head (one rect item per ablated head, reused)."""
        off = [(layer, head, None) for layer, head in np.argwhere(np.asarray(head_mask) < 0.5)]
        self._mark_cells(self.ablated_items, off, self._make_veil)

    def set_head_frames(self, colours) -> None:
        """Frame head (l, h) in `colours[l][h]` (anything pg.mkColor takes; None: no frame); None clears all."""
        wanted = [] if colours is None else [(layer, head, colour) for layer, row in enumerate(colours)
                                             for head, colour in enumerate(row) if colour is not None]
        self._mark_cells(self.frame_items, wanted, self._make_frame)

    def set_head_notes(self, texts, colours=None) -> None:
        """A short note in the corner of head (l, h)'s cell (`texts[l][h]`, "" for none) and its frame in
        `colours[l][h]`, as HeadGrid.set_head_notes does for one layer; None clears. Kept in place when the
        cells change size (a new input length)."""
        self._notes = (texts, colours)
        self._place_notes()

    def _place_notes(self) -> None:
        texts, colours = self._notes
        wanted = [] if texts is None else [(layer, head, text) for layer, row in enumerate(texts)
                                           for head, text in enumerate(row) if text]
        while len(self.note_items) < len(wanted):
            note = pg.TextItem("", color="w", fill=pg.mkBrush(0, 0, 0, 140), anchor=(0, 0))
            note.setZValue(9)
            self.plot.vb.addItem(note, ignoreBounds=True)
            self.note_items.append(note)
        for index, note in enumerate(self.note_items):
            note.setVisible(index < len(wanted))
            if index < len(wanted):
                layer, head, text = wanted[index]
                if note.toPlainText() != text:
                    note.setText(text)
                note.setPos(head * self.cell, layer * self.cell)
        self.set_head_frames(colours)

    def _mark_cells(self, items: list[QGraphicsRectItem], cells: list, make) -> None:
        """One rect item per (layer, head, colour) cell, from a pool that grows as needed; the rest hidden."""
        while len(items) < len(cells):
            items.append(make())
            self.plot.vb.addItem(items[-1], ignoreBounds=True)
        for index, item in enumerate(items):
            item.setVisible(index < len(cells))
            if index < len(cells):
                layer, head, colour = cells[index]
                if colour is not None:
                    pen = QPen(pg.mkColor(colour), 2)
                    pen.setCosmetic(True)
                    item.setPen(pen)
                item.setRect(QRectF(head * self.cell, layer * self.cell, self.cell, self.cell))

    @staticmethod
    def _make_veil() -> QGraphicsRectItem:
        veil = QGraphicsRectItem()
        veil.setBrush(QBrush(QColor(235, 235, 235, 215)))
        veil.setPen(QPen(Qt.PenStyle.NoPen))
        veil.setZValue(7)
        return veil

    @staticmethod
    def _make_frame() -> QGraphicsRectItem:
        frame = QGraphicsRectItem()
        frame.setZValue(7.5)
        return frame

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

    def highlight_position(self, position: int, key: int | None = None) -> None:
        """Lines along the row of the token at original `position` in every cell and down the column of the one at
        `key` (by default the same token); -1 or a hidden token: no line there."""
        key = position if key is None else key
        row, column = (self._cell_offset(position), self._cell_offset(key)) if self.num_layers else (None, None)
        if row is None and column is None:
            clear_curve(self.token_lines)
            return
        height, width = self.num_layers * self.cell, self.num_heads * self.cell
        xs, ys = [], []
        if column is not None:
            for head in range(self.num_heads):
                xs += [head * self.cell + column] * 2
                ys += [0, height]
        if row is not None:
            for layer in range(self.num_layers):
                xs += [0, width]
                ys += [layer * self.cell + row] * 2
        self.token_lines.setData(np.array(xs, float), np.array(ys, float))

    def _cell_offset(self, position: int) -> float | None:
        """Where the middle of the token at original `position` lies across a cell, in the cell's (possibly
        downsampled) pixels; None when it is -1 or hidden."""
        index = shown_index(self.positions, position)
        return (index + 0.5) * self.cell / len(self.positions) if index >= 0 else None

    def _clear_hover_marks(self) -> None:
        self.cellHovered.emit(-1, -1)

    def _on_mouse_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        layer, head, _, _ = self.cell_of(event.scenePos())
        if layer >= 0:
            self.headClicked.emit(layer, head)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        self._mouse_at = scene_pos
        layer, head, row, column = self.cell_of(scene_pos)
        if layer < 0:
            self._end_hover()
            return
        self._hover_inside = True
        query, key = int(self.positions[row]), int(self.positions[column])
        point = self.plot.vb.mapSceneToView(scene_pos)
        value = float(self.image[math.floor(point.y()), math.floor(point.x())])
        pooled = " (block mean)" if self.cell < len(self.positions) else ""
        self.hover_label.setText(
            f"layer {layer + 1}, head {head + 1}: {self.tokens[query]} ({query}) → {self.tokens[key]} ({key}): "
            f"{value:.4f}{pooled} — click to open"
        )
        self.hovered.emit(query)
        self.cellHovered.emit(query, key)
