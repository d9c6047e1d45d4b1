"""What the run tabs' forms (Train, Fine-tune) share: number fields that take anything typed, the settings'
problems shown as they are typed (each field framed in red, the reasons under the form), the device field, and
`RunForm`, the part of a form that `RunPanel` drives which is the same for both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QStandardPaths, Signal
from PySide6.QtWidgets import QComboBox, QLabel, QSpinBox, QWidget

from explorer import APP_NAME
from explorer.common._qt.widget_names import named
from explorer.common.message_text import sentence_case
from explorer.runs.training_run import available_devices

PROBLEM_STYLE = "border: 1px solid #c62828; border-radius: 2px;"
INT_LIMIT = 2**31 - 1  # what a spin box holds: wide enough that nothing typed is clamped


def number_spin(name: str, value: int, tip: str) -> QSpinBox:
    """A whole-number field that takes anything typed (the form says what is out of range, and why)."""
    spin = QSpinBox()
    spin.setObjectName(name)
    spin.setRange(-INT_LIMIT, INT_LIMIT)
    spin.setValue(value)
    spin.setGroupSeparatorShown(True)
    spin.setMaximumWidth(150)
    spin.setToolTip(tip)
    return spin


def typed_number(text: str) -> float | str:
    """A number field's text as a float, or as it is when it is not a number (the checks say why)."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        return text


class ProblemLabel(QLabel):
    """The reasons the settings cannot be used, under the form (objectName formProblemLabel); hidden when none."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("formProblemLabel")
        self.setAccessibleName("Settings out of range")
        self.setWordWrap(True)
        self.setStyleSheet("color: #c62828;")
        self.hide()

    def show_problems(self, problems: dict[str, str], widgets: dict[str, QWidget]) -> None:
        """Frame the field of each problem in red and list the reasons; `widgets` maps field names to fields."""
        for field, widget in widgets.items():
            widget.setStyleSheet(PROBLEM_STYLE if field in problems else "")
        self.setText("\n".join(sentence_case(message) for message in problems.values()))
        self.setVisible(bool(problems))


class DeviceCombo(QComboBox):
    """The devices a run may use (objectName deviceCombo): the CPU, and a GPU when PyTorch sees one."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        named(self, "deviceCombo", "Device", "Where the run computes: the CPU, or a GPU when PyTorch sees one")
        for device, label in available_devices():
            self.addItem(label, device)

    def devices(self) -> tuple[str, ...]:
        return tuple(self.itemData(index) for index in range(self.count()))

    def index_of(self, device: str) -> int:
        """The index of `device`; ValueError, naming the ones there are, when this machine lacks it."""
        index = self.findData(device)
        if index < 0:
            raise ValueError(f"device {device!r} is not available here; pick one of {list(self.devices())}")
        return index

    def label(self, device: str | None = None) -> str:
        """The label of `device` (default: the chosen one), e.g. "CPU (2 cores)"."""
        return self.itemText(max(0, self.currentIndex() if device is None else self.findData(device)))


class RunForm(QWidget):
    """A run tab's form, as `RunPanel` drives it. A subclass builds `device_combo` (a `DeviceCombo`), `out_edit`
    (the run folder) and `problem_label` (a `ProblemLabel`), connects its fields' changes to `_check`, and gives
    `problems()`, `problem_fields()`, `settings()`, `set_settings()`, `planned_steps()` and `set_editable()`."""

    stepsChanged = Signal(int)  # the planned number of steps (0: not known before the data is read)
    deviceChanged = Signal(str)  # the device's label, e.g. "CPU (2 cores)"
    problemsChanged = Signal(object)  # {field: reason} for the values out of range now (empty: none)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._problems: dict[str, str] = {}

    def problems(self) -> dict[str, str]:
        """{field: why its value cannot be used}, for the fields as they are now."""
        raise NotImplementedError

    def problem_fields(self) -> dict[str, QWidget]:
        """{field: the widget its problem frames in red}."""
        raise NotImplementedError

    def settings(self) -> Any:
        raise NotImplementedError

    def _check(self, *_args) -> None:
        """Show the problems as they are typed; `problemsChanged` when they change."""
        problems = self.problems()
        self.problem_label.show_problems(problems, self.problem_fields())
        if problems != self._problems:
            self._problems = problems
            self.problemsChanged.emit(dict(problems))

    def settings_or_none(self) -> Any:
        """The validated settings, or None while the form cannot give them."""
        try:
            return self.settings()
        except ValueError:
            return None

    def typed_run_folder(self) -> str | None:
        return self.out_edit.text().strip() or None

    def device_label(self, device: str | None = None) -> str:
        """The label of `device` (default: the chosen one), e.g. "CPU (2 cores)"."""
        return self.device_combo.label(device)

def default_runs_dir() -> Path:
    """Where runs go when the form names no folder: `runs` in the app's folder of the user's data location
    (~/.local/share/bert-explorer/runs on Linux). Qt's own app folder is one level deeper, under the organisation
    and the application, both named bert-explorer; earlier versions put runs there
    (…/bert-explorer/bert-explorer/runs). Where that folder exists and the new one does not, it stays the default,
    so that no run moves or seems to vanish."""
    locations = QStandardPaths.StandardLocation
    data = QStandardPaths.writableLocation(locations.GenericDataLocation)
    if not data:
        return Path.home() / ".bert-explorer" / "runs"
    runs = Path(data) / APP_NAME / "runs"
    app_folder = QStandardPaths.writableLocation(locations.AppLocalDataLocation)
    earlier = Path(app_folder) / "runs" if app_folder else runs
    return earlier if earlier != runs and earlier.is_dir() and not runs.exists() else runs
