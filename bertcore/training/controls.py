"""What another thread (a GUI, a signal handler) may ask of a running training loop: stop, pause, resume, a
checkpoint. Each request is a flag the loop reads at its next step boundary, so no step is cut in half."""

from __future__ import annotations

import threading
import time


class LoopControls:
    """The thread-safe requests of `bertcore.training.loop.TrainingLoop` (its base class)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._unpaused = threading.Event()
        self._unpaused.set()
        self._checkpoint_requested = threading.Event()

    def request_stop(self) -> None:
        """Stop at the next step boundary (after writing a checkpoint); also ends a pause."""
        self._stop.set()
        self._unpaused.set()

    def pause(self) -> None:
        """Block the loop at the next step boundary until `resume()` or `request_stop()`."""
        self._unpaused.clear()

    def resume(self) -> None:
        self._unpaused.set()

    @property
    def is_paused(self) -> bool:
        return not self._unpaused.is_set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def request_checkpoint(self) -> None:
        """Write a checkpoint at the next step boundary (the yielded record's .checkpoint names it)."""
        self._checkpoint_requested.set()

    def _wait_while_paused(self) -> float:
        """Block while paused; returns the seconds waited."""
        paused_at = time.perf_counter()
        while not self._unpaused.wait(timeout=0.1):
            pass
        return time.perf_counter() - paused_at

    def _take_checkpoint_request(self) -> bool:
        """Whether a checkpoint was requested since the last call (the request is consumed)."""
        requested = self._checkpoint_requested.is_set()
        self._checkpoint_requested.clear()
        return requested
