"""The tokens coloured by attribution (objectName `attributionView`), one column per method, side by side.

Each token is a chip in reading order, wrapped to its column's width, filled from the diverging map (blue ·
white · red, white at 0): red pushed the target's logit up, blue pulled it down. Each method has its own
symmetric scale (±its largest |score|), named over its column, since the methods do not share a unit (a gradient
norm is never negative, integrated gradients sum to the change of the logit). Hovering a chip names the token,
its position and its score under every method. The target's own position, when it has one, is framed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QScrollArea, QToolTip, QVBoxLayout, QWidget

from explorer.common._qt.heatmap_style import diverging_lookup

COLUMN_GAP = 14
CHIP_GAP = 3
PADDING = 3
TITLE_LINES = 2
MARK_PEN = QColor("#222222")


@dataclass(frozen=True)
class AttributionColumn:
    title: str  # the method in words
    caption: str  # its scale and check, e.g. "±0.83 · δ = 0.002"
    scores: np.ndarray  # (T,) float32


def chip_colour(value: float, scale: float) -> QColor:
    """The diverging map's colour for `value` on the symmetric scale ±`scale` (white at 0)."""
    lookup = diverging_lookup()
    if not np.isfinite(value) or scale <= 0:
        index = len(lookup) // 2
    else:
        index = round((max(-1.0, min(1.0, value / scale)) + 1.0) / 2.0 * (len(lookup) - 1))
    red, green, blue, _ = lookup[index]
    return QColor(int(red), int(green), int(blue))


class _Canvas(QWidget):
    """Paints the columns; lays the chips out again when its width or its data changes."""

    def __init__(self, view: AttributionView):
        super().__init__()
        self.view = view
        self.setMouseTracking(True)
        self.font_ = QFont(self.font())
        self.bold = QFont(self.font_)
        self.bold.setBold(True)
        self.chips: list[tuple[int, int, QRectF]] = []  # (column, position, rectangle)
        self._height = 40

    def layout_chips(self) -> None:
        view = self.view
        metrics = QFontMetrics(self.font_)
        line = metrics.height() + 2 * PADDING
        columns = view.columns or []
        self.chips = []
        width = max(120, self.width())
        column_width = (width - COLUMN_GAP * max(0, len(columns) - 1)) / max(1, len(columns))
        bottom = 0.0
        for index in range(len(columns)):
            left = index * (column_width + COLUMN_GAP)
            x, y = left, TITLE_LINES * (metrics.height() + 2)
            for position, token in enumerate(view.tokens):
                chip = metrics.horizontalAdvance(token) + 2 * PADDING
                if x + chip > left + column_width and x > left:
                    x, y = left, y + line + CHIP_GAP
                self.chips.append((index, position, QRectF(x, y, chip, line)))
                x += chip + CHIP_GAP
            bottom = max(bottom, y + line)
        self._height = int(bottom) + 4
        self.setMinimumHeight(self._height)
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(400, self._height)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.layout_chips()

    def paintEvent(self, event) -> None:
        view = self.view
        painter = QPainter(self)
        painter.fillRect(self.rect(), Qt.GlobalColor.white)
        if not view.columns and view.placeholder:
            painter.setPen(QColor("#555555"))
            painter.drawText(QRectF(self.rect()).adjusted(8, 8, -8, -8),
                             int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop | Qt.TextFlag.TextWordWrap),
                             view.placeholder)
        metrics = QFontMetrics(self.font_)
        columns = view.columns or []
        column_width = (self.width() - COLUMN_GAP * max(0, len(columns) - 1)) / max(1, len(columns))
        for index, column in enumerate(columns):
            left = index * (column_width + COLUMN_GAP)
            painter.setPen(Qt.GlobalColor.black)
            painter.setFont(self.bold)
            painter.drawText(QRectF(left, 0, column_width, metrics.height() + 2), int(Qt.AlignmentFlag.AlignLeft),
                             column.title)
            painter.setFont(self.font_)
            painter.setPen(QColor("#555555"))
            painter.drawText(QRectF(left, metrics.height() + 2, column_width, metrics.height() + 2),
                             int(Qt.AlignmentFlag.AlignLeft), column.caption)
        painter.setFont(self.font_)
        for index, position, rect in self.chips:
            column = columns[index]
            painter.fillRect(rect, chip_colour(float(column.scores[position]), view.scales[index]))
            if position in view.marked:
                pen = QPen(MARK_PEN)
                pen.setWidthF(2.0)
                painter.setPen(pen)
                painter.drawRect(rect.adjusted(1, 1, -1, -1))
            painter.setPen(QColor("#777777") if position in view.specials else Qt.GlobalColor.black)
            painter.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), view.tokens[position])
        painter.end()

    def chip_at(self, point: QPointF) -> tuple[int, int] | None:
        for index, position, rect in self.chips:
            if rect.contains(point):
                return index, position
        return None

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            hit = self.chip_at(QPointF(event.pos()))
            if hit is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPos(), self.view.describe(hit[1]), self)
            return True
        return super().event(event)


class AttributionView(QWidget):
    """`show_attributions(tokens, columns, marked, specials)`; `show_note(text)` when there is nothing to show."""

    positionHovered = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("attributionView")
        self.setAccessibleName("Token attributions")
        self.tokens: list[str] = []
        self.columns: list[AttributionColumn] = []
        self.scales: list[float] = []
        self.marked: set[int] = set()
        self.specials: set[int] = set()
        self.placeholder = ""  # said while there are no columns: why
        self.canvas = _Canvas(self)
        self.scroll = QScrollArea()
        self.scroll.setWidget(self.canvas)
        self.scroll.setWidgetResizable(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scroll)

    def show_attributions(self, tokens: list[str], columns: list[AttributionColumn], marked=(), specials=(),
                          placeholder: str = "") -> None:
        for column in columns:
            if len(column.scores) != len(tokens):
                raise ValueError(f"{column.title} has {len(column.scores)} scores for {len(tokens)} tokens; "
                                 "an attribution gives one score per position")
        self.tokens = list(tokens)
        self.columns = list(columns)
        self.scales = [float(np.nanmax(np.abs(column.scores))) if len(column.scores) else 0.0 for column in columns]
        self.marked, self.specials, self.placeholder = set(marked), set(specials), placeholder
        self.setAccessibleDescription("; ".join(f"{column.title} {column.caption}" for column in columns))
        self.canvas.layout_chips()

    def clear(self, placeholder: str = "") -> None:
        self.show_attributions([], [], placeholder=placeholder)

    def describe(self, position: int) -> str:
        """The hover text of one position: the token and its score under every method."""
        lines = [f"position {position}: {self.tokens[position]!r}"]
        lines += [f"{column.title}: {float(column.scores[position]):+.4g}" for column in self.columns]
        return "\n".join(lines)

    def chip_colour_at(self, column: int, position: int) -> QColor:
        """The fill of one chip (tests)."""
        return chip_colour(float(self.columns[column].scores[position]), self.scales[column])
