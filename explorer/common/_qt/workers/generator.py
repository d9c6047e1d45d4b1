"""A generator run off the GUI thread (a training run, a corpus analysis): cancellable and pausable between steps.
The thread rules it keeps are in `explorer.common._qt.workers`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
from PySide6.QtCore import QObject, QThread, Signal

from explorer.common._qt.workers.threads import lower_this_thread_priority, make_worker_thread
from explorer.common.failure import describe_exception


class GeneratorWorker(QObject):
    """Runs `make_steps()` and iterates it in its own thread; one worker per run. Signals, in the order they
    can come:

        started → yielded* → (paused → resumed)* → one of returned | stopped | errored → finished

    make_steps: called in the worker thread (so slow set-up such as reading a corpus stays off the GUI
        thread); returns the step iterator. Its values cross `yielded` as they are: they must be plain.
    on_step: called in the worker thread after every step with the value yielded (e.g. to hand a weights
        snapshot to a prober); must be quick.
    stop_hook: called (from the thread that asks to stop) to pass the request to the work itself, which then
        ends at its next step boundary (a training run saves a checkpoint); the worker keeps draining the
        generator for at most `drain_limit` more steps. Without a hook the worker closes the generator.
    torch_threads: intra-op threads for this thread's torch work (rule 4); None leaves the count alone.
    niceness: added to this thread's nice value (rule 5); 0 leaves it.
    """

    started = Signal()
    yielded = Signal(object)  # the step's value, as the generator yielded it
    paused = Signal(object)  # the last value yielded (or None)
    resumed = Signal()
    returned = Signal(object)  # the generator's return value
    stopped = Signal(object)  # the last value yielded before the stop took effect
    errored = Signal(object, object)  # Failure, the last value yielded before it (None: none was)
    finished = Signal()  # always last

    def __init__(
        self,
        make_steps: Callable[[], Iterator],
        *,
        on_step: Callable[[Any], None] | None = None,
        stop_hook: Callable[[], None] | None = None,
        torch_threads: int | None = None,
        niceness: int = 0,
        drain_limit: int = 2,
        name: str = "generatorThread",
    ):
        super().__init__()
        self._make_steps = make_steps
        self._on_step = on_step
        self.stop_hook = stop_hook
        self._torch_threads = torch_threads
        self._niceness = niceness
        self._drain_limit = drain_limit
        self._name = name
        self._stop = threading.Event()
        self._pause = threading.Event()
        self._wake = threading.Condition()
        self._done = threading.Event()
        self._thread: QThread | None = None
        self.steps_done = 0

    # ---- control (any thread) ----
    def start(self) -> None:
        """Start the worker in a new thread (once)."""
        if self._thread is not None:
            raise RuntimeError("this worker was already started; make a new worker for a new run")
        self._thread, self._entry = make_worker_thread(self._name, self._run)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the run to stop at the next step boundary (also ends a pause)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self.stop_hook is not None:
            try:
                self.stop_hook()
            except Exception:  # the work may not exist yet; the flag alone still stops the loop
                pass
        with self._wake:
            self._wake.notify_all()

    def pause(self) -> None:
        """Hold the run at the next step boundary until `resume()` or `request_stop()`."""
        self._pause.set()

    def resume(self) -> None:
        self._pause.clear()
        with self._wake:
            self._wake.notify_all()

    @property
    def is_paused(self) -> bool:
        return self._pause.is_set()

    @property
    def is_running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def wait(self, timeout_ms: int = 30_000) -> bool:
        """Block until the worker thread has ended (True) or the timeout passed (False)."""
        return True if self._thread is None else self._thread.wait(timeout_ms)

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Stop and join: what a window does before it closes (rule 6). True when the thread has ended."""
        self.request_stop()
        return self.wait(timeout_ms)

    # ---- the loop (worker thread) ----
    def _hold_while_paused(self, last: Any) -> None:
        if not self._pause.is_set() or self._stop.is_set():
            return
        self.paused.emit(last)
        with self._wake:
            while self._pause.is_set() and not self._stop.is_set():
                self._wake.wait(0.25)
        if not self._stop.is_set():
            self.resumed.emit()

    def _run(self) -> None:
        last = None
        outcome: tuple[Signal, tuple] | None = None
        steps = None
        try:
            lower_this_thread_priority(self._niceness)
            if self._torch_threads:
                torch.set_num_threads(self._torch_threads)
            self.started.emit()
            if self._stop.is_set():
                outcome = (self.stopped, (None,))
                return
            steps = iter(self._make_steps())
            drained = 0
            while True:
                self._hold_while_paused(last)
                if self._stop.is_set():
                    if self.stop_hook is None or drained >= self._drain_limit:
                        steps.close()  # GeneratorExit runs the generator's own clean-up
                        outcome = (self.stopped, (last,))
                        return
                    drained += 1
                try:
                    value = next(steps)
                except StopIteration as end:
                    if self._stop.is_set():
                        outcome = (self.stopped, (last if end.value is None else end.value,))
                    else:
                        outcome = (self.returned, (end.value,))
                    return
                last = value
                self.steps_done += 1
                if self._on_step is not None:
                    self._on_step(value)
                self.yielded.emit(value)
        except BaseException as error:  # MemoryError too: the GUI must hear about every failure
            outcome = (self.errored, (describe_exception(error), last))
            if steps is not None and hasattr(steps, "close"):
                try:
                    steps.close()
                except Exception:
                    pass
        finally:
            if outcome is not None:
                outcome[0].emit(*outcome[1])
            self._done.set()
            self.finished.emit()
            QThread.currentThread().quit()
