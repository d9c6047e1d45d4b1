"""The thread a worker runs its work in (`make_worker_thread`) and the priority it runs at
(`lower_this_thread_priority`); the rules they keep are in `explorer.common._qt.workers`."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, QThread, Slot

from explorer.common._qt.gui_gc import collect_garbage_in_gui_thread


class _ThreadEntry(QObject):
    """The one object that lives in a worker thread: it runs `target` there when asked (rule 1)."""

    def __init__(self, target: Callable[[], None]):
        super().__init__()
        self._target = target

    @Slot()
    def run(self) -> None:
        self._target()

    @Slot()
    def quit_thread(self) -> None:
        QThread.currentThread().quit()


def make_worker_thread(name: str, target: Callable[[], None]) -> tuple[QThread, _ThreadEntry]:
    """A QThread that runs `target` when started; not started yet, so the caller can keep it first (rule 3)."""
    collect_garbage_in_gui_thread()  # rule 2
    thread = QThread()
    thread.setObjectName(name)
    entry = _ThreadEntry(target)
    entry.moveToThread(thread)
    thread.started.connect(entry.run)
    return thread, entry


def lower_this_thread_priority(niceness: int | None) -> None:
    """Give the calling thread a higher nice value (Linux: per thread), so the GUI thread wins the CPU (rule 5).

    On a small machine the training and probe threads compete with the GUI thread for cores; a repaint that
    waits behind them is a stutter. Elsewhere (or without permission) this quietly does nothing.
    """
    if not niceness or not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return
    try:
        thread_id = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread_id, os.getpriority(os.PRIO_PROCESS, thread_id) + niceness)
    except OSError:
        pass
