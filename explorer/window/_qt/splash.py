"""The first seconds of the app: a window on screen before torch is imported, and the clock that times it.

`import torch` alone takes 1.5–2 s on a small CPU (more under load), and everything that draws an
inspection needs it, so the main window cannot be built without it. The app therefore shows a splash
(Qt only, painted in well under a second) while torch, the model code and the window's modules are
imported in a background thread (explorer.window.preload, started before Qt is), and builds the main window
when that is done (`when_done`); the model itself then loads in the window's own loader thread.

With BERT_EXPLORER_TIMING=1 in the environment, `StartupClock` prints when the first window was painted,
when the main window was shown, and when the first heatmap was painted, as "bert-explorer-timing <event>
<unix time>" lines on stderr (benchmarks/startup_time.py reads them).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QPixmap
from PySide6.QtWidgets import QSplashScreen, QWidget

TIMING_ENV = "BERT_EXPLORER_TIMING"


class StartupClock(QObject):
    """Prints start-up events with BERT_EXPLORER_TIMING=1; each event once. Watches paints of widgets."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.enabled = os.environ.get(TIMING_ENV, "") not in ("", "0")
        self.seen: set[str] = set()
        self._paint_events: dict[int, str] = {}  # id(watched object) -> event to report at its next paint

    def report(self, event: str) -> None:
        if event in self.seen:
            return
        self.seen.add(event)
        if self.enabled:
            print(f"bert-explorer-timing {event} {time.time():.3f}", file=sys.stderr, flush=True)

    def on_next_paint(self, widget: QWidget, event: str, then: Callable[[], None] | None = None) -> None:
        """Report `event` when `widget` next paints, then call `then` (in the GUI thread)."""
        self._paint_events[id(widget)] = (event, then)
        widget.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.Paint and id(watched) in self._paint_events:
            name, then = self._paint_events.pop(id(watched))
            watched.removeEventFilter(self)

            def painted() -> None:  # the paint is under way; it has ended when the next event is handled
                self.report(name)
                if then is not None:
                    then()

            QTimer.singleShot(0, self, painted)
        return False


class Splash(QSplashScreen):
    """The app's name and what it is doing, drawn without any image file.

    Its text is drawn by QSplashScreen itself when it first paints, inside the event loop, where the C++
    code runs outside the interpreter's lock: Qt's font set-up (~1 s the first time on a small machine)
    then overlaps the background import instead of holding it up, as drawing the text here would.
    """

    def __init__(self):
        pixmap = QPixmap(460, 150)
        pixmap.fill(QColor("#20324a"))
        super().__init__(pixmap)
        self.setObjectName("splash")
        font = QFont()
        font.setPointSize(12)
        self.setFont(font)

    def say(self, text: str) -> None:
        self.showMessage(f"bert-explorer\nSee inside BERT and watch it learn\n\n{text}",
                         Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, QColor("white"))


def when_done(preloader, callback: Callable[[], None], poll_ms: int = 15) -> QTimer:
    """Call `callback` in the GUI thread once `preloader` (explorer.window.preload.Preloader) has finished."""
    timer = QTimer()
    timer.setInterval(poll_ms)

    def check() -> None:
        if preloader.done.is_set():
            timer.stop()
            preloader.finish()
            callback()

    timer.timeout.connect(check)
    timer.start()
    return timer
