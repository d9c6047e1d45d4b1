"""Counting the Qt events a widget receives (paints, layout requests): what a test of a redraw's cost asserts on."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject


class EventCount(QObject):
    """An event filter that counts the events of `event_type` reaching the objects it is installed on."""

    def __init__(self, event_type: QEvent.Type):
        super().__init__()
        self.event_type = event_type
        self.count = 0

    def eventFilter(self, watched, event) -> bool:
        if event.type() == self.event_type:
            self.count += 1
        return False
