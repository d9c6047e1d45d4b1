"""Every head of one layer at once: a grid of square thumbnails with a shared colour scale, each with an
on/off box.

The grid shows finished pictures (`explorer.inspector.attention_images`, one per head) and keeps the matrices beside
them for hovering; the attention panel decides what it shows. Thumbnails lie over the token grid, 0..t on
both axes inside each cell, so hovering and highlighting work in token units.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import (
    QCheckBox,
    QGraphicsItem,
    QGraphicsRectItem,
    QGraphicsSimpleTextItem,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from explorer.common._qt.heatmap_style import (
    ABLATED_OPACITY,
    HIGHLIGHT_PEN,
    SELECTED_PEN,
    colour_lookup,
    highlight_band,
)
from explorer.common._qt.picture_item import PictureItem
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import clear_curve, style_canvas
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.token_axis import HoverReadout
from explorer.common.attention_math import LayerView, colour_gamma, to_rgba
from explorer.common.heatmap_layout import GRID_GAP, grid_columns, picture_pixels, shown_index, thumbnail_side
from explorer.inspector.attention_images import fit

CELL_STEP = 1 + GRID_GAP  # scene units from one thumbnail's corner to the next (each thumbnail is 1 × 1)
LABEL_FILL = QColor(0, 0, 0, 140)
SELECTED_LABEL_FILL = QColor(208, 96, 0, 220)


class CornerLabel(QGraphicsRectItem):
    """A head's number (and note) in white on a dark patch at its thumbnail's top-left corner, the same size
    at any zoom. Qt's own items, so a keystroke's repaint of the grid makes no Python call for them."""

    PADDING = 4  # around the text, as wide as a text item's own margin

    def __init__(self, text: str):
        super().__init__()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations)
        self.setPen(QPen(Qt.PenStyle.NoPen))
        self.text_item = QGraphicsSimpleTextItem(self)
        self.text_item.setBrush(QBrush(Qt.GlobalColor.white))
        self.text_item.setPos(self.PADDING, self.PADDING / 2)
        self.show_text(text, LABEL_FILL)

    def text(self) -> str:
        return self.text_item.text()

    def show_text(self, text: str, fill: QColor) -> None:
        self.text_item.setText(text)
        bounds = self.text_item.boundingRect()
        self.setRect(QRectF(0, 0, bounds.width() + 2 * self.PADDING, bounds.height() + self.PADDING))
        self.setBrush(QBrush(fill))


class HeadGrid(HoverReadout, QWidget):
    """Every head of one layer as a thumbnail with a shared colour scale, plus an on/off box per head.

    One view holds every thumbnail (square, a small gap apart, laid out in as many columns as make them
    largest in the space there is), each numbered in its corner: no per-head title bars or axes. Left click
    selects a head (headClicked), right click or its box switches it off/on (headToggled).

    Extension hook: `set_head_notes(texts, colours)` writes a short note under each head's number and
    frames it in a colour (e.g. an importance score or a role); None clears them.
    """

    HINT = "click a head: open it large · right-click or untick: switch it off"
    IDLE_TEXT = HINT
    headClicked = Signal(int)
    headToggled = Signal(int, bool)  # head, enabled
    hovered = Signal(int)  # original position of the query row under the mouse, -1 when none
    cellHovered = Signal(int, int)  # original (query, key) positions under the mouse, (-1, -1) when none

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.graphics = pg.GraphicsLayoutWidget()
        style_canvas(self.graphics)
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        self.view = self.graphics.addViewBox()
        self.view.invertY(True)
        self.view.setAspectLocked(True)
        self.view.setMouseEnabled(False, False)
        self.view.setMenuEnabled(False)
        self.images: list[PictureItem] = []
        self.frames: list[QGraphicsRectItem] = []
        self.numbers: list[CornerLabel] = []
        self.checkboxes: list[QCheckBox] = []
        self.enabled = np.ones(0, bool)
        self.positions = np.zeros(0, np.intp)
        self.matrices = np.zeros((0, 0, 0), np.float32)
        self.tokens: tuple[str, ...] = ()
        self.selected_head = -1
        self.layer = 0
        self.columns = 1
        self._length = 1
        self._notes: list[str] | None = None
        self._note_colours: list | None = None
        self._highlighted = (-1, -1)  # (query, key) original positions the token lines mark
        self._hover_inside = False
        self.token_lines = pg.PlotCurveItem(pen=pg.mkPen(HIGHLIGHT_PEN, width=1, cosmetic=True), connect="pairs")
        self.token_lines.setZValue(6)
        self.view.addItem(self.token_lines, ignoreBounds=True)
        self.hover_band = highlight_band(self.view)

        self.toggle_row = QHBoxLayout()
        self.toggle_row.setContentsMargins(4, 0, 4, 0)
        self.toggle_row.setSpacing(4)
        self.toggle_caption = QLabel("Heads on:")
        self.toggle_row.addWidget(self.toggle_caption)
        self.toggle_row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        # ModernBERT: whether this layer attends globally or within a window (hidden for every other model)
        self.layer_kind_label = QLabel()
        self.layer_kind_label.setObjectName("layerKindLabel")
        self.layer_kind_label.setWordWrap(True)
        self.layer_kind_label.hide()
        layout.addWidget(self.layer_kind_label)
        layout.addWidget(self.graphics, 1)
        self.hover_label = plain_label(QLabel(self.HINT))
        self.hover_label.setObjectName("headGridHoverLabel")
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addLayout(self.toggle_row)
        layout.addWidget(self.hover_label)
        scene = self.graphics.scene()
        scene.sigMouseClicked.connect(self._on_mouse_clicked)
        scene.sigMouseMoved.connect(self._on_mouse_moved)

    @property
    def num_heads(self) -> int:
        return len(self.images)

    def thumbnail_pixels(self, num_heads: int | None = None) -> int:
        """The resolution each thumbnail's picture should have (its size on screen with `num_heads`, default
        the heads shown now, rounded up)."""
        size = self.graphics.viewport().size()
        return picture_pixels(thumbnail_side(num_heads or self.num_heads, size.width(), size.height()))

    def _build(self, num_heads: int) -> None:
        """(Re)creates the heads' items; only when the model's head count changes."""
        for item in self.images + self.frames + self.numbers:
            self.view.removeItem(item)
        for checkbox in self.checkboxes:
            self.toggle_row.removeWidget(checkbox)
            checkbox.deleteLater()
        self.images, self.frames, self.numbers, self.checkboxes = [], [], [], []
        for head in range(num_heads):
            image = PictureItem()
            self.view.addItem(image)
            frame = QGraphicsRectItem()
            frame.setZValue(8)
            self.view.addItem(frame, ignoreBounds=True)
            number = CornerLabel(str(head + 1))
            number.setZValue(9)
            self.view.addItem(number, ignoreBounds=True)
            checkbox = QCheckBox(str(head + 1))
            checkbox.setChecked(True)
            checkbox.setObjectName(f"headToggle{head}")
            checkbox.setAccessibleName(f"head {head + 1} on")
            checkbox.toggled.connect(lambda on, head=head: self.headToggled.emit(head, on))
            self.toggle_row.insertWidget(self.toggle_row.count() - 1, checkbox)
            self.images.append(image)
            self.frames.append(frame)
            self.numbers.append(number)
            self.checkboxes.append(checkbox)
        for before, after in itertools.pairwise(self.checkboxes):
            QWidget.setTabOrder(before, after)
        self.enabled = np.ones(num_heads, bool)
        self.selected_head = -1
        self.columns = 0  # lay out at the next show

    def show_layer(self, view: LayerView, thumbnails: np.ndarray | None = None) -> None:
        """Every head of `view.layer`: its matrices (H, t, t) and their pictures (H, s, s, 4) (drawn here when
        None), rows/columns at the original `view.positions`."""
        matrices = view.matrices
        if matrices.shape[0] != self.num_heads:
            self._build(matrices.shape[0])
        if thumbnails is None:
            thumbnails = to_rgba(fit(matrices, self.thumbnail_pixels()), view.levels, colour_lookup(),
                                 colour_gamma(view.options.colour_scale))
        self.matrices, self.tokens = matrices, view.tokens
        self.positions = view.positions
        self.layer = view.layer
        self._length = max(1, matrices.shape[-1])
        for head, image in enumerate(self.images):
            image.set_picture(thumbnails[head])
        # A thumbnail is one scene unit whatever the token count, so a keystroke (which usually changes the count)
        # moves no frame or label; each picture is scaled into its cell whatever its resolution.
        if self.columns == 0:
            self._layout()
        self.set_enabled(view.heads_on)
        self.highlight_position(*self._highlighted)

    def set_layer_kind(self, kind) -> None:
        """The shown layer's kind (family_display.LayerKind) above its heads, or nothing (None)."""
        self.layer_kind_label.setVisible(kind is not None)
        if kind is not None:
            self.layer_kind_label.setText(f"<b>{'Local' if kind.is_local else 'Global'} attention</b> — "
                                          f"{kind.description}")
            self.layer_kind_label.setStyleSheet(f"color: {kind.colour}; border-left: 4px solid {kind.colour}; "
                                                "padding-left: 4px;")

    # Scene units: each thumbnail is 1 × 1, GRID_GAP apart; token i of t spans [i / t, (i + 1) / t) of it.
    def _cell_origin(self, head: int) -> tuple[float, float]:
        return (head % self.columns) * CELL_STEP, (head // self.columns) * CELL_STEP

    def _layout(self) -> None:
        """Place the thumbnails in the number of columns that makes them largest."""
        size = self.graphics.viewport().size()
        self.columns = grid_columns(max(1, self.num_heads), max(1, size.width()), max(1, size.height()))
        for head, (image, frame, number) in enumerate(zip(self.images, self.frames, self.numbers, strict=True)):
            x, y = self._cell_origin(head)
            image.set_rect(QRectF(x, y, 1, 1))
            frame.setRect(QRectF(x, y, 1, 1))
            number.setPos(x, y)
        rows = math.ceil(max(1, self.num_heads) / self.columns)
        self.view.setRange(xRange=(0, self.columns * CELL_STEP - GRID_GAP), yRange=(0, rows * CELL_STEP - GRID_GAP),
                           padding=0.01)
        self.view.updateMatrix()  # now, not while painting (which would paint everything twice)
        self._update_frames()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.num_heads:
            size = self.graphics.viewport().size()
            if grid_columns(self.num_heads, max(1, size.width()), max(1, size.height())) != self.columns:
                self._layout()

    def set_enabled(self, enabled: np.ndarray) -> None:
        enabled = np.asarray(enabled, bool)
        for head, on in enumerate(enabled):  # each keystroke comes here: only what differs is touched
            on = bool(on)
            opacity = 1.0 if on else ABLATED_OPACITY
            if self.images[head].opacity() != opacity:
                self.images[head].setOpacity(opacity)
            checkbox = self.checkboxes[head]
            if checkbox.isChecked() != on:
                with blocked(checkbox):
                    checkbox.setChecked(on)
            tip = (f"Layer {self.layer + 1}, head {head + 1}: {'on' if on else 'switched off'} "
                   "(untick to switch it off and see what changes)")
            if checkbox.toolTip() != tip:
                checkbox.setToolTip(tip)
        self.enabled = enabled.copy()
        self._update_frames()

    def select(self, head: int) -> None:
        self.selected_head = head
        self._update_frames()

    def set_head_notes(self, texts: list[str] | None, colours: list | None = None) -> None:
        """A short note per head shown under its number (e.g. "0.82"), its frame in `colours[head]` (anything
        pg.mkColor takes); None clears. For analyses that rate heads (importance, roles)."""
        self._notes, self._note_colours = texts, colours
        self._update_frames()

    def head_label(self, head: int) -> str:
        """What the head's corner says: its number, "off" when switched off, and its note."""
        text = str(head + 1) + ("" if head >= len(self.enabled) or self.enabled[head] else " · off")
        if self._notes is not None and head < len(self._notes) and self._notes[head]:
            text += f"\n{self._notes[head]}"
        return text

    def _update_frames(self) -> None:
        """Frames and corner labels; each item is touched only when what it shows changes (a label's new text
        re-lays it out and repaints the view)."""
        for head, (frame, number) in enumerate(zip(self.frames, self.numbers, strict=True)):
            selected = head == self.selected_head
            if selected:
                colour, width = SELECTED_PEN, 3
            elif self._note_colours is not None and head < len(self._note_colours):
                colour, width = pg.mkColor(self._note_colours[head]), 2
            else:
                colour, width = QColor("#cccccc"), 1
            look = (colour.rgba(), width, self.head_label(head), selected)
            if getattr(frame, "look", None) == look:
                continue
            frame.look = look
            pen = QPen(colour, width)
            pen.setCosmetic(True)
            frame.setPen(pen)
            number.show_text(look[2], SELECTED_LABEL_FILL if selected else LABEL_FILL)

    def highlight_position(self, position: int, key: int | None = None) -> None:
        """Through every thumbnail, a line along the row of the token at original `position` and one down the
        column of the one at `key` (by default the same token); -1 or a hidden token: no line there."""
        key = position if key is None else key
        self._highlighted = (position, key)
        row, column = (self._visible_offset(position), self._visible_offset(key)) if self.num_heads else (None, None)
        if row is None and column is None:
            clear_curve(self.token_lines)
            return
        xs, ys = [], []
        for head in range(self.num_heads):
            x, y = self._cell_origin(head)
            if column is not None:
                xs += [x + column, x + column]
                ys += [y, y + 1]
            if row is not None:
                xs += [x, x + 1]
                ys += [y + row, y + row]
        self.token_lines.setData(np.array(xs, float), np.array(ys, float))

    def _visible_offset(self, position: int) -> float | None:
        """Where the middle of the token at original `position` lies across a thumbnail (0..1); None when it is
        -1 or hidden."""
        index = shown_index(self.positions, position)
        return (index + 0.5) / self._length if index >= 0 else None

    def cell_of(self, scene_pos: QPointF) -> tuple[int, int, int]:
        """(head, row, column) under a scene point; -1s outside every thumbnail."""
        if not self.num_heads or not self.view.sceneBoundingRect().contains(scene_pos):
            return -1, -1, -1
        point = self.view.mapSceneToView(scene_pos)
        column_index, row_index = math.floor(point.x() / CELL_STEP), math.floor(point.y() / CELL_STEP)
        head = row_index * self.columns + column_index
        if not (0 <= column_index < self.columns and 0 <= head < self.num_heads):
            return -1, -1, -1
        row = math.floor((point.y() - row_index * CELL_STEP) * self._length)
        column = math.floor((point.x() - column_index * CELL_STEP) * self._length)
        if not (0 <= row < self._length and 0 <= column < self._length):
            return -1, -1, -1  # in the gap between two thumbnails
        return head, row, column

    def head_at(self, scene_pos: QPointF) -> int:
        return self.cell_of(scene_pos)[0]

    def head_centre(self, head: int) -> QPointF:
        """The scene point at the middle of a head's thumbnail (tests, scripted clicks)."""
        x, y = self._cell_origin(head)
        return self.view.mapViewToScene(QPointF(x + 0.5, y + 0.5))

    def cell_centre(self, head: int, row: int, column: int) -> QPointF:
        x, y = self._cell_origin(head)
        return self.view.mapViewToScene(QPointF(x + (column + 0.5) / self._length, y + (row + 0.5) / self._length))

    def _on_mouse_clicked(self, event) -> None:
        head = self.head_at(event.scenePos())
        if head < 0:
            return
        if event.button() == Qt.MouseButton.RightButton:
            self.checkboxes[head].toggle()  # emits headToggled
        elif event.button() == Qt.MouseButton.LeftButton:
            self.headClicked.emit(head)

    def _clear_hover_marks(self) -> None:
        self.hover_band.setVisible(False)
        self.cellHovered.emit(-1, -1)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        head, row, column = self.cell_of(scene_pos)
        if head < 0:
            self._end_hover()
            return
        self._hover_inside = True
        query, key = int(self.positions[row]), int(self.positions[column])
        self.hover_label.setText(
            f"head {head + 1}: {self.tokens[query]} ({query}) → {self.tokens[key]} ({key}): "
            f"{float(self.matrices[head, row, column]):.4f}")
        x, y = self._cell_origin(head)
        self.hover_band.setRect(QRectF(x, y + row / self._length, 1, 1 / self._length))
        self.hover_band.setVisible(True)
        self.hovered.emit(query)
        self.cellHovered.emit(query, key)
