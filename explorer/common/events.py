"""A small observer for the app's plain-Python state: a state object owns an `Event`, views `connect` to it.

It is Qt-free so that state runs and is tested headless; the Qt layer connects its widgets' slots like any
other callable. A bound method is held weakly: a view that goes away is dropped from the event, not kept alive
by it, and never called after it went. Any other callable (a function, a lambda) is held as given.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Event"]


class Event:
    """Callbacks called in the order they were connected, each with what `emit` was given."""

    def __init__(self) -> None:
        self._callbacks: list[Callable[[], Callable | None]] = []  # each returns the callback, or None once gone

    def connect(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        """Call `callback` on every `emit` from now on (once, however often it is connected); returns it."""
        if not callable(callback):
            raise TypeError(f"Event.connect takes a callable; it was given {callback!r}")
        if callback not in self.callbacks():
            if hasattr(callback, "__self__") and hasattr(callback, "__func__"):
                self._callbacks.append(weakref.WeakMethod(callback))
            else:
                self._callbacks.append(lambda: callback)
        return callback

    def disconnect(self, callback: Callable[..., Any]) -> None:
        """Stop calling `callback`; one never connected (or already gone) is passed over."""
        self._callbacks = [ref for ref in self._callbacks if ref() not in (None, callback)]

    def callbacks(self) -> list[Callable[..., Any]]:
        """The callbacks alive now, in order."""
        return [callback for callback in (ref() for ref in self._callbacks) if callback is not None]

    def emit(self, *args: Any) -> None:
        """Call every callback alive with `args`; one connected or disconnected meanwhile counts from the next."""
        self._callbacks = [ref for ref in self._callbacks if ref() is not None]
        for callback in self.callbacks():
            callback(*args)
