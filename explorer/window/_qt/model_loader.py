"""Models in and out of the window, off the GUI thread: open a checkpoint folder, MiniLM, a new preset, the
start-up choice; save as. It remembers the checkpoint opened last and shows a busy cursor while it loads.

A load cannot be interrupted half-way, so each gets its own `OneShotWorker` and only the newest load asked
for counts: an older one that ends later is dropped. A save runs beside loads and never supersedes one.
Everything it has to say goes out through signals; the window decides how to show it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QSettings, Qt, Signal
from PySide6.QtWidgets import QApplication

import explorer.window.startup as startup
from explorer.common._qt.workers.one_shot import OneShotWorker

LAST_CHECKPOINT_KEY = "model/lastCheckpoint"


class ModelLoader(QObject):
    loaded = Signal(object)  # the LoadedModel of the newest load asked for
    failed = Signal(str, str)  # what could not be opened ("checkpoint /path"), why
    startupNote = Signal(str, bool)  # what start-up skipped and why; True when it is an error to show as one
    saved = Signal(str)  # the folder written
    saveFailed = Signal(str, str)  # the folder, why
    statusMessage = Signal(str, int)  # for the status bar: text ("" clears), milliseconds (0: until replaced)

    def __init__(self, settings: QSettings, device: str = "cpu", parent: QObject | None = None):
        super().__init__(parent)
        self.settings = settings
        self.device = device
        self._load_job = 0  # loads count up, saves down: a save never supersedes a load
        self._save_job = 0
        self._workers: dict[int, OneShotWorker] = {}

    # ---- what the window asks for ----
    def last_checkpoint(self) -> str | None:
        return self.settings.value(LAST_CHECKPOINT_KEY) or None

    def load_checkpoint(self, path: str) -> None:
        """Open a checkpoint folder, or a repo id in the local Hugging Face cache (never the network); on failure
        `failed` says why (the window keeps its model). What is remembered is the folder that loaded."""
        path = str(Path(path).expanduser())
        self._load(f"checkpoint {path}", lambda: startup.load_checkpoint(path, self.device), remember=True)

    def open_minilm(self) -> None:
        self._load("MiniLM", lambda: startup.load_minilm(self.device), remember=True)

    def new_untrained_model(self, preset_name: str) -> None:
        self._load(f"a new {preset_name} model",
                   lambda: startup.new_untrained_model(preset_name, device=self.device))

    def start_up(self, explicit_path: str | None = None) -> None:
        """The best model available (explorer.window.startup): the folder or cached repo id named, else the last
        one, else the default."""
        last_path = self.last_checkpoint()

        def choose() -> startup.StartupChoice:
            return startup.choose_startup_model(last_path, explicit_path=explicit_path, device=self.device)

        self._load("the start-up model", choose, explicit=explicit_path, is_startup=True)

    def save(self, model: Any, tokenizer: Any, path: str) -> None:
        """Write `model` in the standard folder layout."""
        from bertcore.models.checkpoint import save_pretrained

        self._save_job -= 1
        worker = OneShotWorker(self._save_job, lambda: save_pretrained(model, tokenizer, path), name="saveThread")
        worker.done.connect(lambda _job, _folder: self.saved.emit(path))
        worker.failed.connect(lambda _job, failure: self.saveFailed.emit(path, failure.text))
        self._run(worker)

    def is_loading(self) -> bool:
        return any(worker.is_running for worker in self._workers.values())

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Join the loads and saves still running (neither can be interrupted half-way; both are short)."""
        return all([worker.wait(timeout_ms) for worker in list(self._workers.values())])

    # ---- the jobs ----
    def _load(self, what: str, load: Callable[[], Any], *, remember: bool = False, explicit: str | None = None,
              is_startup: bool = False) -> None:
        self._load_job += 1
        worker = OneShotWorker(self._load_job, load, name="loadThread")
        worker.done.connect(lambda job, result: self._on_loaded(job, result, remember, explicit, is_startup))
        worker.failed.connect(lambda job, failure: self._on_load_failed(job, what, failure.text))
        self.statusMessage.emit(f"Loading {what}…", 0)
        if QApplication.overrideCursor() is None:
            QApplication.setOverrideCursor(Qt.CursorShape.BusyCursor)
        self._run(worker)

    def _run(self, worker: OneShotWorker) -> None:
        self._workers[worker.key] = worker
        worker.finished.connect(lambda: self._forget(worker.key))
        worker.start()

    def _forget(self, key: int) -> None:
        worker = self._workers.pop(key, None)
        if worker is not None:
            worker.wait()  # `finished` comes just before its thread ends: drop the thread only once it has
            worker.deleteLater()
        if not self.is_loading():
            while QApplication.overrideCursor() is not None:
                QApplication.restoreOverrideCursor()

    def _on_loaded(self, job: int, result: Any, remember: bool, explicit: str | None, is_startup: bool) -> None:
        if job != self._load_job:
            return  # the user asked for another model meanwhile
        self.statusMessage.emit("", 0)
        if is_startup:
            choice: startup.StartupChoice = result
            result = choice.loaded
            self.loaded.emit(result)
            notes = [note for note in choice.notes if note != startup.FIRST_RUN_NOTE]
            if explicit and choice.source != startup.COMMAND_LINE:
                # the model asked for on the command line failed: an error, with what was opened instead
                self.startupNote.emit(f"Could not open {explicit}: " + "; ".join(notes)
                                      + f". Showing {result.info.label} instead.", True)
                return
            if notes:
                self.startupNote.emit("Start-up: " + "; ".join(notes) + ".", False)
            remember = bool(explicit)
        else:
            self.loaded.emit(result)
            self.statusMessage.emit(f"Loaded {result.info.name}", 6000)  # its facts are in the model label beside
        if remember and result.info.path:
            # the folder itself: a repo id resolves to its snapshot, which reopens without the cache's refs
            self.settings.setValue(LAST_CHECKPOINT_KEY, result.info.path)
            self.settings.sync()

    def _on_load_failed(self, job: int, what: str, message: str) -> None:
        if job == self._load_job:
            self.statusMessage.emit("", 0)
            self.failed.emit(what, message)
