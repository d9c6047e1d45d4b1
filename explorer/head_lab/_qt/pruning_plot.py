"""The pruning curve: held-out accuracy as heads are switched off, least important first vs a random order.

objectName `pruningPlot`. Michel et al. 2019, figure 3: a good importance keeps the metric up far longer than
the random order does. Each metric the curve holds (MLM and NSP accuracy) has one colour; the importance
order is a solid line with dots, the random order a dashed line. Steps not measured yet (NaN) are not drawn,
so the curve grows while it is computed. Items are made once per metric and fed with setData. A dotted line
marks how many heads the Head lab tab's "switch off" would take.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.common._qt.exporting import export_png, export_svg, render_picture
from explorer.common._qt.plot_style import add_legend, curve_pen, style_canvas, style_plot
from explorer.common.export_data import _replace_atomically

METRIC_COLOURS = {"mlm_accuracy": "#1f5fa8", "nsp_accuracy": "#d9822b", "metric": "#333333", "loss": "#7b3294"}
METRIC_NAMES = {"mlm_accuracy": "MLM accuracy", "nsp_accuracy": "NSP accuracy", "loss": "loss", "metric": "metric"}
EMPTY_TEXT = ("No pruning curve yet: press “Pruning curve” to switch heads off 10% at a time on held-out pairs, "
              "least important first and in a random order.")


class PruningPlot(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("pruningPlot")
        self.setAccessibleName("Pruning curve")
        self.curve = None  # bertcore.analysis.pruning.PruningCurve
        self.plot_widget = pg.PlotWidget()
        style_canvas(self.plot_widget)
        self.plot = style_plot(self.plot_widget.getPlotItem(), x_label="heads switched off (% of all heads)",
                               y_label="held-out accuracy", auto_range_button=True)
        # no showGrid: its translucent lines cost ~20 ms a paint here; one item of faint guides costs ~nothing
        guides = pg.PlotCurveItem(np.tile([0.0, 100.0], 4), np.repeat([0.2, 0.4, 0.6, 0.8], 2), connect="pairs",
                                  pen=curve_pen("#e4e4e4"))
        self.plot.addItem(guides, ignoreBounds=True)
        self.plot.setXRange(0, 100, padding=0.02)
        self.plot.setYRange(0, 1, padding=0.02)
        self.legend = add_legend(self.plot, (-10, 10), backdrop=True)
        self.lines: dict[tuple[str, str], pg.PlotDataItem] = {}  # (metric, order) -> its line
        self.count_line = pg.InfiniteLine(angle=90, pen=curve_pen("#888888", dotted=True))
        self.count_line.setVisible(False)
        self.plot.addItem(self.count_line, ignoreBounds=True)
        self.caption = QLabel(EMPTY_TEXT)
        self.caption.setObjectName("pruningCaption")
        self.caption.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot_widget, 1)
        layout.addWidget(self.caption)

    def show_curve(self, curve, note: str = "") -> None:
        """A `PruningCurve` (partial ones included), or None with a note saying why (default: how to get one)."""
        self.curve = curve
        if curve is None:
            for line in self.lines.values():
                line.setData([], [])
            self.caption.setText(note or EMPTY_TEXT)
            return
        percent = 100.0 * curve.fractions
        for name in curve.metric_names:
            for order in ("importance", "random"):
                line = self._line(name, order)
                line.setData(percent, curve.metric(name, order), connect="finite")
        measured = int(np.isfinite(curve.importance_metrics[:, 0]).sum())
        self.caption.setText(
            f"{curve.grid_shape[0] * curve.grid_shape[1]} heads, {measured} of {curve.num_steps} steps measured. "
            "Solid: least important heads switched off first; dashed: a random order (seed "
            f"{curve.seed}). Michel et al. 2019, figure 3.")

    def _line(self, name: str, order: str) -> pg.PlotDataItem:
        key = (name, order)
        if key not in self.lines:
            colour = METRIC_COLOURS.get(name, "#333333")
            label = METRIC_NAMES.get(name, name)
            if order == "importance":
                line = self.plot.plot([], [], pen=curve_pen(colour, width=2.5), symbol="o", symbolSize=6,
                                      symbolBrush=colour, symbolPen=None, name=f"{label}, least important first")
            else:
                line = self.plot.plot([], [], pen=curve_pen(colour, width=2, dashed=True),
                                      symbol="t", symbolSize=6, symbolBrush=None, symbolPen=colour,
                                      name=f"{label}, random order")
            self.lines[key] = line
        return self.lines[key]

    def line_data(self, name: str, order: str) -> tuple[np.ndarray, np.ndarray]:
        """(x in %, y) of a drawn line (tests)."""
        x, y = self.lines[(name, order)].getData()
        return np.asarray(x), np.asarray(y)

    def mark_count(self, count: int, total: int) -> None:
        """The dotted line at `count` of `total` heads (0 hides it)."""
        self.count_line.setVisible(count > 0 and total > 0)
        if total:
            self.count_line.setValue(100.0 * count / total)

    def _require_curve(self) -> None:
        """An export of nothing is refused, whatever the format (a PNG or SVG of the empty axes said nothing)."""
        if self.curve is None:
            raise ValueError("there is no pruning curve to export yet")

    def write_csv(self, path) -> Path:
        self._require_curve()
        return _replace_atomically(Path(path), self.curve.to_csv)

    def export_png(self, path) -> Path:
        self._require_curve()
        return export_png(self, path)

    def picture(self) -> QImage:
        """What export_png writes, for the clipboard."""
        self._require_curve()
        return render_picture(self)

    def export_svg(self, path) -> Path:
        self._require_curve()
        return export_svg(self, path, title="bert-explorer pruning curve")
