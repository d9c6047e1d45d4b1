"""How far a run is: "step 120 / 300  ·  5,400 tok/s  ·  0:42 left", or how it ended. The text is derived from
the tab's `RunLifecycle` (`explorer.runs.status_lines.progress_line`); the bar only shows it."""

from __future__ import annotations

from PySide6.QtWidgets import QProgressBar

from explorer.runs.status_lines import ProgressLine


class RunProgress(QProgressBar):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("trainingProgress")
        self.setAccessibleName("Training progress")
        self.setTextVisible(True)
        self.show_line(ProgressLine(0, 1, "idle"))

    def show_line(self, line: ProgressLine) -> None:
        self.setRange(0, line.maximum)
        self.setValue(line.value)
        self.setFormat(line.text)
