"""A line of text that changes with every keystroke without re-laying out the window around it."""

from __future__ import annotations

from PySide6.QtCore import QSize
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
