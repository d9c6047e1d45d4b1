"""Heatmaps of attention heads: a labelled single-matrix view (head detail, rollout) and the head grid.

The views render what they are given (a layer's `attention_math.LayerView`, or one matrix with its token
labels and the original positions of its rows); the AttentionPanel decides what that is. Items are created
once and updated with setImage.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QPen
from PySide6.QtWidgets import (
    QCheckBox,
    QGraphicsRectItem,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from explorer._qt.head_marks import ScoreLegend, make_badge, score_colour, set_badge
from explorer.attention_math import LayerView

COLOR_MAP_NAME = "viridis"
HIGHLIGHT_BRUSH = QColor(255, 255, 255, 70)
HIGHLIGHT_PEN = QColor(255, 80, 80, 220)
SELECTED_PEN = QColor(255, 140, 0)
ABLATED_OPACITY = 0.18
MAX_LABEL_CHARS = 14
NICE_STRIDES = (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256)


def color_map() -> pg.ColorMap:
    return pg.colormap.get(COLOR_MAP_NAME)


def short_label(token: str) -> str:
    return token if len(token) <= MAX_LABEL_CHARS else token[: MAX_LABEL_CHARS - 1] + "…"


class TokenAxis(pg.AxisItem):
    """Token names at cell centres (cell i spans i..i+1), every n-th one when they would overlap.

    A bottom axis draws its labels rotated by 90° so long WordPieces do not collide.
    """

    def __init__(self, orientation: str, point_size: int = 8):
        super().__init__(orientation)
        self.labels: list[str] = []
        self.label_positions: list[int] = []  # original position of each label, shown when labels are thinned
        self.stride = 1
        self.font = QFont()
        self.font.setPointSize(point_size)
        self.setStyle(tickFont=self.font, tickLength=-3)
        self.min_spacing_px = QFontMetrics(self.font).height()

    def set_labels(self, labels: list[str], positions=None) -> None:
        self.labels = [short_label(label) for label in labels]
        self.label_positions = list(range(len(labels))) if positions is None else [int(p) for p in positions]
        widest = max((QFontMetrics(self.font).horizontalAdvance(f"{position} {label}")
                      for position, label in zip(self.label_positions, self.labels, strict=True)), default=20)
        if self.orientation in ("left", "right"):
            self.setWidth(widest + 10)
        else:
            self.setHeight(widest + 10)
        self.picture = None
        self.update()

    def tickValues(self, minVal, maxVal, size):
        if not self.labels or size <= 0:
            return []
        low, high = sorted((minVal, maxVal))
        first, last = max(0, math.floor(low)), min(len(self.labels) - 1, math.ceil(high))
        if last < first:
            return []
        wanted = (high - low) * self.min_spacing_px / size
        stride = next((nice for nice in NICE_STRIDES if nice >= wanted), NICE_STRIDES[-1])
        self.stride = stride
        start = math.ceil(first / stride) * stride
        return [(stride, [index + 0.5 for index in range(start, last + 1, stride)])]

    def tickStrings(self, values, scale, spacing):
        strings = []
        for value in values:
            index = int(value)
            if not 0 <= index < len(self.labels):
                strings.append("")
            elif self.stride > 1:  # thinned out: say which position each shown label is
                strings.append(f"{self.label_positions[index]} {self.labels[index]}")
            else:
                strings.append(self.labels[index])
        return strings

    def generateDrawSpecs(self, p):
        # pyqtgraph drops labels that poke past the axis ends; we place (and rotate) them ourselves.
        self.style["showValues"] = False
        specs = super().generateDrawSpecs(p)
        self.style["showValues"] = True
        if specs is None:
            return None
        axis_spec, tick_specs, _ = specs
        bounds = self.mapRectFromParent(self.geometry())
        low, high = self.range
        if high == low:
            return axis_spec, tick_specs, []
        vertical = self.orientation in ("left", "right")
        length = bounds.height() if vertical else bounds.width()
        levels = self.tickValues(low, high, length)
        values = levels[0][1] if levels else []
        metrics = QFontMetrics(self.font)
        text_height = metrics.height()
        text_specs = []
        for value, text in zip(values, self.tickStrings(values, 1, 1), strict=True):
            if vertical:  # value -> y exactly as AxisItem maps it (handles an inverted view)
                y = bounds.height() - (value - low) / (high - low) * bounds.height()
                rect = QRectF(0, y - text_height / 2, bounds.width() - 6, text_height)
                text_specs.append((rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, text))
            else:
                x = (value - low) / (high - low) * bounds.width()
                rect = QRectF(x, 5, bounds.height() - 6, text_height)  # unrotated; drawPicture rotates
                text_specs.append((rect, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, text))
        return axis_spec, tick_specs, text_specs

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):
        super().drawPicture(p, axisSpec, tickSpecs, [])
        p.setFont(self.font)
        p.setPen(self.textPen())
        for rect, flags, text in textSpecs:
            if self.orientation in ("left", "right"):
                p.drawText(rect, int(flags), text)
                continue
            p.save()
            p.translate(rect.x(), rect.y())
            p.rotate(-90)  # text runs upwards, ending just under the cell it names
            p.drawText(QRectF(-rect.width(), -rect.height() / 2, rect.width(), rect.height()), int(flags), text)
            p.restore()


def _band(parent_view: pg.ViewBox) -> QGraphicsRectItem:
    band = QGraphicsRectItem()
    band.setBrush(QBrush(HIGHLIGHT_BRUSH))
    pen = QPen(HIGHLIGHT_PEN)
    pen.setCosmetic(True)
    pen.setWidthF(1.2)
    band.setPen(pen)
    band.setZValue(10)
    band.setVisible(False)
    parent_view.addItem(band, ignoreBounds=True)
    return band


class HoverReadout:
    """For a view with a `hover_label` and a `hovered(int)` signal: the one way a hover ends."""

    IDLE_TEXT = " "
    _hover_inside = False

    def leaveEvent(self, event) -> None:
        self._end_hover()
        super().leaveEvent(event)

    def _end_hover(self) -> None:
        if self._hover_inside:
            self._hover_inside = False
            self.hover_label.setText(self.IDLE_TEXT)
            self._clear_hover_marks()
            self.hovered.emit(-1)

    def _clear_hover_marks(self) -> None:
        """What else a view shows while hovered (bands, crosshairs)."""


class TokenHeatmap(HoverReadout, QWidget):
    """One (t, t) matrix, large: token labels on both axes (queries down, keys across), a colour bar,
    the hovered cell's "query → key: probability", and a highlighted row/column for a token."""

    hovered = Signal(int)  # original position of the query row under the mouse, -1 when none
    cellHovered = Signal(int, int)  # original (query, key) positions, (-1, -1) when none

    def __init__(self, title: str = "", value_name: str = "attention", parent: QWidget | None = None):
        super().__init__(parent)
        self.value_name = value_name
        self.matrix = np.zeros((0, 0), np.float32)
        self.tokens: list[str] = []
        self.positions = np.zeros(0, np.intp)
        self._labels_key: tuple = ()
        self._hover_inside = False

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.graphics.ci.setContentsMargins(4, 4, 4, 4)
        self.left_axis = TokenAxis("left")
        self.bottom_axis = TokenAxis("bottom")
        self.plot = self.graphics.addPlot(axisItems={"left": self.left_axis, "bottom": self.bottom_axis})
        self.plot.setTitle(title, size="10pt", color="k")
        self.plot.invertY(True)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        for axis in (self.left_axis, self.bottom_axis):
            axis.setPen("k")
            axis.setTextPen("k")
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.image_item.setAutoDownsample(True)  # 512 tokens in ~500 px: average, do not drop, rows
        self.image_item.setColorMap(color_map())
        self.plot.addItem(self.image_item)
        self.color_bar = pg.ColorBarItem(values=(0, 1), colorMap=color_map(), interactive=False, width=14)
        self.color_bar.setImageItem(self.image_item, insert_in=self.plot)
        self.row_band = _band(self.plot.vb)
        self.column_band = _band(self.plot.vb)

        self.hover_label = QLabel(" ")
        self.hover_label.setObjectName("hoverLabel")
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 1)
        layout.addWidget(self.hover_label)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)

    def set_title(self, title: str) -> None:
        self.plot.setTitle(title, size="10pt", color="k")

    def set_matrix(self, matrix: np.ndarray, tokens: list[str], positions: np.ndarray,
                   levels: tuple[float, float]) -> None:
        """matrix (t, t): row i / column j are the tokens at original positions[i] / positions[j]."""
        self.matrix = matrix
        self.tokens = tokens
        self.positions = np.asarray(positions, np.intp)
        self.image_item.setImage(matrix, autoLevels=False, levels=levels)
        self.color_bar.setLevels(levels)
        labels_key = (tuple(tokens), tuple(self.positions.tolist()))
        if labels_key != self._labels_key:
            self._labels_key = labels_key
            labels = [tokens[position] for position in self.positions]
            self.left_axis.set_labels(labels, self.positions)
            self.bottom_axis.set_labels(labels, self.positions)
            length = max(1, len(labels))
            self.plot.vb.setRange(xRange=(0, length), yRange=(0, length), padding=0)

    def clear(self) -> None:
        self.set_matrix(np.zeros((0, 0), np.float32), [], np.zeros(0, np.intp), (0.0, 1.0))
        self.hover_label.setText(" ")
        self.highlight_position(-1)

    def _visible_index(self, position: int) -> int:
        hits = np.flatnonzero(self.positions == position)
        return int(hits[0]) if hits.size else -1

    def highlight_position(self, position: int) -> None:
        """Row and column of the token at original `position` (-1 or a hidden token: no highlight)."""
        index = self._visible_index(position) if position >= 0 else -1
        self._show_bands(index, index)

    def _show_bands(self, row: int, column: int) -> None:
        length = len(self.positions)
        self.row_band.setVisible(row >= 0)
        self.column_band.setVisible(column >= 0)
        if row >= 0:
            self.row_band.setRect(QRectF(0, row, length, 1))
        if column >= 0:
            self.column_band.setRect(QRectF(column, 0, 1, length))

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int]:
        """(row, column) of the visible matrix under a scene point, (-1, -1) outside it."""
        if not self.plot.vb.sceneBoundingRect().contains(scene_pos):
            return -1, -1
        point = self.plot.vb.mapSceneToView(scene_pos)
        row, column = math.floor(point.y()), math.floor(point.x())
        length = self.matrix.shape[0]
        if 0 <= row < length and 0 <= column < length:
            return row, column
        return -1, -1

    def describe_cell(self, row: int, column: int) -> str:
        query, key = int(self.positions[row]), int(self.positions[column])
        value = float(self.matrix[row, column])
        return (f"{self.tokens[query]} ({query}) → {self.tokens[key]} ({key}): "
                f"{self.value_name} {value:.4f}")

    def _clear_hover_marks(self) -> None:
        self._show_bands(-1, -1)
        self.cellHovered.emit(-1, -1)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        row, column = self.cell_at(scene_pos)
        if row < 0:
            self._end_hover()
            return
        self._hover_inside = True
        self.hover_label.setText(self.describe_cell(row, column))
        self._show_bands(row, column)
        self.hovered.emit(int(self.positions[row]))
        self.cellHovered.emit(int(self.positions[row]), int(self.positions[column]))


class HeadGrid(HoverReadout, QWidget):
    """Every head of one layer as a small heatmap with a shared colour scale, plus an on/off box per head.

    Left click selects a head (headClicked), right click or its box switches it off/on (headToggled).
    """

    HINT = "click a head: open it large · right-click or untick: switch it off"
    IDLE_TEXT = HINT
    headClicked = Signal(int)
    headToggled = Signal(int, bool)  # head, enabled
    hovered = Signal(int)  # original position of the query row under the mouse, -1 when none

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.graphics.ci.setSpacing(4)
        self.plots: list[pg.PlotItem] = []
        self.images: list[pg.ImageItem] = []
        self.row_bands: list[QGraphicsRectItem] = []
        self.column_bands: list[QGraphicsRectItem] = []
        self.checkboxes: list[QCheckBox] = []
        self.enabled = np.ones(0, bool)
        self.positions = np.zeros(0, np.intp)
        self.matrices = np.zeros((0, 0, 0), np.float32)
        self.tokens: tuple[str, ...] = ()
        self.selected_head = -1
        self.layer = 0
        self._hover_inside = False
        self.head_scores: np.ndarray | None = None  # (H,) head-lab marks, see set_head_annotations
        self.head_badges: list[str] | None = None
        self.head_details: list[str] | None = None
        self.badge_items: list[pg.TextItem] = []
        self.score_legend = ScoreLegend()

        self.toggle_row = QHBoxLayout()
        self.toggle_row.setContentsMargins(4, 0, 4, 0)
        self.toggle_row.setSpacing(6)
        self.toggle_caption = QLabel("Heads on:")
        self.toggle_row.addWidget(self.toggle_caption)
        self.toggle_row.addStretch(1)
        self.toggle_row.addWidget(self.score_legend)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.graphics, 1)
        self.hover_label = QLabel(self.HINT)
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

    def _build(self, num_heads: int) -> None:
        """(Re)creates the heads' items; only when the model's head count changes."""
        self.graphics.clear()
        for checkbox in self.checkboxes:
            self.toggle_row.removeWidget(checkbox)
            checkbox.deleteLater()
        self.plots, self.images, self.row_bands, self.column_bands, self.checkboxes = [], [], [], [], []
        self.badge_items = []
        columns = max(1, math.ceil(math.sqrt(num_heads)))
        cmap = color_map()
        for head in range(num_heads):
            plot = self.graphics.addPlot(row=head // columns, col=head % columns)
            plot.hideAxis("left")
            plot.hideAxis("bottom")
            plot.invertY(True)
            plot.setAspectLocked(True)
            plot.setMouseEnabled(False, False)
            plot.setMenuEnabled(False)
            plot.hideButtons()
            # the same explicit size hint for every head, or the title lengths ("head 7 · off") set the widths
            plot.setPreferredSize(120, 120)
            plot.setMinimumSize(40, 40)
            plot.titleLabel.setMinimumWidth(1)
            image = pg.ImageItem(axisOrder="row-major")
            image.setAutoDownsample(True)
            image.setColorMap(cmap)
            plot.addItem(image)
            self.plots.append(plot)
            self.images.append(image)
            self.badge_items.append(make_badge(plot.vb))
            self.row_bands.append(_band(plot.vb))
            self.column_bands.append(_band(plot.vb))
            checkbox = QCheckBox(str(head + 1))
            checkbox.setChecked(True)
            checkbox.setObjectName(f"headToggle{head}")
            checkbox.setAccessibleName(f"head {head + 1} on")
            checkbox.toggled.connect(lambda on, head=head: self.headToggled.emit(head, on))
            self.toggle_row.insertWidget(self.toggle_row.count() - 1, checkbox)
            self.checkboxes.append(checkbox)
        layout = self.graphics.ci.layout
        for column in range(columns):  # equal cells whatever the titles say
            layout.setColumnStretchFactor(column, 1)
        for row in range(math.ceil(num_heads / columns)):
            layout.setRowStretchFactor(row, 1)
        self.enabled = np.ones(num_heads, bool)
        self.selected_head = -1

    def show_layer(self, view: LayerView) -> None:
        """Every head of `view.layer`: its matrices (H, t, t), rows/columns at the original `view.positions`."""
        matrices = view.matrices
        if matrices.shape[0] != self.num_heads:
            self._build(matrices.shape[0])
        self.matrices, self.tokens = matrices, view.tokens
        self.positions = view.positions
        self.layer = view.layer
        length = max(1, matrices.shape[-1])
        for head, image in enumerate(self.images):
            image.setImage(matrices[head], autoLevels=False, levels=view.levels)
            self.plots[head].vb.setRange(xRange=(0, length), yRange=(0, length), padding=0)
        self.set_enabled(view.heads_on)

    def set_enabled(self, enabled: np.ndarray) -> None:
        enabled = np.asarray(enabled, bool)
        for head, on in enumerate(enabled):
            on = bool(on)
            self.images[head].setOpacity(1.0 if on else ABLATED_OPACITY)
            checkbox = self.checkboxes[head]
            checkbox.blockSignals(True)
            checkbox.setChecked(on)
            checkbox.blockSignals(False)
            checkbox.setToolTip(f"layer {self.layer + 1}, head {head + 1}: {'on' if on else 'switched off'}")
        self.enabled = enabled.copy()
        self._update_titles()

    def select(self, head: int) -> None:
        self.selected_head = head
        self._update_titles()

    def set_head_annotations(self, scores: np.ndarray | None = None, badges: list[str] | None = None,
                             details: list[str] | None = None, caption: str | None = None) -> None:
        """Head-lab marks on this layer's heads; None for any of them: not drawn. scores (H,) in [0, 1] colour
        each head's frame (importance, explained by a legend showing `caption`; without scores the legend
        shows `caption` as a note), badges (H,) short role names at each head's corner, details (H,) a line
        the hover readout adds."""
        num_heads = self.num_heads
        self.head_scores = None if scores is None else np.asarray(scores, float).reshape(num_heads)
        self.head_badges = None if badges is None else [str(badge) for badge in badges][:num_heads]
        self.head_details = None if details is None else [str(line) for line in details][:num_heads]
        for head, badge in enumerate(self.badge_items):
            set_badge(badge, self.head_badges[head] if self.head_badges else "", 0, 0)
        self.score_legend.show_caption(caption, with_scale=self.head_scores is not None)
        self._update_titles()

    def _update_titles(self) -> None:
        for head, plot in enumerate(self.plots):
            on = head >= len(self.enabled) or self.enabled[head]
            selected = head == self.selected_head
            title = f"head {head + 1}" + ("" if on else " · off")
            color = "#d06000" if selected else ("k" if on else "#999999")
            pen = pg.mkPen(SELECTED_PEN, width=3) if selected else pg.mkPen("#cccccc", width=1)
            if self.head_scores is not None:  # importance: the frame is the head's score colour
                title += f" · {self.head_scores[head]:.2f}"
                pen = pg.mkPen(score_colour(self.head_scores[head]), width=7 if selected else 5)
            plot.setTitle(title, size="9pt", color=color, bold=selected)
            plot.vb.setBorder(pen)

    def highlight_position(self, position: int) -> None:
        hits = np.flatnonzero(self.positions == position) if position >= 0 else np.zeros(0)
        index = int(hits[0]) if hits.size else -1
        length = len(self.positions)
        for row_band, column_band in zip(self.row_bands, self.column_bands, strict=True):
            row_band.setVisible(index >= 0)
            column_band.setVisible(index >= 0)
            if index >= 0:
                row_band.setRect(QRectF(0, index, length, 1))
                column_band.setRect(QRectF(index, 0, 1, length))


    def head_at(self, scene_pos: QPointF) -> int:
        for head, plot in enumerate(self.plots):
            if plot.vb.sceneBoundingRect().contains(scene_pos):
                return head
        return -1

    def _on_mouse_clicked(self, event) -> None:
        head = self.head_at(event.scenePos())
        if head < 0:
            return
        if event.button() == Qt.MouseButton.RightButton:
            self.checkboxes[head].toggle()  # emits headToggled
        elif event.button() == Qt.MouseButton.LeftButton:
            self.headClicked.emit(head)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        head = self.head_at(scene_pos)
        row = column = -1
        if head >= 0:
            point = self.plots[head].vb.mapSceneToView(scene_pos)
            length = len(self.positions)
            if 0 <= point.y() < length and 0 <= point.x() < length:
                row, column = math.floor(point.y()), math.floor(point.x())
        if row < 0:
            self._end_hover()
            return
        self._hover_inside = True
        query, key = int(self.positions[row]), int(self.positions[column])
        detail = f" · {self.head_details[head]}" if self.head_details else ""
        self.hover_label.setText(
            f"head {head + 1}: {self.tokens[query]} ({query}) → {self.tokens[key]} ({key}): "
            f"{float(self.matrices[head, row, column]):.4f}{detail}")
        self.hovered.emit(query)
