"""Token axes never write two labels over each other, also where an end label is nudged inside the axis."""

import itertools

import pyqtgraph as pg
import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter

from explorer.common._qt.token_axis import LabelPictures, TokenAxis, text_width
from explorer.common.heatmap_layout import short_label
from tests.explorer.conftest import shown


def placed_labels(qtbot, axis: TokenAxis, count: int, size: tuple[int, int]) -> list:
    widget = shown(qtbot, pg.PlotWidget(axisItems={axis.orientation: axis}), size)
    labels = ["fox", "brown", "the", "over", "quick", "jumps"] * (count // 6 + 1)
    positions = [4 + 7 * index for index in range(count)]  # a lens names masked positions, far apart
    axis.set_labels(labels[:count], positions)
    widget.getPlotItem().setXRange(0, count, padding=0)
    widget.getPlotItem().setYRange(0, count, padding=0)
    qtbot.wait(20)
    canvas = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(canvas)
    try:
        return axis.generateDrawSpecs(painter)[2]
    finally:
        painter.end()


@pytest.mark.parametrize(("orientation", "upright"), [("bottom", True), ("bottom", False), ("left", False)])
def test_labels_do_not_overlap_along_the_axis(qtbot, orientation, upright):
    axis = TokenAxis(orientation, upright=upright)
    specs = placed_labels(qtbot, axis, 76, (300, 260))  # the logit lens at 509 tokens: 76 masked positions
    assert len(specs) >= 2
    vertical = orientation == "left"
    height = specs[0][0].height()
    stretches = sorted((rect.top(), rect.bottom()) if vertical else
                       (rect.left(), rect.right()) if upright else (rect.x() - height / 2, rect.x() + height / 2)
                       for rect, _, _ in specs)
    for (_, end), (start, _) in itertools.pairwise(stretches):
        assert start >= end, stretches


def drawn(size: tuple[int, int], draw) -> QImage:
    image = QImage(*size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    draw(painter)
    painter.end()
    return image


@pytest.mark.parametrize("rotated", [False, True])
def test_a_name_drawn_from_its_picture_looks_as_drawn_text(qapp, rotated):
    """On screen an axis draws each name from a picture made once: the same pixels as the text drawn in its place
    (turned, for the bottom axis' names, as its rotated text is)."""
    font = QFont()
    font.setPointSize(8)
    rect, flags, colour = QRectF(40, 70, 60, 14), int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), \
        QColor("black")

    def as_text(painter: QPainter) -> None:
        painter.setFont(font)
        painter.setPen(colour)
        box = rect
        if rotated:
            painter.translate(rect.x(), rect.y())
            painter.rotate(-90)
            box = QRectF(-rect.width(), -rect.height() / 2, rect.width(), rect.height())
        painter.drawText(box, flags, "windowsill")

    pictures = LabelPictures()
    from_picture = drawn((160, 160), lambda painter: pictures.draw(painter, rect, flags, "windowsill", font, colour,
                                                                    rotated))
    assert from_picture == drawn((160, 160), as_text)
    assert from_picture != drawn((160, 160), lambda painter: None)  # something was drawn


def test_a_name_s_picture_is_made_once_and_the_oldest_dropped_past_capacity(qapp):
    pictures = LabelPictures(capacity=2)
    font = QFont()
    flags = int(Qt.AlignmentFlag.AlignLeft)
    made = []
    original = pictures._make
    pictures._make = lambda *args: (made.append(args[0]), original(*args))[1]
    for text in ("the", "cat", "the", "sat", "cat"):
        drawn((50, 50), lambda painter, text=text: pictures.draw(painter, QRectF(0, 0, 40, 14), flags, text, font,
                                                               QColor("black"), False))
    assert made == ["the", "cat", "sat", "cat"] and len(pictures) == 2  # "the" reused; "cat" dropped for "sat"


def test_a_left_axis_is_as_wide_as_its_widest_numbered_name(qtbot):
    """Its width comes from remembered widths of the numbers and the names: never narrower than the whole label."""
    axis = TokenAxis("left")
    labels = ["the", "notwithstanding", "cat", "WWW", "iii"]
    positions = [0, 12, 130, 1999, 511]
    axis.set_labels(labels, positions)
    metrics = QFontMetrics(axis.bold_font)
    widest = max(metrics.horizontalAdvance(f"{position} {short_label(label)}")  # long names are shortened
                 for position, label in zip(positions, labels, strict=True))
    assert widest + 10 <= axis.width() <= widest + 13
    assert text_width(axis.bold_font, "notwithstanding") == metrics.horizontalAdvance("notwithstanding")
