"""The attention panel's Heads tab: the current layer's head grid beside the selected head large, over which a
ModernBERT local layer's window edges are drawn."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QWidget

from explorer.common._qt.plot_style import clear_curve
from explorer.common._qt.widget_names import named
from explorer.common.attention_math import LayerView
from explorer.inspector._qt.head_grid import HeadGrid
from explorer.inspector._qt.token_heatmap import TokenHeatmap
from explorer.inspector.family_display import LayerKind, window_edges

WINDOW_EDGE_COLOUR = "#ff9a3c"  # the local window's edges: orange, as local layers are named elsewhere


class HeadsPage(QSplitter):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.setObjectName("headsSplitter")
        self.head_grid = named(HeadGrid(), "headGrid", "attention heads of the current layer")
        self.head_detail = named(TokenHeatmap("", "attention"), "headDetail", "selected attention head")
        # dashed, and empty on global layers and other models
        self.window_edges = pg.PlotCurveItem(pen=pg.mkPen(WINDOW_EDGE_COLOUR, width=1, style=Qt.PenStyle.DashLine,
                                                          cosmetic=True), connect="pairs")
        self.window_edges.setZValue(5)
        self.head_detail.plot.addItem(self.window_edges, ignoreBounds=True)
        self.addWidget(self.head_grid)
        self.addWidget(self.head_detail)
        self.setStretchFactor(0, 4)
        self.setStretchFactor(1, 5)
        self.setSizes([400, 500])

    def show_head(self, picture, view: LayerView, head: int, kind: LayerKind | None, sliding_window: int | None,
                  highlighted: tuple[int, int]) -> None:
        """Shows `picture`, head `head` of `view`'s layer, with the window edges when `kind` is a local layer."""
        off = "" if view.heads_on[head] else " (switched off)"
        self.head_detail.set_title(f"Layer {view.layer + 1}{f' ({kind.text})' if kind else ''} · head {head + 1}{off}")
        if kind is not None and kind.is_local:
            self.window_edges.setData(*window_edges(view.positions, sliding_window))
        else:
            clear_curve(self.window_edges)
        self.head_detail.show_picture(picture, view.tokens, view.positions, view.options.colour_scale,
                                      piece_style=view.piece_style)
        self.head_detail.highlight_position(*highlighted)
