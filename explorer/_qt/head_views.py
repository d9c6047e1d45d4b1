"""Heatmaps of attention heads: a labelled single-matrix view (head detail, rollout, probe snapshot) and the
head grid.

The views draw finished pictures (`explorer.attention_images`: RGBA arrays the inspection worker or the
panel made) and keep the values beside them for hovering; the AttentionPanel decides what they show.
Every image is placed over the token grid, 0..t on both axes (queries down, keys across), whatever its
resolution, so hovering, highlighting and labels work in token units. Items are created once.

Whatever a view shows, the token under the mouse is named: in its hover line, and on its axes (the
hovered row's and column's labels are drawn even where the labels are thinned out).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
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

from explorer.attention_images import MatrixPicture, draw_matrix, fit
from explorer.attention_math import (
    DEFAULT_COLOUR_SCALE,
    LayerView,
    colour_gamma,
    describe_scale,
    to_rgba,
)

COLOR_MAP_NAME = "viridis"
HIGHLIGHT_BRUSH = QColor(255, 255, 255, 70)
HIGHLIGHT_PEN = QColor(255, 80, 80, 220)
SELECTED_PEN = QColor(255, 140, 0)
HOVER_LABEL_BRUSH = QColor(255, 236, 160)
ABLATED_OPACITY = 0.18
MAX_LABEL_CHARS = 12
NICE_STRIDES = (1, 2, 3, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256)
GRID_GAP = 0.05  # space between thumbnails, as a fraction of a thumbnail
PIXEL_QUANTUM = 32  # picture sizes are rounded up to this many pixels, so a small resize reuses them


def color_map() -> pg.ColorMap:
    return pg.colormap.get(COLOR_MAP_NAME)


@lru_cache(maxsize=1)
def colour_lookup() -> np.ndarray:
    """(256, 4) uint8: the colour table every attention picture is drawn with."""
    return np.ascontiguousarray(color_map().getLookupTable(nPts=256, alpha=True), dtype=np.uint8)


@lru_cache(maxsize=8)
def scale_color_map(gamma: float) -> pg.ColorMap:
    """The colour map as a colour bar over linear values must show it: fraction f has the colour at f**gamma."""
    if gamma == 1.0:
        return color_map()
    stops = np.linspace(0.0, 1.0, 65)
    colours = color_map().map(stops, mode="byte")
    return pg.ColorMap(stops ** (1.0 / gamma), colours)


def picture_pixels(pixels: float) -> int:
    """A picture's resolution for a view `pixels` wide: rounded up, so a small resize keeps the picture."""
    return max(PIXEL_QUANTUM, math.ceil(pixels / PIXEL_QUANTUM) * PIXEL_QUANTUM)


def short_label(token: str) -> str:
    return token if len(token) <= MAX_LABEL_CHARS else token[: MAX_LABEL_CHARS - 1] + "…"


class TokenAxis(pg.AxisItem):
    """Token names at cell centres (cell i spans i..i+1): every k-th one, k chosen so that they fit the
    axis' pixels, plus the hovered token's, always, in bold on a highlight. A bottom axis draws its labels
    rotated by 90° so long WordPieces do not collide."""

    def __init__(self, orientation: str, point_size: int = 8):
        super().__init__(orientation)
        self.labels: list[str] = []
        self.label_positions: list[int] = []  # original position of each label, shown when labels are thinned
        self.stride = 1
        self.hovered = -1  # index of the hovered row / column, named whatever the stride
        self.font = QFont()
        self.font.setPointSize(point_size)
        self.bold_font = QFont(self.font)
        self.bold_font.setBold(True)
        self.setStyle(tickFont=self.font, tickLength=-3)
        self.min_spacing_px = QFontMetrics(self.font).height() + 1

    def set_labels(self, labels: list[str], positions=None) -> None:
        self.labels = [short_label(label) for label in labels]
        self.label_positions = list(range(len(labels))) if positions is None else [int(p) for p in positions]
        self.hovered = -1
        metrics = QFontMetrics(self.bold_font)
        widest = max((metrics.horizontalAdvance(self._text(index, thinned=True)) for index in range(len(labels))),
                     default=20)
        if self.orientation in ("left", "right"):
            self.setWidth(widest + 10)
        else:
            self.setHeight(widest + 10)
        self.picture = None
        self.update()

    def set_hovered(self, index: int) -> None:
        if index != self.hovered:
            self.hovered = index
            self.picture = None
            self.update()

    def _text(self, index: int, thinned: bool) -> str:
        # thinned out: each label says which position it is, so the gaps can be counted
        return f"{self.label_positions[index]} {self.labels[index]}" if thinned else self.labels[index]

    def tickValues(self, minVal, maxVal, size):
        if not self.labels or size <= 0:
            return []
        low, high = sorted((minVal, maxVal))
        first, last = max(0, math.floor(low)), min(len(self.labels) - 1, math.ceil(high))
        if last < first:
            return []
        wanted = (high - low) * self.min_spacing_px / size
        stride = next((nice for nice in NICE_STRIDES if nice >= wanted), math.ceil(wanted))
        self.stride = stride
        start = math.ceil(first / stride) * stride
        return [(stride, [index + 0.5 for index in range(start, last + 1, stride)])]

    def tickStrings(self, values, scale, spacing):
        return [self._text(int(value), self.stride > 1) if 0 <= int(value) < len(self.labels) else ""
                for value in values]

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
        values = list(levels[0][1]) if levels else []
        text_height = QFontMetrics(self.font).height()

        def place(value: float) -> QRectF:
            # the first and last labels are nudged inside the axis, where they are not clipped
            if vertical:  # value -> y exactly as AxisItem maps it (handles an inverted view)
                y = bounds.height() - (value - low) / (high - low) * bounds.height()
                y = min(max(y, text_height / 2), bounds.height() - text_height / 2)
                return QRectF(0, y - text_height / 2, bounds.width() - 6, text_height)
            x = (value - low) / (high - low) * bounds.width()
            x = min(max(x, text_height / 2), bounds.width() - text_height / 2)
            return QRectF(x, 5, bounds.height() - 6, text_height)  # unrotated; drawPicture rotates

        hovered = self.hovered if 0 <= self.hovered < len(self.labels) else -1
        hovered_centre = hovered + 0.5
        text_specs = []
        for value, text in zip(values, self.tickStrings(values, 1, 1), strict=True):
            if hovered >= 0:  # leave room for the hovered label
                gap_px = abs(value - hovered_centre) * length / abs(high - low)  # (inverted: high < low)
                if gap_px < text_height * 1.1:
                    continue
            text_specs.append((place(value), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, text))
        if hovered >= 0:
            flags = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
            text_specs.append((place(hovered_centre), flags, "\0" + self._text(hovered, self.stride > 1)))
        return axis_spec, tick_specs, text_specs

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):
        super().drawPicture(p, axisSpec, tickSpecs, [])
        p.setPen(self.textPen())
        for rect, flags, text in textSpecs:
            hovered = text.startswith("\0")
            text = text.lstrip("\0")
            p.setFont(self.bold_font if hovered else self.font)
            p.save()
            if self.orientation not in ("left", "right"):
                p.translate(rect.x(), rect.y())
                p.rotate(-90)  # text runs upwards, ending just under the cell it names
                rect = QRectF(-rect.width(), -rect.height() / 2, rect.width(), rect.height())
            if hovered:
                width = QFontMetrics(self.bold_font).horizontalAdvance(text) + 6
                p.fillRect(QRectF(rect.right() - width + 3, rect.top(), width, rect.height()), HOVER_LABEL_BRUSH)
            p.drawText(rect, int(flags), text)
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


def make_scale_bar() -> pg.ColorBarItem:
    """A colour bar that only shows the scale (the views colour their pictures themselves)."""
    bar = pg.ColorBarItem(values=(0, 1), colorMap=color_map(), interactive=False, width=12)
    font = QFont()  # (QFont("", 8) crashes PySide6 6.11 when the axis measures its text)
    font.setPointSize(8)
    bar.axis.setStyle(hideOverlappingLabels=8, tickFont=font)  # end labels may poke out 8 px
    bar.axis.setWidth(46)
    bar.getAxis("left").setWidth(16)
    return bar


def show_scale(bar: pg.ColorBarItem, scale: str, levels: tuple[float, float]) -> None:
    """Point `bar` at `levels` drawn through `scale` (its colours, its range and its name, on the bar).
    Only what changed is redone: a new colour map rebuilds the bar's pixmap, a new label re-lays its text."""
    color_map = scale_color_map(colour_gamma(scale))
    if bar.colorMap() is not color_map:
        bar.setColorMap(color_map)
    if tuple(bar.levels()) != tuple(levels):
        bar.setLevels(levels)
    label = describe_scale(scale, levels)
    axis = bar.getAxis("left")
    if axis.labelText != label:
        axis.setLabel(label, **{"font-size": "8pt", "color": "#444"})


def insert_scale_bar(plot: pg.PlotItem, bar: pg.ColorBarItem) -> None:
    plot.layout.addItem(bar, 2, 5)  # beside the plot's right axis, as ColorBarItem's insert_in does
    plot.layout.setColumnFixedWidth(4, 5)


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
        """What else a view shows while hovered (bands, axis labels)."""


class TokenHeatmap(HoverReadout, QWidget):
    """One (t, t) matrix, large and square: token labels on both axes (queries down, keys across), a colour
    bar that names its scale, the hovered cell's "query → key: value", and a highlighted row/column."""

    hovered = Signal(int)  # original position of the query row under the mouse, -1 when none
    cellHovered = Signal(int, int)  # original (query, key) positions, (-1, -1) when none

    def __init__(self, title: str = "", value_name: str = "attention", parent: QWidget | None = None):
        super().__init__(parent)
        self.value_name = value_name
        self.matrix = np.zeros((0, 0), np.float32)
        self.levels = (0.0, 1.0)
        self.scale = DEFAULT_COLOUR_SCALE
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
        self.plot.setAspectLocked(True)  # square cells: a head's pattern keeps its shape
        self.plot.setMouseEnabled(False, False)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        for axis in (self.left_axis, self.bottom_axis):
            axis.setPen("k")
            axis.setTextPen("k")
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image_item)
        self.color_bar = make_scale_bar()
        insert_scale_bar(self.plot, self.color_bar)
        self.row_band = _band(self.plot.vb)
        self.column_band = _band(self.plot.vb)

        self.hover_label = QLabel(" ")
        self.hover_label.setObjectName("hoverLabel")
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # The plot is kept square (centred, as wide as it is tall) so that its axes sit at the image's edges.
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addStretch(1)
        row.addWidget(self.graphics, 100)
        row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(row, 1)
        layout.addWidget(self.hover_label)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)

    def set_title(self, title: str) -> None:
        self.plot.setTitle(title, size="10pt", color="k")

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_square()

    def _fit_square(self) -> None:
        """Give the graphics just the width that makes the plot's view square (what is around it: axes, the
        colour bar, the title, stays as it is)."""
        view = self.plot.vb.sceneBoundingRect()
        graphics = self.graphics.size()
        if view.width() <= 0 or view.height() <= 0:
            return
        around_x, around_y = graphics.width() - view.width(), graphics.height() - view.height()
        side = max(40.0, min(self.width() - around_x, graphics.height() - around_y))
        width = round(side + around_x)
        if abs(width - graphics.width()) > 1:
            self.graphics.setFixedWidth(min(self.width(), width))

    def image_pixels(self) -> int:
        """The resolution a picture for this view should have (the plot's current size, rounded up)."""
        rect = self.plot.vb.sceneBoundingRect()
        return picture_pixels(min(rect.width(), rect.height()) or 256)

    def set_matrix(self, matrix: np.ndarray, tokens, positions: np.ndarray, levels: tuple[float, float],
                   scale: str = DEFAULT_COLOUR_SCALE) -> None:
        """matrix (t, t): row i / column j are the tokens at original positions[i] / positions[j]; drawn here."""
        image = to_rgba(fit(matrix, self.image_pixels()), levels, colour_lookup(), colour_gamma(scale))
        self.show_picture(MatrixPicture((), matrix, image, levels), tokens, positions, scale)

    def show_picture(self, picture: MatrixPicture, tokens, positions: np.ndarray, scale: str) -> None:
        """A picture drawn elsewhere (`attention_images`), its values, their tokens and positions."""
        self.matrix, self.levels, self.scale = picture.matrix, picture.levels, scale
        self.tokens = list(tokens)
        self.positions = np.asarray(positions, np.intp)
        length = max(1, len(self.positions))
        self.image_item.setImage(picture.image, autoLevels=False)
        self.image_item.setRect(QRectF(0, 0, length, length))
        show_scale(self.color_bar, scale, picture.levels)
        labels_key = (tuple(self.tokens), tuple(self.positions.tolist()))
        if labels_key != self._labels_key:
            self._labels_key = labels_key
            labels = [self.tokens[position] for position in self.positions]
            self.left_axis.set_labels(labels, self.positions)
            self.bottom_axis.set_labels(labels, self.positions)
            self.plot.vb.setRange(xRange=(0, length), yRange=(0, length), padding=0)
            self.plot.vb.updateMatrix()  # now, not while painting (which would paint everything twice)
            QTimer.singleShot(0, self, self._fit_square)  # the axes' widths changed with their labels

    def draw_picture(self, matrix: np.ndarray, levels: tuple[float, float], scale: str) -> MatrixPicture:
        """The picture of `matrix` at this view's size (for callers that have no worker to draw it)."""
        from explorer.attention_images import PictureSpec
        from explorer.attention_math import ViewOptions

        spec = PictureSpec(0, 0, ViewOptions(colour_scale=scale), colour_lookup(), 0, self.image_pixels())
        return draw_matrix(matrix, levels, spec, ())

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
        self.left_axis.set_hovered(-1)
        self.bottom_axis.set_hovered(-1)
        self.cellHovered.emit(-1, -1)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        row, column = self.cell_at(scene_pos)
        if row < 0:
            self._end_hover()
            return
        self._hover_inside = True
        self.hover_label.setText(self.describe_cell(row, column))
        self._show_bands(row, column)
        self.left_axis.set_hovered(row)
        self.bottom_axis.set_hovered(column)
        self.hovered.emit(int(self.positions[row]))
        self.cellHovered.emit(int(self.positions[row]), int(self.positions[column]))


def grid_columns(num_heads: int, width: float, height: float, gap: float = GRID_GAP) -> int:
    """How many columns give `num_heads` square thumbnails the most room in width x height pixels."""
    best, best_size = 1, -1.0
    for columns in range(1, max(1, num_heads) + 1):
        rows = math.ceil(num_heads / columns)
        size = min(width / (columns + gap * (columns - 1)), height / (rows + gap * (rows - 1)))
        if size > best_size + 1e-9:
            best, best_size = columns, size
    return best


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

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        self.view = self.graphics.addViewBox()
        self.view.invertY(True)
        self.view.setAspectLocked(True)
        self.view.setMouseEnabled(False, False)
        self.view.setMenuEnabled(False)
        self.images: list[pg.ImageItem] = []
        self.frames: list[QGraphicsRectItem] = []
        self.numbers: list[pg.TextItem] = []
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
        self._highlighted = -1
        self._hover_inside = False
        self.token_lines = pg.PlotCurveItem(pen=pg.mkPen(HIGHLIGHT_PEN, width=1, cosmetic=True), connect="pairs")
        self.token_lines.setZValue(6)
        self.view.addItem(self.token_lines, ignoreBounds=True)
        self.hover_band = _band(self.view)

        self.toggle_row = QHBoxLayout()
        self.toggle_row.setContentsMargins(4, 0, 4, 0)
        self.toggle_row.setSpacing(4)
        self.toggle_caption = QLabel("Heads on:")
        self.toggle_row.addWidget(self.toggle_caption)
        self.toggle_row.addStretch(1)
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

    def thumbnail_pixels(self, num_heads: int | None = None) -> int:
        """The resolution each thumbnail's picture should have (its size on screen with `num_heads`, default
        the heads shown now, rounded up)."""
        size = self.graphics.viewport().size()
        heads = max(1, num_heads or self.num_heads)
        columns = grid_columns(heads, size.width(), size.height())
        rows = math.ceil(heads / columns)
        side = min(size.width() / (columns + GRID_GAP * (columns - 1)), size.height() / (rows + GRID_GAP * (rows - 1)))
        return picture_pixels(side)

    def _build(self, num_heads: int) -> None:
        """(Re)creates the heads' items; only when the model's head count changes."""
        for item in self.images + self.frames + self.numbers:
            self.view.removeItem(item)
        for checkbox in self.checkboxes:
            self.toggle_row.removeWidget(checkbox)
            checkbox.deleteLater()
        self.images, self.frames, self.numbers, self.checkboxes = [], [], [], []
        for head in range(num_heads):
            image = pg.ImageItem(axisOrder="row-major")
            self.view.addItem(image)
            frame = QGraphicsRectItem()
            frame.setZValue(8)
            self.view.addItem(frame, ignoreBounds=True)
            number = pg.TextItem(str(head + 1), color="w", fill=pg.mkBrush(0, 0, 0, 140), anchor=(0, 0))
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
        length = max(1, matrices.shape[-1])
        for head, image in enumerate(self.images):
            image.setImage(thumbnails[head], autoLevels=False)
        if length != self._length or self.columns == 0:
            self._length = length
            self._layout()
        self.set_enabled(view.heads_on)
        self.highlight_position(self._highlighted)

    def _cell_origin(self, head: int) -> tuple[float, float]:
        step = self._length * (1 + GRID_GAP)
        return (head % self.columns) * step, (head // self.columns) * step

    def _layout(self) -> None:
        """Place the thumbnails in the number of columns that makes them largest."""
        size = self.graphics.viewport().size()
        self.columns = grid_columns(max(1, self.num_heads), max(1, size.width()), max(1, size.height()))
        length = self._length
        for head, (image, frame, number) in enumerate(zip(self.images, self.frames, self.numbers, strict=True)):
            x, y = self._cell_origin(head)
            image.setRect(QRectF(x, y, length, length))
            frame.setRect(QRectF(x, y, length, length))
            number.setPos(x, y)
        rows = math.ceil(max(1, self.num_heads) / self.columns)
        step = length * (1 + GRID_GAP)
        self.view.setRange(xRange=(0, self.columns * step - length * GRID_GAP),
                           yRange=(0, rows * step - length * GRID_GAP), padding=0.01)
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
        for head, on in enumerate(enabled):
            on = bool(on)
            self.images[head].setOpacity(1.0 if on else ABLATED_OPACITY)
            checkbox = self.checkboxes[head]
            checkbox.blockSignals(True)
            checkbox.setChecked(on)
            checkbox.blockSignals(False)
            checkbox.setToolTip(f"Layer {self.layer + 1}, head {head + 1}: {'on' if on else 'switched off'} "
                                "(untick to switch it off and see what changes)")
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
            number.setText(look[2])
            number.fill = pg.mkBrush(208, 96, 0, 220) if selected else pg.mkBrush(0, 0, 0, 140)
            number.update()

    def highlight_position(self, position: int) -> None:
        """The token's row and column line through every thumbnail (-1 or a hidden token: none)."""
        self._highlighted = position
        hits = np.flatnonzero(self.positions == position) if position >= 0 else np.zeros(0)
        if not hits.size or not self.num_heads:
            if self.token_lines.xData is not None and len(self.token_lines.xData):
                self.token_lines.setData([], [])
            return
        offset, length = int(hits[0]) + 0.5, self._length
        xs, ys = [], []
        for head in range(self.num_heads):
            x, y = self._cell_origin(head)
            xs += [x + offset, x + offset, x, x + length]
            ys += [y, y + length, y + offset, y + offset]
        self.token_lines.setData(np.array(xs, float), np.array(ys, float))

    def cell_of(self, scene_pos: QPointF) -> tuple[int, int, int]:
        """(head, row, column) under a scene point; -1s outside every thumbnail."""
        if not self.num_heads or not self.view.sceneBoundingRect().contains(scene_pos):
            return -1, -1, -1
        point = self.view.mapSceneToView(scene_pos)
        step = self._length * (1 + GRID_GAP)
        column_index, row_index = math.floor(point.x() / step), math.floor(point.y() / step)
        head = row_index * self.columns + column_index
        if not (0 <= column_index < self.columns and 0 <= head < self.num_heads):
            return -1, -1, -1
        row = math.floor(point.y() - row_index * step)
        column = math.floor(point.x() - column_index * step)
        if not (0 <= row < self._length and 0 <= column < self._length):
            return -1, -1, -1  # in the gap between two thumbnails
        return head, row, column

    def head_at(self, scene_pos: QPointF) -> int:
        return self.cell_of(scene_pos)[0]

    def head_centre(self, head: int) -> QPointF:
        """The scene point at the middle of a head's thumbnail (tests, scripted clicks)."""
        x, y = self._cell_origin(head)
        return self.view.mapViewToScene(QPointF(x + self._length / 2, y + self._length / 2))

    def cell_centre(self, head: int, row: int, column: int) -> QPointF:
        x, y = self._cell_origin(head)
        return self.view.mapViewToScene(QPointF(x + column + 0.5, y + row + 0.5))

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
        self.hover_band.setRect(QRectF(x, y + row, self._length, 1))
        self.hover_band.setVisible(True)
        self.hovered.emit(query)
