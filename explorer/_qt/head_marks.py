"""Marks drawn on attention heads by the head lab: an importance colour, a role badge, and their legend.

Shared by the head grid and the all-layers overview (their `set_head_annotations` hooks), so both say the
same thing in the same colours. Importance runs from a pale grey (a head that barely matters draws almost no
frame) to a deep red; it is not viridis, so it is never read as attention. Role badges have one colour per
role (Clark et al. 2019's kinds).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QLinearGradient, QPainter, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QWidget

HEAD_MODES = {"attention": "Heads: attention", "importance": "Heads: importance", "roles": "Heads: roles"}
HEAD_MODE_TIP = ("What the head grid and the all-layers overview show: the attention maps; each head's importance "
                 "(how much the loss moves when it is switched off, Michel et al. 2019) as a coloured frame or "
                 "cell, with role badges; or only the role badges (where a head looks: previous/next token, "
                 "[SEP], [CLS], itself, punctuation, broad, content; Clark et al. 2019). The Head lab tab "
                 "chooses the source: this input or a corpus sample.")
IMPORTANCE_MAP = pg.ColorMap([0.0, 0.5, 1.0], [(232, 232, 232), (253, 141, 60), (165, 0, 38)])
ROLE_COLOURS = {"prev": "#1f77b4", "next": "#17becf", "[SEP]": "#7f7f7f", "[CLS]": "#8c564b", "self": "#9467bd",
                "punct": "#e377c2", "broad": "#2ca02c", "content": "#d9822b"}
BADGE_FONT_POINTS = 8
CAPTION_WIDTH_PX = 280  # a caption or note longer than this is elided; its tooltip holds all of it


def score_colour(score: float) -> QColor:
    """The importance colour of a normalised score in [0, 1]."""
    return IMPORTANCE_MAP.map(float(np.clip(score, 0.0, 1.0)), mode="qcolor")


def score_lookup_table() -> np.ndarray:
    """(256, 4) uint8 RGBA lookup table of the importance colours, for an ImageItem."""
    return IMPORTANCE_MAP.getLookupTable(0.0, 1.0, 256, alpha=True)


def badge_colour(badge: str) -> QColor:
    return QColor(ROLE_COLOURS.get(badge, "#555555"))


def make_badge(view_box: pg.ViewBox) -> pg.TextItem:
    """A small filled label, anchored at its top-left corner, added to `view_box` (hidden until set)."""
    badge = pg.TextItem("", color="w", anchor=(0, 0))
    font = QFont()
    font.setPointSize(BADGE_FONT_POINTS)
    font.setBold(True)
    badge.setFont(font)
    badge.setZValue(12)
    badge.setVisible(False)
    view_box.addItem(badge, ignoreBounds=True)
    return badge


def set_badge(badge: pg.TextItem, text: str, x: float, y: float) -> None:
    """Show `text` at view point (x, y) in its role's colour; empty text hides it."""
    badge.setVisible(bool(text))
    if not text:
        return
    if badge.toPlainText() != text:
        badge.setText(text)
        badge.fill = pg.mkBrush(badge_colour(text))
        badge.border = pg.mkPen(None)
        badge.update()
    badge.setPos(x, y)


class ScoreLegend(QWidget):
    """"0 ▭▭▭▭ 1" with a caption saying what the scores are; without scores, a note alone (why there are
    none); hidden while there is neither."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headScoreLegend")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        self.low_label = QLabel("0")
        self.bar = QLabel()
        self.bar.setPixmap(_gradient_pixmap(90, 10))
        self.high_label = QLabel("1")
        self.caption_label = QLabel()
        self.caption_label.setObjectName("headScoreCaption")
        self.caption_label.setStyleSheet("color: #444;")
        for widget in (self.low_label, self.bar, self.high_label, self.caption_label):
            layout.addWidget(widget)
        layout.addStretch(1)  # packed to the left however wide the legend is laid out
        self.setVisible(False)

    def show_caption(self, caption: str | None, with_scale: bool = True) -> None:
        """The scale and `caption`, or (with_scale False) `caption` alone as a note; None hides the legend."""
        self.setVisible(bool(caption))
        for widget in (self.low_label, self.bar, self.high_label):
            widget.setVisible(with_scale)
        self.caption_label.setStyleSheet("color: #444;" if with_scale else "color: #7a4b00;")
        set_elided(self.caption_label, caption or "")
        self.setToolTip(f"normalised head importance (per-layer L2, then min–max over the model): {caption}"
                        if caption and with_scale else caption or "")


def set_elided(label: QLabel, text: str, width: int = CAPTION_WIDTH_PX) -> None:
    """Show `text` in at most `width` pixels (elided in the middle), all of it in the tooltip: a long caption
    must not widen the window."""
    label.setText(QFontMetrics(label.font()).elidedText(text, Qt.TextElideMode.ElideMiddle, width))
    label.setToolTip(text)


def _gradient_pixmap(width: int, height: int) -> QPixmap:
    pixmap = QPixmap(width, height)
    pixmap.fill(Qt.GlobalColor.transparent)
    gradient = QLinearGradient(0, 0, width, 0)
    for stop in np.linspace(0, 1, 9):
        gradient.setColorAt(float(stop), score_colour(stop))
    painter = QPainter(pixmap)
    painter.fillRect(0, 0, width, height, gradient)
    painter.setPen(QColor("#999999"))
    painter.drawRect(0, 0, width - 1, height - 1)
    painter.end()
    return pixmap
