"""What the run tabs' forms (Train, Fine-tune) share: number fields that take anything typed, and the settings'
problems shown as they are typed (each field framed in red, the reasons under the form)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QSpinBox, QWidget

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
        self.setText("\n".join(message[:1].upper() + message[1:] for message in problems.values()))
        self.setVisible(bool(problems))
