"""A one-shot job off the GUI thread (loading or saving a model). The thread rules it keeps are in
`explorer.common._qt.workers`."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal

from explorer.common._qt.workers.threads import make_worker_thread
from explorer.common.failure import describe_exception


# ---------------------------------------------------------------- a one-shot job
class OneShotWorker(QObject):
    """Runs `job()` once in its own thread: `done(key, result)` or `failed(key, Failure)`, then `finished`.

    Loading a model cannot be interrupted half-way, so each load gets its own worker and the caller decides
    which result still counts (the newest load wins; a save never supersedes a load).
    """

    done = Signal(object, object)  # key, result
    failed = Signal(object, object)  # key, Failure
    finished = Signal()  # always last; the thread is ending: `wait()` before dropping the worker

    def __init__(self, key: Any, job: Callable[[], Any], *, name: str = "oneShotThread"):
        super().__init__()
        self.key = key
        self._job = job
        self._done = threading.Event()
        self._thread, self._entry = make_worker_thread(name, self._run)

    def start(self) -> None:
        self._thread.start()

    @property
    def is_running(self) -> bool:
        return self._thread.isRunning() and not self._done.is_set()

    def wait(self, timeout_ms: int = 30_000) -> bool:
        return self._thread.wait(timeout_ms)

    def _run(self) -> None:
        try:
            result = self._job()
        except Exception as error:  # any failure becomes a message; the caller keeps what it had
            self.failed.emit(self.key, describe_exception(error))
        else:
            self.done.emit(self.key, result)
        finally:
            self._done.set()
            self.finished.emit()
            QThread.currentThread().quit()
