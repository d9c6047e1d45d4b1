"""Python's cycle collector runs in the GUI thread only, once the window has worker threads.

The automatic collector runs in whichever thread allocates when a generation's threshold is crossed. When
that is a worker thread (an inspection, a training step) and the garbage holds a Qt object in a reference
cycle (a closed dialog, a replaced plot item), the object's C++ destructor runs off the GUI thread and Qt
aborts the process: CI once died with "Fatal Python error: Aborted … Garbage-collecting" inside
`model.eval()` of an inspection. So, from the first worker on, automatic collection is off and a timer in
the GUI thread collects, young generations often and the old one rarely. (On a timer, not by the counts the
automatic collector uses: those are allocations minus deallocations of the whole process, so a worker's
thousands of cyclic objects can be cancelled out by the GUI thread freeing others before a tick looks.)
Reference counting still frees everything that is not in a cycle at once, in any thread.

What exists when the collector is installed (the modules, classes and functions of torch, Qt and numpy:
about 200,000 objects) lives as long as the app, so it is frozen out of collection (`gc.freeze`): a full
collection walked it all in ~150 ms of GUI thread on the 2-core VM; after the freeze it takes a few ms.
What comes later and lives as long (a loaded model and the modules its loading imported, a tab's widgets)
is frozen the same way by `freeze_long_lived`, which the window calls when it has installed a model or
added a tab.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QObject, QThread, QTimer

COLLECT_INTERVAL_MS = 250  # the youngest generation, on every tick (microseconds when there is little)
TICKS_PER_GENERATION = (1, 10, 120)  # and the middle one every 2.5 s, everything every 30 s


class _GuiThreadCollector(QObject):
    def __init__(self, app: QCoreApplication):
        super().__init__(app)
        self.setObjectName("guiThreadCollector")
        self._ticks = 0
        self._timer = QTimer(self)
        self._timer.setInterval(COLLECT_INTERVAL_MS)
        self._timer.timeout.connect(self.collect_due)
        app.aboutToQuit.connect(self.restore)
        self._was_enabled = gc.isenabled()
        gc.disable()
        gc.collect()
        gc.freeze()
        self._timer.start()

    def collect_due(self) -> None:
        """Collect the oldest generation whose turn it is on this tick."""
        self._ticks += 1
        gc.collect(max(g for g, every in enumerate(TICKS_PER_GENERATION) if self._ticks % every == 0))

    def restore(self) -> None:
        self._timer.stop()
        if self._was_enabled:
            gc.enable()


def collect_garbage_in_gui_thread() -> QObject | None:
    """Install the GUI-thread collector (once per application); call it from the GUI thread.

    Returns the collector, or None where there is no application yet or the caller is not its GUI thread
    (then nothing changes).
    """
    app = QCoreApplication.instance()
    if app is None or QThread.currentThread() != app.thread():
        return None
    collector = app.findChild(_GuiThreadCollector, "guiThreadCollector")
    return collector if collector is not None else _GuiThreadCollector(app)


def freeze_long_lived() -> bool:
    """Collect now, then freeze what is still alive out of every later collection; call it from the GUI thread
    when something long-lived has just been built (the window calls it after installing a model and after
    adding a tab).

    Why: a loaded model, the modules its loading imported and a tab's widgets are ~125,000 objects made after
    the collector's install-time freeze (MiniLM in the window); every full collection walked them again, about
    100-150 ms of GUI thread every 30 s on the 2-core VM. Frozen, they are skipped.

    The trade-off: a frozen object that later becomes part of cyclic garbage is never collected (reference
    counting still frees whatever is not in a cycle, frozen or not). What is frozen here lives as long as the
    window or until the next model, and a model is freed by reference counting: dropping a frozen MiniLM
    leaves no cycle behind (measured: 0 unreachable objects after `gc.unfreeze(); gc.collect()`). So at worst
    a little cyclic garbage made before the call outlives its use; the collection here catches what is
    garbage already. Collecting in this thread also keeps the rule above: a Qt object is never destroyed in a
    worker.

    Returns False, changing nothing, where there is no application or the caller is not its GUI thread.
    """
    app = QCoreApplication.instance()
    if app is None or QThread.currentThread() != app.thread():
        return False
    gc.collect()
    gc.freeze()
    return True
