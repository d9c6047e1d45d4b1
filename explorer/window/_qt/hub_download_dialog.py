"""Model ▸ Download from the Hub…: a repo id in, the model in the local Hugging Face cache out, then opened.

bertcore.models.hub_download.download_model does the work in a `OneShotWorker` thread (as the model loader does); it
reports (bytes done, bytes in all, file name) from that thread, which crosses to the GUI thread through a queued
signal, and it polls a cancel flag every 50 ms: Cancel takes effect within a second whatever the server does (a
stalled or trickling server included). When no byte has come for a few seconds the status line says for how long,
so the user can tell a stall from a slow start. HF_ENDPOINT and HF_TOKEN are read by bertcore at each download.
Its failures are CheckpointErrors that already say what to do, so their message is shown as it is.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from bertcore.models.hub import DEFAULT_ENDPOINT, ResolvedModel, default_cache_dir
from bertcore.models.hub_download import download_model
from explorer.common._qt.widget_names import named
from explorer.common._qt.workers.one_shot import OneShotWorker
from explorer.window._qt.model_picker import size_text

PROGRESS_STEPS = 1000  # QProgressBar holds a 32-bit int: show per mille, not bytes (weights pass 2 GB)
QUIET_SECONDS = 5  # no byte for this long is said on the status line


class HubDownloadDialog(QDialog):
    """Type a repo id, Download, watch the bytes, Cancel; `downloaded(folder)` when the snapshot is complete."""

    downloaded = Signal(str)  # the snapshot folder, to open
    ended = Signal(str)  # "downloaded", "cancelled" or "failed": the state the dialog now shows
    _progressed = Signal(int, int, str)  # emitted from the download thread; queued to the GUI thread

    def __init__(self, parent: QWidget | None = None, *,
                 download: Callable[..., ResolvedModel] = download_model):
        super().__init__(parent)
        self.setObjectName("hubDownload")
        self.setWindowTitle("Download a model from the Hugging Face Hub")
        self._download = download
        self._job = 0
        self._repo_id = ""
        self._cancel = threading.Event()
        self._workers: dict[int, OneShotWorker] = {}
        self._last_news = time.monotonic()  # when the download last reported (bytes, or a new file)
        self._activity = ""  # what the status line says while bytes come
        self._quiet_timer = QTimer(self)
        self._quiet_timer.setInterval(1000)
        self._quiet_timer.timeout.connect(self._show_quiet)
        self.repo_edit = named(QLineEdit(), "repoIdEdit", "Repo id",
                               "The model's name as on its Hub page: organisation/name")
        self.repo_edit.setPlaceholderText("org/name, e.g. google-bert/bert-base-uncased")
        self.where_label = named(QLabel(), "downloadWhere", "Where the download goes")
        self.where_label.setWordWrap(True)
        self.progress_bar = named(QProgressBar(), "downloadProgress", "Download progress")
        self.progress_bar.setRange(0, PROGRESS_STEPS)
        self.progress_bar.setValue(0)
        self.progress_bar.setTextVisible(True)
        self.progress_bar.setFormat("")
        self.status_label = named(QLabel(), "downloadStatus", "Download status")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.download_button = named(QPushButton("&Download"), "startDownload", "Download the model")
        self.cancel_button = named(QPushButton("&Cancel download"), "cancelDownload", "Cancel the download",
                                   "Stops within a second, whatever the server does; nothing of this download is "
                                   "kept in the cache")
        self.close_button = named(QPushButton("Close"), "closeDownload", "Close this dialog")
        buttons = QDialogButtonBox()
        buttons.addButton(self.download_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.cancel_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.close_button, QDialogButtonBox.ButtonRole.RejectRole)
        self.download_button.setDefault(True)

        form = QFormLayout()
        form.addRow("Repo id:", self.repo_edit)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.where_label)
        layout.addWidget(self.progress_bar)
        layout.addWidget(self.status_label)
        layout.addStretch(1)
        layout.addWidget(buttons)
        self.resize(620, 240)

        self.repo_edit.textChanged.connect(self._update_buttons)
        self.repo_edit.returnPressed.connect(self.start)
        self.download_button.clicked.connect(lambda: self.start())  # not start(checked)
        self.cancel_button.clicked.connect(lambda: self.cancel())
        self.close_button.clicked.connect(self.reject)
        self._progressed.connect(self._show_progress)
        self.show_where()
        self._update_buttons()

    # ---- what the window and the buttons ask for ----
    def show_where(self) -> None:
        """Name the Hub and the cache as the environment says now (HF_ENDPOINT, HF_HUB_CACHE / HF_HOME)."""
        endpoint = (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        token = " with the token in HF_TOKEN" if os.environ.get("HF_TOKEN") else ""
        self.where_label.setText(f"From {endpoint}{token} into {default_cache_dir()}. Only the weights, config and "
                                 "tokenizer files are fetched.")

    def start(self, repo_id: str | None = None) -> None:
        """Download `repo_id` (default: what the field holds) unless a download is running."""
        if self.is_downloading():
            return
        if repo_id is not None:
            self.repo_edit.setText(repo_id)
        self._repo_id = self.repo_edit.text().strip()
        if not self._repo_id:
            return
        self._job += 1
        self._cancel = threading.Event()
        cancel, repo, progressed = self._cancel, self._repo_id, self._progressed

        def job() -> ResolvedModel:
            return self._download(repo, progress=lambda done, total, name: progressed.emit(done, total, name),
                                  cancel=cancel.is_set)

        worker = OneShotWorker(self._job, job, name="downloadThread")
        worker.done.connect(self._on_done)
        worker.failed.connect(self._on_failed)
        self._workers[worker.key] = worker
        worker.finished.connect(lambda: self._forget(worker.key))
        self.show_where()
        self.progress_bar.setValue(0)
        self.progress_bar.setFormat("")
        self._activity = f"Asking the Hub for {repo}…"
        self._last_news = time.monotonic()
        self.status_label.setText(self._activity)
        self._quiet_timer.start()
        worker.start()
        self._update_buttons()

    def cancel(self) -> None:
        """Stop the download (within a second, whatever the server does); `ended("cancelled")` follows."""
        if self.is_downloading():
            self._cancel.set()
            self.status_label.setText(f"Cancelling the download of {self._repo_id}…")
            self.cancel_button.setEnabled(False)

    def is_downloading(self) -> bool:
        return any(worker.is_running for worker in self._workers.values())

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel and join: what the window does before it closes. True when no download thread is left."""
        self._cancel.set()
        return all([worker.wait(timeout_ms) for worker in list(self._workers.values())])

    def reject(self) -> None:
        self.cancel()  # closing the dialog does not leave a download running unseen
        super().reject()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.cancel()
        super().closeEvent(event)

    # ---- the download's reports ----
    def _show_progress(self, done: int, total: int, filename: str) -> None:
        if self._cancel.is_set():
            return  # chunks in flight when Cancel was pressed: "Cancelling…" stays
        self.progress_bar.setValue(min(PROGRESS_STEPS, done * PROGRESS_STEPS // total) if total else 0)
        self.progress_bar.setFormat(f"{size_text(done)} of {size_text(total)} (%p%)")
        self._activity = f"Downloading {self._repo_id}: {filename}"
        self._last_news = time.monotonic()
        self.status_label.setText(self._activity)

    def _show_quiet(self) -> None:
        """While nothing comes: say for how long, so a stall is seen (Cancel acts at once all the same)."""
        if not self.is_downloading() or self._cancel.is_set():
            return
        quiet = time.monotonic() - self._last_news
        if quiet >= QUIET_SECONDS:
            self.status_label.setText(f"{self._activity} — nothing received for {quiet:.0f}\u00a0s; the Hub or the "
                                      "network is slow (Cancel stops the download at once)")

    def _on_done(self, job: int, resolved: ResolvedModel) -> None:
        if job != self._job:
            return
        self._quiet_timer.stop()
        self.progress_bar.setValue(PROGRESS_STEPS)
        self.status_label.setText(f"Downloaded {resolved.display_name} into {resolved.folder}; opening it.")
        self.ended.emit("downloaded")
        self.accept()
        self.downloaded.emit(str(resolved.folder))

    def _on_failed(self, job: int, failure) -> None:
        if job != self._job:
            return
        self._quiet_timer.stop()
        if failure.is_a("DownloadCancelled"):
            self.progress_bar.setValue(0)
            self.progress_bar.setFormat("")
            self.status_label.setText(f"Download cancelled: nothing of {self._repo_id} was kept.")
            self.ended.emit("cancelled")
        else:
            # bertcore's CheckpointErrors already say what to do; anything else is a bug: its type and place
            self.status_label.setText(failure.message if failure.is_a("CheckpointError") else failure.text)
            self.ended.emit("failed")

    def _forget(self, key: int) -> None:
        worker = self._workers.pop(key, None)
        if worker is not None:
            worker.wait()  # `finished` comes just before its thread ends
            worker.deleteLater()
        self._update_buttons()

    def _update_buttons(self, *_args) -> None:
        running = self.is_downloading()
        self.download_button.setEnabled(not running and bool(self.repo_edit.text().strip()))
        self.repo_edit.setReadOnly(running)
        self.cancel_button.setEnabled(running and not self._cancel.is_set())

