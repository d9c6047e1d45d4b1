"""A file written off the GUI thread, with its progress and a Cancel button: the large NPZ exports (MiniLM's
attention arrays at 512 tokens blocked the window for ~14 s, its clicks lost).

The writing is a generator of (fraction, what) that writes the file next to its target and moves it into place at
the end (`explorer.common.export_data.npz_writing`): it runs in a `GeneratorWorker` (its thread rules are
explorer.common._qt.workers'), which Cancel stops between two chunks; the generator's own clean-up then removes the
part written, so a cancelled or failed write leaves nothing. A progress dialog shows how far it is (not modal: the
window stays usable meanwhile, and the arrays written were captured when it started). A failure is a message box,
never a traceback. Every write still going is known here (`BackgroundWrite.running`), so the window can stop and
join them before it closes (`shutdown_all`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QMessageBox, QProgressDialog, QWidget

from explorer.common._qt.workers.generator import GeneratorWorker

WRITE_NICENESS = 5  # the GUI thread wins the CPU (explorer.common._qt.workers, rule 5)
SHOW_AFTER_MS = 300  # a write that ends sooner shows no dialog


class BackgroundWrite(QObject):
    """Writes one file with `make_steps()` in a worker thread. Signals: `written(path)`, `failed(message)`,
    `cancelled()`, then `ended()`."""

    written = Signal(str)
    failed = Signal(str)
    cancelled = Signal()
    ended = Signal()

    running: ClassVar[set[BackgroundWrite]] = set()  # every write not ended yet (the window joins them on close)

    def __init__(self, parent: QWidget, what: str, path: str | Path, make_steps: Callable[[], Iterator],
                 show_failure: bool = True):
        super().__init__(parent)
        self.what, self.path = what, Path(path)
        self.fraction = 0.0
        self.outcome: str | None = None  # "written" | "failed" | "cancelled" once it ended
        self.message = ""
        self._show_failure = show_failure
        self.failure_box: QMessageBox | None = None
        self.dialog = QProgressDialog(f"Writing {what} to {self.path}…", "Cancel", 0, 1000, parent)
        self.dialog.setObjectName("exportProgress")
        self.dialog.setWindowTitle(f"Exporting {what}")
        self.dialog.setWindowModality(Qt.WindowModality.NonModal)  # the window stays usable while it writes
        self.dialog.setMinimumDuration(SHOW_AFTER_MS)
        self.dialog.setAutoClose(False)
        self.dialog.setAutoReset(False)
        self.dialog.setValue(0)
        self.dialog.canceled.connect(self.cancel)
        self.worker = GeneratorWorker(make_steps, niceness=WRITE_NICENESS, torch_threads=1, name="exportThread")
        self.worker.yielded.connect(self._on_progress)
        self.worker.returned.connect(lambda _: self._end("written"))
        self.worker.stopped.connect(lambda _: self._end("cancelled"))
        self.worker.errored.connect(lambda failure, _: self._end("failed", failure.text))
        BackgroundWrite.running.add(self)
        self.worker.start()

    @property
    def is_running(self) -> bool:
        return self.outcome is None

    def cancel(self) -> None:
        """Stop at the next chunk; nothing is left at the path (a file that was there stays as it was)."""
        if self.outcome is None:
            self.dialog.setLabelText(f"Cancelling the export of {self.what}…")
            self.worker.request_stop()

    def wait(self, timeout_ms: int = 60_000) -> bool:
        return self.worker.wait(timeout_ms)

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Cancel and join (the window is closing)."""
        self.cancel()
        return self.worker.shutdown(timeout_ms)

    @classmethod
    def shutdown_all(cls, timeout_ms: int = 60_000) -> bool:
        joined = True
        for write in list(cls.running):
            joined = write.shutdown(timeout_ms) and joined
        return joined

    def _on_progress(self, step: tuple[float, str]) -> None:
        fraction, doing = step
        self.fraction = float(fraction)
        if self.outcome is None and not self.worker.stop_requested:
            self.dialog.setValue(round(1000 * self.fraction))
            self.dialog.setLabelText(f"Writing {self.what} to {self.path}: {doing}…")

    def _end(self, outcome: str, message: str = "") -> None:
        self.outcome, self.message = outcome, message
        BackgroundWrite.running.discard(self)
        self.dialog.canceled.disconnect(self.cancel)
        self.dialog.reset()  # stops the timer that would show it later
        self.dialog.hide()
        self.dialog.deleteLater()
        if outcome == "written":
            self.written.emit(str(self.path))
        elif outcome == "cancelled":
            self.cancelled.emit()
        else:
            if self._show_failure:
                box = QMessageBox(QMessageBox.Icon.Warning, "Export failed",
                                  f"Could not export {self.what} to {self.path}: {message}\nNothing was written.",
                                  QMessageBox.StandardButton.Ok, self.parent())
                box.setObjectName("exportFailedBox")
                box.setTextFormat(Qt.TextFormat.PlainText)
                box.open()  # not blocking: the window goes on
                self.failure_box = box
            self.failed.emit(message)
        self.ended.emit()
