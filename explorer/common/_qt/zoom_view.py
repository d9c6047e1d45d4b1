"""Zooming into a heatmap: at 512 tokens a head large is under a pixel per token, so it has to be read in parts.

The wheel zooms about the mouse, a left drag pans, a right drag draws the rectangle to zoom to, and `view_all`
shows the whole content again (the attention toolbar's "View all"). Clicks stay the views' own: pyqtgraph tells
a click from a drag, so selecting a head or opening one still works on a zoomable view.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt

MIN_SPAN = 4.0  # tokens: zoomed in further, a cell fills the view and nothing around it says where it is
ZOOMED_SLACK = 1e-3  # a span this much (relative) under the content's is zoomed in, not rounding


class ZoomViewBox(pg.ViewBox):
    """A ViewBox over content placed by `set_content`: wheel / drag / right-drag zoom, `view_all` to reset."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.content = QRectF()
        self.user_moved = False  # the user zoomed or panned since the last `view_all`: a resize keeps their view
        self.setMouseMode(pg.ViewBox.PanMode)
        self.setMenuEnabled(False)
        # Shown all, a view stays all when it is resized: with the aspect locked, a view laid out narrow (a tab not
        # yet shown) crops its range to the limits, and pyqtgraph keeps that crop when the view grows (What changed
        # showed A from its 2nd token to its 17th of 19).
        self.sigResized.connect(self._resized)

    def set_content(self, rect: QRectF, min_span: float = MIN_SPAN) -> None:
        """The region `view_all` shows; it can be panned at most one content width beyond its edges (room for the
        locked aspect ratio of a view whose shape differs from the content's)."""
        self.content = QRectF(rect)
        width, height = max(rect.width(), 1e-9), max(rect.height(), 1e-9)
        self.setLimits(xMin=rect.left() - width, xMax=rect.right() + width, yMin=rect.top() - height,
                       yMax=rect.bottom() + height, minXRange=min(min_span, width), minYRange=min(min_span, height))

    def view_all(self) -> None:
        self.user_moved = False
        if not self.content.isEmpty():
            self.setRange(rect=self.content, padding=0)

    def _resized(self) -> None:
        if not self.user_moved:
            self.view_all()

    def wheelEvent(self, ev, axis=None) -> None:
        self.user_moved = True
        super().wheelEvent(ev, axis)

    def zoom(self) -> float:
        """How many times the content's width the view shows less of (1 when it shows all of it)."""
        span = self.viewRange()[0]
        return max(1.0, self.content.width() / max(1e-9, span[1] - span[0]))

    def is_zoomed(self) -> bool:
        return self.zoom() > 1 + ZOOMED_SLACK

    def mouseDragEvent(self, ev, axis=None) -> None:
        self.user_moved = True
        if ev.button() != Qt.MouseButton.RightButton or axis is not None:
            super().mouseDragEvent(ev, axis)  # a left drag pans
            return
        ev.accept()
        if not ev.isFinish():
            self.updateScaleBox(ev.buttonDownPos(), ev.pos())
            return
        self.rbScaleBox.hide()
        rect = QRectF(ev.buttonDownPos(ev.button()), ev.pos()).normalized()
        if rect.width() >= 3 and rect.height() >= 3:  # a twitch of the mouse is not a rectangle
            self.showAxRect(self.childGroup.mapRectFromParent(rect), padding=0)
