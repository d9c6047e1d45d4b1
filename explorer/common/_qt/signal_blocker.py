"""`blocked(*objects)`: the Qt signals of each object are held back for the block, then restored as they were.

A view that shows the state it just wrote (or that the state announced) sets its own widgets; without a blocker
each setter would emit the widget's change signal again and echo back into the state. Qt's `QSignalBlocker` does
the work; this gathers several objects into one `with` and so replaces the bare `blockSignals(True)` /
`blockSignals(False)` pairs, which leave the signals off for good when a setter between them raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from PySide6.QtCore import QObject, QSignalBlocker

__all__ = ["blocked"]


@contextmanager
def blocked(*objects: QObject) -> Iterator[None]:
    """Hold back the signals of every object in `objects` inside the `with` block (None entries are skipped)."""
    with ExitStack() as stack:
        for qobject in objects:
            if qobject is not None:
                blocker = QSignalBlocker(qobject)
                stack.callback(blocker.unblock)
        yield
