"""Token axes never write two labels over each other, also where an end label is nudged inside the axis."""

import itertools

import pyqtgraph as pg
import pytest
from PySide6.QtGui import QImage, QPainter

from explorer.common._qt.token_axis import TokenAxis


def placed_labels(qtbot, axis: TokenAxis, count: int, size: tuple[int, int]) -> list:
    widget = pg.PlotWidget(axisItems={axis.orientation: axis})
    qtbot.addWidget(widget)
    widget.resize(*size)
    widget.show()
    qtbot.waitExposed(widget)
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
