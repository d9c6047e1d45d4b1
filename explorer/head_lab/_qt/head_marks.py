"""What the head lab draws on the attention heads: importance and roles, through the views' own hooks.

`HeadMarks` is a tool in the attention panel's toolbar (`AttentionPanel.add_tool`): "Heads: attention /
importance / roles" and a legend. It draws an `explorer.head_lab.analyses.HeadAnnotations` with the hooks the views
offer: `HeadGrid.set_head_notes(texts, colours)` for the current layer (a note under each head's number, its
frame in a colour; it follows `AttentionPanel.layerShown`) and `ModelOverview.set_head_notes` for every head.

Importance runs from a pale grey (a head that barely matters is hardly framed) to a deep red, not viridis,
so it is never read as attention; each role has its own colour (Clark et al. 2019's kinds).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QLinearGradient, QPainter, QPixmap
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QWidget

from explorer.common._qt.plain_text import plain_label, plain_tooltip

HEAD_MODES = {"attention": "Heads: attention", "importance": "Heads: importance", "roles": "Heads: roles"}
HEAD_MODE_TIP = ("What the heads show besides their attention: nothing more; each head's importance (how much the "
                 "loss moves when it is switched off, Michel et al. 2019) as a number and a frame from grey to "
                 "red, with its role; or its role alone (where it looks: previous/next token, [SEP], [CLS], "
                 "itself, punctuation, broad, content; Clark et al. 2019) as a frame colour. The Head lab tab "
                 "chooses the source: this input or a corpus sample.")
IMPORTANCE_MAP = pg.ColorMap([0.0, 0.5, 1.0], [(225, 225, 225), (253, 141, 60), (165, 0, 38)])
ROLE_COLOURS = {"prev": "#1f77b4", "next": "#17becf", "[SEP]": "#7f7f7f", "[CLS]": "#8c564b", "self": "#9467bd",
                "punct": "#e377c2", "broad": "#2ca02c", "content": "#d9822b"}
CAPTION_WIDTH_PX = 120  # a note longer than this is elided (the toolbar is full); its tooltip holds all of it


def score_colour(score: float) -> QColor:
    """The importance colour of a normalised score in [0, 1]."""
    return IMPORTANCE_MAP.map(float(np.clip(score, 0.0, 1.0)), mode="qcolor")


def badge_colour(badge: str) -> QColor:
    return QColor(ROLE_COLOURS.get(badge, "#555555"))


def set_elided(label: QLabel, text: str, width: int = CAPTION_WIDTH_PX) -> None:
    """Show `text` in at most `width` pixels (its end elided), all of it in the tooltip: a long caption must
    not widen the window."""
    label.setText(QFontMetrics(label.font()).elidedText(text, Qt.TextElideMode.ElideRight, width))
    label.setToolTip(plain_tooltip(text))


class ScoreLegend(QWidget):
    """"0 ▭▭▭▭ 1" for scores (what they are of in its tooltip), or a short note alone (why there are none);
    hidden while there is nothing to say. Small: it lives in the attention toolbar."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headScoreLegend")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(3)
        self.low_label = QLabel("0")
        self.bar = QLabel()
        self.bar.setPixmap(_gradient_pixmap(48, 10))
        self.high_label = QLabel("1")
        self.caption_label = plain_label(QLabel())
        self.caption_label.setObjectName("headScoreCaption")
        for widget in (self.low_label, self.bar, self.high_label, self.caption_label):
            layout.addWidget(widget)
        self.setVisible(False)

    def show_caption(self, caption: str | None, with_scale: bool = True) -> None:
        """The scale (`caption` in its tooltip), or (with_scale False) `caption` as a note; None hides it."""
        self.setVisible(bool(caption))
        for widget in (self.low_label, self.bar, self.high_label):
            widget.setVisible(with_scale)
        self.caption_label.setVisible(not with_scale)
        self.caption_label.setStyleSheet("color: #7a4b00;")
        set_elided(self.caption_label, "" if with_scale else caption or "")
        if with_scale and caption:
            self.setToolTip("head importance of " + caption + ", normalised as Michel et al. 2019 (each layer by "
                            "its L2 norm, then min–max over the model): each head's number and frame colour")
        else:
            self.setToolTip(plain_tooltip(caption or ""))


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


class HeadMarks(QWidget):
    """The "Heads:" mode box and its legend, in the attention panel's toolbar; draws the annotations given."""

    modeChanged = Signal(str)  # a key of HEAD_MODES

    def __init__(self, panel, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headMarks")
        self.panel = panel
        self.annotations = None  # explorer.head_lab.analyses.HeadAnnotations, or None
        self.computing = False  # annotations are asked for and not here yet
        self.combo = QComboBox()
        self.combo.setObjectName("headModeCombo")
        self.combo.setAccessibleName("what the heads show")
        for mode, text in HEAD_MODES.items():
            self.combo.addItem(text, mode)
        self.combo.setToolTip(HEAD_MODE_TIP)
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.legend = ScoreLegend()
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)  # as wide as its contents
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.combo)
        layout.addWidget(self.legend)
        self.combo.currentIndexChanged.connect(self._on_mode_changed)
        panel.layerShown.connect(lambda _layer: self._draw_grid())
        panel.add_tool(self)

    def mode(self) -> str:
        return self.combo.currentData()

    def set_mode(self, mode: str) -> None:
        index = self.combo.findData(mode)
        if index < 0:
            raise ValueError(f"unknown head mode {mode!r}; choose one of {', '.join(HEAD_MODES)}")
        self.combo.setCurrentIndex(index)

    def set_annotations(self, annotations, computing: bool = False) -> None:
        """What to draw (None: nothing yet; `computing` says one is on its way)."""
        self.annotations, self.computing = annotations, computing
        self.draw()

    def notes(self) -> tuple[list[list[str]] | None, list[list[str]] | None]:
        """(texts, colours) per (layer, head) for the current mode, or (None, None) for no marks."""
        marks, mode = self._fitting(), self.mode()
        if marks is None or mode == "attention":
            return None, None
        badges = marks.badges
        if mode == "importance" and marks.scores is not None:
            texts = [[f"{score:.2f}" + (f" {badges[layer][head]}" if badges is not None else "")
                      for head, score in enumerate(row)] for layer, row in enumerate(marks.scores)]
            colours = [[score_colour(score).name() for score in row] for row in marks.scores]
            return texts, colours
        if badges is None:
            return None, None
        return [list(row) for row in badges], [[badge_colour(badge).name() for badge in row] for row in badges]

    def draw(self) -> None:
        texts, colours = self.notes()
        self.panel.overview.set_head_notes(texts, colours)
        self._draw_grid(texts, colours)
        self._draw_legend()

    def _draw_grid(self, texts=None, colours=None) -> None:
        if texts is None:
            texts, colours = self.notes()
        layer, grid = self.panel.layer, self.panel.head_grid
        if texts is None or layer >= len(texts) or grid.num_heads != len(texts[layer]):
            grid.set_head_notes(None)
        else:
            grid.set_head_notes(texts[layer], colours[layer])

    def _draw_legend(self) -> None:
        marks, mode = self._fitting(), self.mode()
        if mode == "attention":
            self.legend.show_caption(None)
        elif marks is None:
            self.legend.show_caption("computing…" if self.computing else None, with_scale=False)
        elif mode == "importance" and marks.scores is not None:
            self.legend.show_caption(marks.caption)
        elif mode == "importance":  # why there is none, in a few words (the box already says "importance")
            self.legend.show_caption(marks.note.removeprefix("importance: ") or marks.caption, with_scale=False)
        elif marks.badges is not None:
            self.legend.show_caption(None)  # each head's corner names its role
        else:
            self.legend.show_caption(marks.note, with_scale=False)

    def _fitting(self):
        """The annotations when they fit the panel's model (layers × heads), else None."""
        marks, panel = self.annotations, self.panel
        if marks is None or panel.inspection is None or marks.grid_shape != (panel.num_layers, panel.num_heads):
            return None
        return marks

    def _on_mode_changed(self, *_) -> None:
        self.draw()
        self.modeChanged.emit(self.mode())
