"""How a heatmap names its tokens: their labels along its axes (thinned out to fit, the hovered one always
drawn, in bold on a highlight), and the readout line under it that names the cell under the mouse."""

from __future__ import annotations

import math
from collections import OrderedDict

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPaintEngine, QPainter, QPen, QPixmap

from explorer.common.heatmap_layout import label_ticks, short_label

HOVER_LABEL_BRUSH = QColor(255, 236, 160)


class TokenAxis(pg.AxisItem):
    """Token names at cell centres (cell i spans i..i+1): every k-th one, k chosen so that they fit the
    axis' pixels, plus the hovered token's, always, in bold on a highlight. A bottom axis draws its labels
    rotated by 90° so long WordPieces do not collide, or `upright` when its cells are few and wide (the logit
    lens' masked positions): one line of text high instead of the longest label's width. `name_positions` False: the
    labels are numbers already (heads 1..H), so a thinned axis shows "9", not "8 9"."""

    def __init__(self, orientation: str, point_size: int = 8, upright: bool = False, name_positions: bool = True):
        super().__init__(orientation)
        self.upright = upright and orientation in ("top", "bottom")
        self.name_positions = name_positions
        self.labels: list[str] = []
        self.label_positions: list[int] = []  # original position of each label, shown when labels are thinned
        self.stride = 1
        self.numbered = False  # labels say their position: thinned out, or a zoomed view shows only some
        self.hovered = -1  # index of the hovered row / column, named whatever the stride
        self.font = QFont()
        self.font.setPointSize(point_size)
        self.bold_font = QFont(self.font)
        self.bold_font.setBold(True)
        self.setStyle(tickFont=self.font, tickLength=-3)
        # token names carry no unit to scale; left on, every new range rewrites the (empty) label's HTML and
        # re-lays the axis out (a keystroke moves the range of both axes of every heatmap)
        self.enableAutoSIPrefix(False)
        self.min_spacing_px = QFontMetrics(self.font).height() + 1

    def set_labels(self, labels: list[str], positions=None) -> None:
        shortened = [short_label(label) for label in labels]
        label_positions = list(range(len(labels))) if positions is None else [int(p) for p in positions]
        if shortened and shortened == self.labels and label_positions == self.label_positions and self.hovered < 0:
            return  # the same names (a lens' layers, each keystroke): the axis drawn for them stands
        self.labels, self.label_positions = shortened, label_positions
        self.hovered = -1
        # the widest numbered name, "12 king", as the number's width plus the name's, each measured once per text (a
        # keystroke brings one new name and shifts the numbers of those after it); + 1: the two rounded widths may
        # fall a pixel short of the whole
        bold = self.bold_font.key()  # (a font's key takes as long as a remembered width: once, not per name)
        widest = max(((text_width(self.bold_font, f"{position} ", bold) if self.name_positions else 0)
                      + text_width(self.bold_font, label, bold) + 1
                      for position, label in zip(self.label_positions, self.labels, strict=True)), default=20)
        if self.orientation in ("left", "right"):
            self.setWidth(widest + 10)
        elif self.upright:
            self.min_spacing_px = widest + 8  # side by side, labels need their width
            self.setHeight(QFontMetrics(self.font).height() + 8)
        else:
            self.setHeight(widest + 10)
        self.picture = None
        self.update()

    def set_hovered(self, index: int) -> None:
        if index != self.hovered:
            self.hovered = index
            self.picture = None
            self.update()

    def _text(self, index: int, numbered: bool) -> str:
        # thinned out or zoomed in, each label says which position it is, so the gaps can be counted and a part
        # of a long input placed
        if numbered and self.name_positions:
            return f"{self.label_positions[index]} {self.labels[index]}"
        return self.labels[index]

    def tickValues(self, minVal, maxVal, size):
        if not self.labels or size <= 0:
            return []
        ticks = label_ticks(minVal, maxVal, len(self.labels), size, self.min_spacing_px)
        if ticks is None:
            return []
        self.stride, centres = ticks
        low, high = sorted((minVal, maxVal))
        self.numbered = self.stride > 1 or low > 0.5 or high < len(self.labels) - 0.5
        return [(self.stride, centres)]

    def tickStrings(self, values, scale, spacing):
        return [self._text(int(value), self.numbered) if 0 <= int(value) < len(self.labels) else ""
                for value in values]

    def generateDrawSpecs(self, p):
        # pyqtgraph drops labels that poke past the axis ends; we place (and rotate) them ourselves. Its line and
        # ticks are made here too, as AxisItem makes them for one level of ticks and no grid, without its generic
        # machinery (half of a keystroke's cost of the head detail's two axes).
        bounds = self.mapRectFromParent(self.geometry())
        vertical = self.orientation in ("left", "right")
        length = bounds.height() if vertical else bounds.width()
        if length <= 0:
            return None
        low, high = self.range
        levels = self.tickValues(low, high, length) if high != low else []
        axis_spec, tick_specs = self._line_and_ticks(bounds, levels[0][1] if levels else [])
        if high == low:
            return axis_spec, tick_specs, []
        # a cell cut by the edge of a zoomed view is named only while its centre is in view (nudged in, the
        # names of the cells on both sides of an edge would be written over each other)
        values = [value for value in (levels[0][1] if levels else []) if min(low, high) <= value <= max(low, high)]
        text_height = QFontMetrics(self.font).height()

        metrics = QFontMetrics(self.bold_font)

        def place(value: float, text: str = "") -> QRectF:
            # the first and last labels are nudged inside the axis, where they are not clipped
            if vertical:  # value -> y exactly as AxisItem maps it (handles an inverted view)
                y = bounds.height() - (value - low) / (high - low) * bounds.height()
                y = min(max(y, text_height / 2), bounds.height() - text_height / 2)
                return QRectF(0, y - text_height / 2, bounds.width() - 6, text_height)
            x = (value - low) / (high - low) * bounds.width()
            if self.upright:  # as wide as its own text, so "1" nudged in from the end does not crowd out "3"
                half = min(metrics.horizontalAdvance(text.lstrip("\0")) / 2 + 3 if text else self.min_spacing_px / 2,
                           bounds.width() / 2)
                x = min(max(x, half), bounds.width() - half)
                return QRectF(x - half, 4, 2 * half, text_height)
            x = min(max(x, text_height / 2), bounds.width() - text_height / 2)
            return QRectF(x, 5, bounds.height() - 6, text_height)  # unrotated; drawPicture rotates

        hovered = self.hovered if 0 <= self.hovered < len(self.labels) else -1
        hovered_centre = hovered + 0.5
        flags = Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop if self.upright \
            else Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
        room = self.min_spacing_px if self.upright else text_height * 1.1

        def extent(rect: QRectF) -> tuple[float, float]:
            """The stretch of the axis a placed label covers (a rotated one: its line's height across it)."""
            if vertical:
                return rect.top(), rect.bottom()
            if self.upright:
                return rect.left(), rect.right()
            return rect.x() - text_height / 2, rect.x() + text_height / 2

        text_specs = []
        last = None  # the stretch of the label placed before: an end label nudged inside must not overlap it
        for value, text in zip(values, self.tickStrings(values, 1, 1), strict=True):
            if hovered >= 0:  # leave room for the hovered label
                gap_px = abs(value - hovered_centre) * length / abs(high - low)  # (inverted: high < low)
                if gap_px < room:
                    continue
            rect = place(value, text)
            start, end = extent(rect)
            if last is not None and start < last[1] and end > last[0]:
                continue
            last = (start, end)
            text_specs.append((rect, flags, text))
        if hovered >= 0:
            hovered_text = self._text(hovered, self.numbered)
            text_specs.append((place(hovered_centre, hovered_text), flags, "\0" + hovered_text))
        return axis_spec, tick_specs, text_specs

    def _line_and_ticks(self, bounds: QRectF, centres) -> tuple[tuple, list[tuple]]:
        """The axis line along the plot's edge (AxisItem's one-pixel offsets) and a tick at each centre (value ->
        pixel as AxisItem maps it, an inverted view included), with AxisItem's pens and tick length."""
        low, high = self.range
        vertical = self.orientation in ("left", "right")
        edge = {"left": bounds.right(), "right": bounds.left(), "top": bounds.bottom(), "bottom": bounds.top()}
        side = edge[self.orientation]  # where the axis meets the plot
        away = 1.0 if self.orientation in ("right", "bottom") else -1.0  # from the plot's edge into the axis
        if vertical:
            line = (QPointF(side + away, bounds.top() - 1), QPointF(side + away, bounds.bottom() + 1))
        else:
            line = (QPointF(bounds.left() - 1, side + away), QPointF(bounds.right() + 1, side + away))
        tick_pen = QPen(self.tickPen())
        opaque = QColor(tick_pen.color())
        opaque.setAlpha(255)  # AxisItem's first level of ticks
        tick_pen.setColor(opaque)
        tick_end = side + self.style["tickLength"] * away  # (a negative length points into the plot)
        ticks = []
        if high != low:
            scale = (-bounds.height() if vertical else bounds.width()) / (high - low)
            offset = low * scale - (bounds.height() if vertical else 0.0)
            first, last = sorted((low * scale - offset, high * scale - offset))
            for value in centres:
                at = value * scale - offset
                if first <= at <= last:
                    ticks.append((tick_pen, QPointF(side, at), QPointF(tick_end, at)) if vertical
                                 else (tick_pen, QPointF(at, side), QPointF(at, tick_end)))
        return (self.pen(), *line), ticks

    def paint(self, p, opt, widget):
        """pyqtgraph records an axis into a QPicture and plays that back: twice the drawing of its text, and a
        keystroke changes the names. Here the specs are kept instead, and each name not hovered is a small picture of
        its own, made once per text (`LabelPictures`): a keystroke that changes one token redraws one name."""
        if self.picture is None:  # pyqtgraph drops `picture` whenever the axis must be drawn afresh
            self.picture = self.generateDrawSpecs(p)  # here it holds the specs: (line, ticks, names), or None
        if self.picture is not None:
            p.save()
            self.drawPicture(p, *self.picture)
            p.restore()

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):
        super().drawPicture(p, axisSpec, tickSpecs, [])
        p.setPen(self.textPen())
        rotated = self.orientation not in ("left", "right") and not self.upright
        # in pixels (the screen, a PNG) the names are pictures; into an SVG (or any other vector device) they go as text
        pictures = LABEL_PICTURES if p.paintEngine().type() == QPaintEngine.Type.Raster else None
        font_key, colour = self.font.key(), self.textPen().color()
        for rect, flags, text in textSpecs:
            hovered = text.startswith("\0")
            text = text.lstrip("\0")
            if pictures is not None and not hovered:
                pictures.draw(p, rect, int(flags), text, self.font, colour, rotated, font_key)
                continue
            p.setFont(self.bold_font if hovered else self.font)
            p.save()
            if rotated:
                p.translate(rect.x(), rect.y())
                p.rotate(-90)  # text runs upwards, ending just under the cell it names
                rect = QRectF(-rect.width(), -rect.height() / 2, rect.width(), rect.height())
            if hovered:
                width = QFontMetrics(self.bold_font).horizontalAdvance(text) + 6
                left = rect.center().x() - width / 2 if self.upright else rect.right() - width + 3
                p.fillRect(QRectF(left, rect.top(), width, rect.height()), HOVER_LABEL_BRUSH)
            p.drawText(rect, int(flags), text)
            p.restore()


_WIDTHS: dict[tuple[str, str], int] = {}


def text_width(font: QFont, text: str, font_key: str | None = None) -> int:
    """QFontMetrics(font).horizontalAdvance(text), remembered (the first 50,000 texts of each run). font_key:
    font.key(), when the caller has it."""
    key = (font_key or font.key(), text)
    width = _WIDTHS.get(key)
    if width is None:
        width = QFontMetrics(font).horizontalAdvance(text)
        if len(_WIDTHS) < 50_000:
            _WIDTHS[key] = width
    return width


class LabelPictures:
    """Token names drawn once into small transparent pictures, kept by (text, box, alignment, font, colour, turn,
    pixel ratio), least recently used dropped past `capacity`. A rotated name is drawn turned into its picture, so
    placing it is a plain copy."""

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self._pictures: OrderedDict[tuple, QPixmap] = OrderedDict()

    def __len__(self) -> int:
        return len(self._pictures)

    def draw(self, p: QPainter, rect: QRectF, flags: int, text: str, font: QFont, colour: QColor,
             rotated: bool, font_key: str | None = None) -> None:
        """Draws `text` as p.drawText(rect, flags, text) would, or, `rotated`, turned a quarter anticlockwise about
        rect's top-left corner with its line centred there (the bottom axis' names). font_key: font.key(), when the
        caller has it (computing it costs as much as drawing a remembered name)."""
        width, height = math.ceil(rect.width()), math.ceil(rect.height())
        if width <= 0 or height <= 0 or not text:
            return
        ratio = p.device().devicePixelRatioF()
        key = (text, width, height, flags, font_key or font.key(), colour.rgba(), rotated, ratio)
        picture = self._pictures.get(key)
        if picture is None:
            picture = self._make(text, width, height, flags, font, colour, rotated, ratio)
            self._pictures[key] = picture
            if len(self._pictures) > self.capacity:
                self._pictures.popitem(last=False)
        else:
            self._pictures.move_to_end(key)
        if rotated:
            p.drawPixmap(QPointF(round(rect.x() - height / 2), round(rect.y())), picture)
        else:
            p.drawPixmap(QPointF(round(rect.x()), round(rect.y())), picture)

    @staticmethod
    def _make(text: str, width: int, height: int, flags: int, font: QFont, colour: QColor, rotated: bool,
              ratio: float) -> QPixmap:
        size = (height, width) if rotated else (width, height)
        image = QImage(math.ceil(size[0] * ratio), math.ceil(size[1] * ratio),
                       QImage.Format.Format_ARGB32_Premultiplied)
        image.setDevicePixelRatio(ratio)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        painter.setFont(font)
        painter.setPen(colour)
        if rotated:  # (u, v) of the text's box -> (v, width - u): read upwards
            painter.translate(0, width)
            painter.rotate(-90)
        painter.drawText(QRectF(0, 0, width, height), flags, text)
        painter.end()
        return QPixmap.fromImage(image)


LABEL_PICTURES = LabelPictures()


class HoverReadout:
    """For a view with a `hover_label` and a `hovered(int)` signal: the one way a hover ends, and the hover read
    again when the view pans or zooms under a still mouse (`_rehover`, for views that zoom)."""

    IDLE_TEXT = " "
    _hover_inside = False
    _mouse_at = None  # the scene point its `_on_mouse_moved` was last given

    def _rehover(self, *_) -> None:
        """Connected to a zooming view's range change: a pan or a zoom brings another cell under the mouse."""
        if self._hover_inside and self._mouse_at is not None:
            self._on_mouse_moved(self._mouse_at)

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
