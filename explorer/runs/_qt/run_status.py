"""How the run the Train tab shows is going, in words: its progress bar, the device it trains on, a status
line (info, ok or error) and the engine's warning when a step carries one (its loss rising far above its
start). It decides nothing: the tab renders its status line and progress from its `RunLifecycle`
(`explorer.runs.status_lines`) whenever that changes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from explorer.common._qt.line_label import ElidedLabel
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.widget_names import named
from explorer.runs._qt.run_progress import RunProgress

STATUS_STYLES = {"info": "", "ok": "color: #1a7f37;", "error": "color: #c62828; font-weight: bold;"}
WARNING_STYLE = "color: #6b4a00; background: #fff4d6; border: 1px solid #e6c66e; border-radius: 3px; padding: 3px;"
FIRST_STATUS = "Pick a corpus and a model, then Start."


class RunStatus(QWidget):
    """`progress` (trainingProgress), `device_label`, `status_label` and `warning_label` (hidden until warned)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.progress = RunProgress()
        self.device_label = ElidedLabel("")  # a GPU's long name is cut, not the window widened
        self.device_label.setObjectName("trainingDeviceLabel")
        self.status_label = plain_label(named(QLabel(FIRST_STATUS), "trainingStatusLabel", "Training status"))
        self.warning_label = plain_label(named(QLabel(), "trainingWarningLabel", "Training warning"))
        self.warning_label.setStyleSheet(WARNING_STYLE)
        self.warning_label.hide()
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        for label in (self.status_label, self.warning_label):
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        for widget in (self.progress, self.device_label, self.status_label, self.warning_label):
            column.addWidget(widget)

    def say(self, text: str, kind: str = "info") -> None:
        """The status line: `kind` "info", "ok" or "error"."""
        self.status_label.setText(text)
        if self.status_label.styleSheet() != STATUS_STYLES[kind]:  # a new style sheet re-polishes the label
            self.status_label.setStyleSheet(STATUS_STYLES[kind])

    def show_device(self, label: str) -> None:
        self.device_label.setText(f"Trains on: {label}")

    def show_warnings(self, records: Iterable[Any]) -> None:
        """The newest engine warning among `records` (StepStats; those without one are passed over)."""
        warned = [record for record in records if getattr(record, "warning", None)]
        if warned:
            self.warning_label.setText(f"Step {warned[-1].step:,}: {warned[-1].warning}")
            self.warning_label.show()

    def clear_warning(self) -> None:
        self.warning_label.hide()
