"""Which explanation holds up (objectName `faithfulnessPlot`): deletion and insertion curves, one per method.

Deletion removes the tokens an attribution ranks highest first and follows the target's logit down: the faster
it falls (the smaller its area) the more the ranking found what the output rests on. Insertion starts from the
input with every token removed and puts them back in the same order: the faster it rises (the larger its area)
the better. The legend gives each method's areas and ERASER's comprehensiveness and sufficiency. Lines are made
once per method and fed with setData.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from explorer.common._qt.plot_style import add_legend, curve_pen, show_title, style_canvas, style_plot

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
        self.legends: dict[str, pg.LegendItem] = {}
        for column, (kind, title) in enumerate((("deletion", "Deletion (lower area is better)"),
                                                ("insertion", "Insertion (higher area is better)"))):
            plot = style_plot(self.canvas.addPlot(row=0, col=column), x_label="fraction of tokens",
                              y_label="target logit" if column == 0 else None, mouse=False)
            show_title(plot, title)
            self.plots[kind] = plot
            self.legends[kind] = add_legend(plot, (-5, 5), backdrop=True)
        self.lines: dict[tuple[str, str], pg.PlotDataItem] = {}
        self.caption = QLabel(EMPTY_TEXT)
        self.caption.setObjectName("faithfulnessCaption")
        self.caption.setWordWrap(True)
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
                self.legends[kind].removeItem(line)
                del self.lines[(method, kind)]
        for method, result in curves.items():
            fractions = np.asarray(result.fractions, np.float64)
            for kind in ("deletion", "insertion"):
                line = self._line(method, kind)
                line.setData(fractions, np.asarray(getattr(result, kind), np.float64))
                area = float(getattr(result, f"{kind}_auc"))
                self.legends[kind].items[self._legend_index(kind, line)][1].setText(
                    f"{method.replace('_', ' ')} (area {area:.3g})")
        if not curves:
            self.caption.setText(note or EMPTY_TEXT)
            return
        self.caption.setText("  ·  ".join(
            f"{method.replace('_', ' ')}: comprehensiveness {float(result.comprehensiveness):.3g}, sufficiency "
            f"{float(result.sufficiency):.3g}" for method, result in curves.items())
            + "  (ERASER: the logit's drop without the top tokens, and with them alone; higher and lower are "
              "better)")

    def _line(self, method: str, kind: str) -> pg.PlotDataItem:
        key = (method, kind)
        if key not in self.lines:
            colour = METHOD_COLOURS.get(method, "#333333")
            self.lines[key] = self.plots[kind].plot([], [], pen=curve_pen(colour, width=2), name=method)
        return self.lines[key]

    def _legend_index(self, kind: str, line: pg.PlotDataItem) -> int:
        return next(index for index, (sample, _) in enumerate(self.legends[kind].items) if sample.item is line)

    def line_data(self, method: str, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of a drawn line (tests)."""
        x, y = self.lines[(method, kind)].getData()
        return np.asarray(x), np.asarray(y)
