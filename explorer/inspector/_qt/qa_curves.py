"""Extractive QA over the typed input: P(start) and P(end) at every position, the token names along the axis,
sentence B (the context, where an answer may lie) shaded, the best span framed and its text under the plot.

Items are made once and fed with `setData`; cell i spans i..i+1, as in the heatmaps, so `TokenAxis` labels sit
under their points.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from explorer.common._qt.plot_style import add_legend, curve_pen, style_canvas, style_plot
from explorer.common._qt.token_axis import TokenAxis

START_COLOUR, END_COLOUR = "#1f77b4", "#d62728"
CONTEXT_BRUSH = (46, 160, 67, 28)  # sentence B
SPAN_BRUSH, NO_ANSWER_BRUSH = (255, 200, 0, 110), (150, 150, 150, 70)


class QACurves(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("qaCurves")
        self.setAccessibleName("Answer start and end probabilities")
        self.graphics = pg.GraphicsLayoutWidget()
        style_canvas(self.graphics)
        self.axis = TokenAxis("bottom")
        self.plot = style_plot(self.graphics.addPlot(axisItems={"bottom": self.axis}), y_label="probability",
                               mouse=False)
        self.plot.getAxis("left").setWidth(48)
        self.plot.getAxis("left").enableAutoSIPrefix(False)  # 0.2, not "200 (x0.001)"
        self.legend = add_legend(self.plot, (-8, 4), columns=2)
        self.context_region = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(*CONTEXT_BRUSH),
                                                  pen=pg.mkPen(None))
        self.span_region = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(*SPAN_BRUSH),
                                               pen=curve_pen("#b58900"))
        for region in (self.context_region, self.span_region):
            region.setZValue(-10)
            self.plot.addItem(region, ignoreBounds=True)
        self.start_curve = self.plot.plot(pen=curve_pen(START_COLOUR, width=2), symbol="o", symbolSize=5,
                                          symbolBrush=START_COLOUR, symbolPen=None, name="start")
        self.end_curve = self.plot.plot(pen=curve_pen(END_COLOUR, width=2), symbol="t", symbolSize=6,
                                        symbolBrush=END_COLOUR, symbolPen=None, name="end")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.graphics)
        self.show_output(None, [])

    def show_output(self, output, tokens, span: tuple[int, int] | None = None, no_answer: bool = False) -> None:
        """`output` a QuestionAnsweringTaskOutput (None: empty), `tokens` its input's tokens, `span` the span to
        frame (grey when "no answer" wins)."""
        if output is None:
            for curve in (self.start_curve, self.end_curve):
                curve.setData([], [])
            self.context_region.hide()
            self.span_region.hide()
            self.axis.set_labels([])
            return
        length = len(tokens)
        centres = np.arange(length) + 0.5
        self.start_curve.setData(centres, output.start_probabilities)
        self.end_curve.setData(centres, output.end_probabilities)
        context = np.flatnonzero(output.context)
        self.context_region.setVisible(context.size > 0)
        if context.size:
            self.context_region.setRegion((float(context[0]), float(context[-1] + 1)))
        self.span_region.setVisible(span is not None)
        if span is not None:
            self.span_region.setRegion((float(span[0]), float(span[1] + 1)))
            self.span_region.setBrush(pg.mkBrush(*(NO_ANSWER_BRUSH if no_answer else SPAN_BRUSH)))
        self.axis.set_labels(list(tokens))
        top = float(max(output.start_probabilities.max(), output.end_probabilities.max()))
        self.plot.setXRange(0, max(1, length), padding=0)
        self.plot.setYRange(0, max(0.05, min(1.0, top * 1.1)), padding=0)

    def curve_data(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) probabilities drawn, for tests."""
        return self.start_curve.getData()[1], self.end_curve.getData()[1]
