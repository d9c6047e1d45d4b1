"""Drive a step generator (the training engine's) in a worker thread, and probe snapshots in another.

The habits of superqt's `thread_worker` and Orange's `concurrent` helpers: the long work is a plain
generator, every `yield` is a point where it can be paused or stopped, a stop request is a flag (never a
killed thread), and only plain Python / numpy values cross a signal. Signals, in the order they can come:

    started → yielded* → (paused → resumed)* → one of returned | stopped | errored → finished

`finished` is always last. The GUI must not start new work from a `finished` slot (queue it with a
zero-delay timer instead) and must `shutdown()` (stop + join) a worker before its window closes.

The worker objects themselves stay in the GUI thread; only a small `_ThreadEntry` moves to the worker
thread to run the loop there. Qt delivers a signal to a plain Python callable (a lambda, pytest-qt's
`waitSignal`) in the thread the *sender* belongs to, so a worker moved to its thread would run such
callables there: a QTimer stopped from that thread is left dangling and crashes the GUI thread later.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QThread, Signal, Slot

from explorer._qt.gui_gc import collect_garbage_in_gui_thread


def to_plain(value: Any) -> Any:
    """A copy of `value` made only of Python scalars/containers and numpy arrays (safe to send to the GUI)."""
    if value is None or isinstance(value, (bool, int, float, str, np.ndarray, np.generic)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: to_plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_plain(item) for item in value)
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, without importing torch here
        array = value.detach().cpu().numpy()
        return array.item() if array.ndim == 0 else array
    if hasattr(value, "__fspath__"):
        return str(value)
    return value


def lower_this_thread_priority(niceness: int | None) -> None:
    """Give the calling thread a higher nice value (Linux: per thread), so the GUI thread wins the CPU.

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


def describe_exception(error: BaseException) -> dict:
    """The plain description of a worker's failure that `errored` carries."""
    return {
        "type": type(error).__name__,
        "message": str(error) or type(error).__name__,
        "traceback": "".join(traceback.format_exception(type(error), error, error.__traceback__)),
    }


class _ThreadEntry(QObject):
    """The one object that lives in a worker thread: it runs `target` there when the thread starts."""

    def __init__(self, target: Callable[[], None]):
        super().__init__()
        self._target = target

    @Slot()
    def run(self) -> None:
        self._target()

    @Slot()
    def quit_thread(self) -> None:
        QThread.currentThread().quit()


def _make_thread(name: str, target: Callable[[], None]) -> tuple[QThread, _ThreadEntry]:
    """A QThread that will run `target` when started; not started yet, so the caller can keep it first."""
    collect_garbage_in_gui_thread()
    thread = QThread()
    thread.setObjectName(name)
    entry = _ThreadEntry(target)
    entry.moveToThread(thread)
    thread.started.connect(entry.run)
    return thread, entry


class TrainingWorker(QObject):
    """Runs `make_steps()` and iterates it in its own QThread; one worker per run.

    make_steps: called in the worker thread (so slow set-up such as reading the corpus stays off the GUI
        thread); returns the step iterator.
    on_step: called in the worker thread after every step with the raw yielded value (e.g. to hand a
        weights snapshot to the probe worker); must be quick.
    stop_hook: called (from the thread that asks to stop) to pass the request to the engine, which then
        ends at its next step boundary and saves a checkpoint; the worker keeps draining the generator for
        at most `drain_limit` more steps. Without a hook the worker closes the generator at the boundary.
    torch_threads: intra-op threads for this thread's torch work (leave a core to the GUI on small CPUs).
    niceness: added to this thread's nice value (see `lower_this_thread_priority`); 0 leaves it.
    """

    started = Signal()
    yielded = Signal(object)  # the step's statistics, made plain
    paused = Signal(object)  # last step value seen (or None)
    resumed = Signal()
    returned = Signal(object)  # the generator's return value, made plain
    stopped = Signal(object)  # last step value seen before the stop took effect
    errored = Signal(object)  # describe_exception(...) plus "last_step"
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
    ):
        super().__init__()
        self._niceness = niceness
        self._make_steps = make_steps
        self._on_step = on_step
        self.stop_hook = stop_hook
        self._torch_threads = torch_threads
        self._drain_limit = drain_limit
        self._stop = threading.Event()
        self._pause = threading.Event()
        self._wake = threading.Condition()
        self._thread: QThread | None = None
        self._running = False
        self._done = threading.Event()
        self.steps_done = 0

    # ---- control (any thread) ----
    def start(self) -> None:
        """Start the worker in a new QThread (once)."""
        if self._thread is not None:
            raise RuntimeError("this worker was already started; make a new worker for a new run")
        # kept before the thread starts: a run that fails at once ends (and reads `_thread`) before start() returns
        self._thread, self._entry = _make_thread("trainingThread", self._run)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the run to stop at the next step boundary (also ends a pause)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self.stop_hook is not None:
            try:
                self.stop_hook()
            except Exception:  # the engine may not exist yet; the flag alone still stops the loop
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
        if self._thread is None:
            return True
        return self._thread.wait(timeout_ms)

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Stop and join: what a window does before it closes. True when the thread has ended."""
        self.request_stop()
        return self.wait(timeout_ms)

    # ---- the loop (worker thread) ----
    def _hold_while_paused(self, last: Any) -> None:
        if not self._pause.is_set() or self._stop.is_set():
            return
        self.paused.emit(to_plain(last))
        with self._wake:
            while self._pause.is_set() and not self._stop.is_set():
                self._wake.wait(0.25)
        if not self._stop.is_set():
            self.resumed.emit()

    @Slot()
    def _run(self) -> None:
        last = None
        outcome: tuple[Signal, Any] | None = None
        steps = None
        try:
            lower_this_thread_priority(self._niceness)
            if self._torch_threads:
                import torch

                torch.set_num_threads(self._torch_threads)
            self.started.emit()
            if self._stop.is_set():
                outcome = (self.stopped, None)
                return
            steps = iter(self._make_steps())
            drained = 0
            while True:
                self._hold_while_paused(last)
                if self._stop.is_set():
                    if self.stop_hook is None or drained >= self._drain_limit:
                        steps.close()  # GeneratorExit runs the generator's own clean-up
                        outcome = (self.stopped, last)
                        return
                    drained += 1
                try:
                    value = next(steps)
                except StopIteration as end:
                    if self._stop.is_set():
                        outcome = (self.stopped, last if end.value is None else to_plain(end.value))
                    else:
                        outcome = (self.returned, to_plain(end.value))
                    return
                last = value
                self.steps_done += 1
                if self._on_step is not None:
                    self._on_step(value)
                self.yielded.emit(to_plain(value))
        except BaseException as error:  # includes MemoryError; the GUI must hear about every failure
            info = describe_exception(error)
            info["last_step"] = to_plain(last)
            outcome = (self.errored, info)
            if steps is not None and hasattr(steps, "close"):
                try:
                    steps.close()
                except Exception:
                    pass
        finally:
            if outcome is not None:
                outcome[0].emit(outcome[1])
            self._done.set()
            self.finished.emit()
            QThread.currentThread().quit()


class ProbeWorker(QObject):
    """Runs `probe(step, snapshot)` in its own thread on the newest submitted snapshot.

    `submit` never blocks and never queues stale work: a snapshot submitted while the previous one is
    still being probed replaces any snapshot waiting behind it, so the training thread can hand over
    weights every N steps no matter how slow probing is.
    """

    probed = Signal(object)  # whatever `probe` returned (plain python / numpy / frozen dataclasses)
    failed = Signal(object)  # describe_exception(...) plus "step"
    _wake = Signal()
    _retire = Signal()

    def __init__(self, probe: Callable[[int, Any], Any], *, torch_threads: int | None = 1, niceness: int = 0):
        super().__init__()
        self._niceness = niceness
        self._niced = False
        self._probe = probe
        self._torch_threads = torch_threads
        self._lock = threading.Lock()
        self._pending: tuple[int, Any] | None = None
        self._busy = False
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False
        self.probe_seconds: list[float] = []  # wall time of each probe, for the benchmark
        self.dropped = 0
        self._thread, self._entry = _make_thread("probeThread", self._drain)
        self._wake.connect(self._entry.run)  # the entry lives in the probe thread: drains there
        self._retire.connect(self._entry.quit_thread)  # queued behind a probe in progress
        self._thread.start()

    def submit(self, step: int, snapshot: Any) -> None:
        """Probe `snapshot` (taken at `step`) as soon as the thread is free; thread-safe, never blocks."""
        with self._lock:
            if self._closed:
                return
            if self._pending is not None:
                self.dropped += 1
            self._pending = (int(step), snapshot)
            self._idle.clear()
            if self._busy:
                return
            self._busy = True
        self._wake.emit()

    @Slot()
    def _drain(self) -> None:
        if not self._niced:
            lower_this_thread_priority(self._niceness)
            self._niced = True
        if self._torch_threads:
            import torch

            torch.set_num_threads(self._torch_threads)
        while True:
            with self._lock:
                job, self._pending = self._pending, None
                if job is None or self._closed:
                    self._busy = False
                    self._idle.set()
                    return
            step, snapshot = job
            began = time.perf_counter()
            try:
                result = self._probe(step, snapshot)
            except Exception as error:
                info = describe_exception(error)
                info["step"] = step
                self.failed.emit(info)
            else:
                self.probe_seconds.append(time.perf_counter() - began)
                self.probed.emit(result)

    def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Block until nothing is pending or running (for tests and for the end of a run)."""
        return self._idle.wait(timeout_s)

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Drop pending work, let the running probe finish, end the thread."""
        with self._lock:
            already = self._closed
            self._closed = True
            self._pending = None
        if not already:
            self._retire.emit()  # runs in the probe thread after the probe in progress, then quits it
        return self._thread.wait(timeout_ms)

