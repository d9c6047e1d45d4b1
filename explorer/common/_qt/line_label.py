"""A line of text that changes with every keystroke without re-laying out the window around it (`LineLabel`), and a
line of text that takes the room it is given and no more, cut with "…" (`ElidedLabel`): neither ever widens the
window (a long status, a model's name or a hover readout widened it from 1410 to 1527 px)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from explorer.common._qt.plain_text import plain_label


class LineLabel(QWidget):
    """A QLabel in a box that its layout sizes (`label` is the QLabel: name it, style it, set its text).

    A QLabel asks its layout for room on every new text, and that request climbs to the window: each keystroke
    re-laid out the main window and repainted the whole Inspect tab (6-7 ms of the GUI thread, during the
    inspection's forward pass, which waits for the GIL meanwhile). In this box a new text is only repainted; a
    text longer than the box is cut at its right edge rather than widening the window.
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = plain_label(QLabel(self))
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

    def sizeHint(self) -> QSize:
        return QSize(0, self.label.sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self.label.minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.label.setGeometry(self.rect())


class ElidedLabel(QLabel):
    """One line of plain text that asks for its whole width but makes do with what it is given: the end is cut with
    "…" where it does not fit, and the whole text is in the tooltip. `text()` is always the whole text."""

    MIN_CHARACTERS = 8  # what it keeps at the least, "…" included

    def __init__(self, text: str = "", parent: QWidget | None = None,
                 elide: Qt.TextElideMode = Qt.TextElideMode.ElideRight):
        super().__init__(text, parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self._elide = elide
        self._own_tooltip = False
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

    def setText(self, text: str) -> None:
        super().setText(text)
        if not self._own_tooltip:
            super().setToolTip(text if self.shown_text() != text else "")

    def setToolTip(self, tip: str) -> None:  # a tooltip of the caller's own replaces the whole-text one
        self._own_tooltip = bool(tip)
        super().setToolTip(tip)

    def minimumSizeHint(self) -> QSize:
        width = self.fontMetrics().averageCharWidth() * self.MIN_CHARACTERS
        return QSize(min(width, super().sizeHint().width()), super().minimumSizeHint().height())

    def shown_text(self) -> str:
        """What fits of the text at the label's width."""
        return self.fontMetrics().elidedText(self.text(), self._elide, max(0, self.contentsRect().width()))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if not self._own_tooltip:
            super().setToolTip(self.text() if self.shown_text() != self.text() else "")

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        self.style().drawItemText(painter, self.contentsRect(), int(self.alignment()), self.palette(),
                                  self.isEnabled(), self.shown_text(), self.foregroundRole())
