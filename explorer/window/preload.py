"""Import the app's heavy modules in a background thread while the first window paints (Qt-free).

`import torch` alone takes 1.5–2 s on a small CPU (more under load), and pyqtgraph and the window's own
modules another second; the window cannot be built without them. Started first thing, before Qt is
imported, the import runs while the interpreter loads Qt and paints the splash.

The cycle collector is off while it runs: a collection in that thread could reach a Qt object, which
aborts the process (see explorer/common/_qt/gui_gc.py), and nothing made during start-up needs collecting. Only
modules that create no QObject when imported belong in the list.
"""

from __future__ import annotations

import gc
import importlib
import threading

# torch first (the longest), then the model code over it, then the window's modules.
APP_MODULES = ("torch", "bertcore.data.masking", "bertcore.models.bert", "bertcore.models.checkpoint",
               "bertcore.analysis.inspection",
               "explorer.inspector.state", "pyqtgraph", "explorer.window._qt.main_window")


class Preloader:
    """Imports `modules` in a daemon thread; `done` is set when it has finished (`error` says if it failed)."""

    def __init__(self, modules: tuple[str, ...] = APP_MODULES):
        self.modules = modules
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        self._thread = threading.Thread(target=self._run, name="preloadThread", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for name in self.modules:
                importlib.import_module(name)
        except BaseException as error:  # reported in the GUI thread (the app shows it)
            self.error = error
        finally:
            self.done.set()

    def finish(self) -> None:
        """Join the thread and give the cycle collector back (call once `done` is set)."""
        self._thread.join()
        if self._gc_was_enabled:
            gc.enable()
