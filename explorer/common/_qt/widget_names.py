"""Stable names on widgets: tests and screen readers find a widget by its objectName and accessible name."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtWidgets import QWidget

WidgetT = TypeVar("WidgetT", bound=QWidget)


def named(widget: WidgetT, name: str, accessible: str, tip: str = "") -> WidgetT:
    """`widget` with its objectName, accessible name and (when given) tooltip set."""
    widget.setObjectName(name)
    widget.setAccessibleName(accessible)
    if tip:
        widget.setToolTip(tip)
    return widget
