"""A plot's bottom axis names its last tick: pyqtgraph hides a label that pokes past the axis end at all."""

import numpy as np
from PySide6.QtGui import QImage, QPainter

from explorer.head_lab._qt.pruning_plot import PruningPlot


def bottom_labels(qtbot, widget, plot) -> list[str]:
    qtbot.addWidget(widget)
    widget.resize(550, 500)
    widget.show()
    qtbot.waitExposed(widget)
    qtbot.wait(20)
    canvas = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(canvas)
    try:
        return [text for _, _, text in plot.getAxis("bottom").generateDrawSpecs(painter)[2]]
    finally:
        painter.end()


def test_the_pruning_curve_names_100_percent(qtbot):
    plot = PruningPlot()
    plot.plot.plot(np.linspace(0, 100, 11), np.linspace(0.7, 0.5, 11))  # what a curve draws: 0 .. 100 %
    labels = bottom_labels(qtbot, plot, plot.plot)
    assert "0" in labels and "100" in labels, labels
