"""What a tab beside "Inspect" may say to the main window and hear from it; `MainWindow.add_tab` wires it.

A tab never holds the window: it asks through its signals and is told through its slots, so it also works
on its own (opened as a window, in a test) and a new tab is one module plus one `add_tab` line.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget


class WindowTab(QWidget):
    """Base of the main window's tabs (Head lab, Embeddings, What changed, Train, Fine-tune)."""

    showInspection = Signal(object, str)  # an Inspection computed here and its caption, for the Inspect tab
    openCheckpoint = Signal(str)  # a checkpoint folder for the Inspect tab to load as its model
    inspectPair = Signal(str, str)  # a sentence pair (B "" for none) for the Inspect tab to show, typed in
    compareCheckpoints = Signal(str, str)  # two checkpoint folders (before, after) for the What changed tab

    def on_pair_changed(self, text_a: str, text_b: str | None) -> None:
        """The Inspect tab's sentence pair (B empty or None for none), once it encodes; told on `add_tab` too."""

    def on_model_changed(self, loaded: Any) -> None:
        """The Inspect tab's model (`explorer.inspector.model_info.LoadedModel`) whenever it changes; told on add_tab
        too."""

    def on_model_load_failed(self, message: str) -> None:
        """The window could not open a model (its message names it and says why); the Inspect tab keeps its own."""

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        """The window is closing: stop and join this tab's workers. True when they have ended."""
        return True
