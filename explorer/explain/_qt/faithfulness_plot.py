"""Which explanation holds up (objectName `faithfulnessPlot`): deletion and insertion curves, one per method.

Deletion removes the tokens an attribution ranks highest first and follows the target's logit down: the faster
it falls (the smaller its area) the more the ranking found what the output rests on. Insertion starts from the
input with every token removed and puts them back in the same order: the faster it rises (the larger its area)
the better. The caption under the plots names each method in its line's colour with its two areas and ERASER's
comprehensiveness and sufficiency (a legend inside the plots hid the curves). Lines are made once per method and fed
with setData.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from explorer.common._qt.plot_style import curve_pen, show_title, style_canvas, style_plot

METHOD_COLOURS = {"integrated_gradients": "#1f5fa8", "gradient_x_input": "#d9822b", "gradient_norm": "#2a9d4b",
                  "grad_attention_rollout": "#7b3294"}
EMPTY_TEXT = "No curves yet: click an output in the Inspect tab to explain it."


class FaithfulnessPlot(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("faithfulnessPlot")
        self.setAccessibleName("Faithfulness curves")
        self.canvas = pg.GraphicsLayoutWidget()
        style_canvas(self.canvas)
        self.plots: dict[str, pg.PlotItem] = {}
        for column, (kind, title) in enumerate((("deletion", "Deletion (lower area is better)"),
                                                ("insertion", "Insertion (higher area is better)"))):
            plot = style_plot(self.canvas.addPlot(row=0, col=column), x_label="fraction of tokens",
                              y_label="target logit" if column == 0 else None, mouse=False)
            show_title(plot, title)
            # both plots read the logit itself: an SI prefix would write 300…600 "(x0.001)" beside 0.3…0.6
            plot.getAxis("left").enableAutoSIPrefix(False)
            self.plots[kind] = plot
        self.lines: dict[tuple[str, str], pg.PlotDataItem] = {}
        self.caption = QLabel(EMPTY_TEXT)
        self.caption.setObjectName("faithfulnessCaption")
        self.caption.setWordWrap(True)
        self.caption.setTextFormat(Qt.TextFormat.RichText)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.canvas)
        layout.addLayout(row, 1)
        layout.addWidget(self.caption)
        self.curves: dict[str, object] = {}

    def show_curves(self, curves: dict[str, object], note: str = "") -> None:
        """method → bertcore.explain Faithfulness; {} with a note saying why there are none."""
        self.curves = dict(curves)
        for (method, kind), line in list(self.lines.items()):
            if method not in curves:
                self.plots[kind].removeItem(line)
                del self.lines[(method, kind)]
        for method, result in curves.items():
            fractions = np.asarray(result.fractions, np.float64)
            for kind in ("deletion", "insertion"):
                line = self._line(method, kind)
                line.setData(fractions, np.asarray(getattr(result, kind), np.float64), connect="finite")
        if not curves:
            self.caption.setText(html.escape(note or EMPTY_TEXT))
            return
        self.caption.setText("<br>".join(
            f"<b style='color:{METHOD_COLOURS.get(method, '#333333')}'>{method.replace('_', ' ')}</b>: area "
            f"{float(result.deletion_auc):.3g} deleting, {float(result.insertion_auc):.3g} inserting; "
            f"comprehensiveness {float(result.comprehensiveness):.3g}, sufficiency {float(result.sufficiency):.3g}"
            for method, result in curves.items())
            + "<br><span style='color:#555'>ERASER: comprehensiveness is the logit's drop without the top tokens "
              "(higher is better), sufficiency its drop with them alone (lower is better).</span>")

    def _line(self, method: str, kind: str) -> pg.PlotDataItem:
        key = (method, kind)
        if key not in self.lines:
            colour = METHOD_COLOURS.get(method, "#333333")
            self.lines[key] = self.plots[kind].plot([], [], pen=curve_pen(colour, width=2), name=method)
        return self.lines[key]

    def line_data(self, method: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of a drawn line (tests)."""
        x, y = self.lines[(method, kind)].getData()
        return np.asarray(x), np.asarray(y)
