"""The pruning plot: its bottom axis names its last tick (pyqtgraph hides a label that pokes past the axis end at all),
and it exports only a curve."""

import numpy as np
import pytest
from PySide6.QtGui import QImage, QPainter

from explorer.head_lab._qt.pruning_plot import PruningPlot
from tests.explorer.conftest import shown


def bottom_labels(qtbot, widget, plot) -> list[str]:
    shown(qtbot, widget, (550, 500))
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


def test_an_empty_pruning_curve_is_not_exported_in_any_format(qtbot, tmp_path):
    """CSV said "no pruning curve yet"; PNG and SVG wrote the empty axes without a word."""
    plot = PruningPlot()
    qtbot.addWidget(plot)
    for export, name in ((plot.write_csv, "c.csv"), (plot.export_png, "c.png"), (plot.export_svg, "c.svg")):
        with pytest.raises(ValueError, match="no pruning curve to export yet"):
            export(tmp_path / name)
    assert not list(tmp_path.iterdir())
