"""Work off the GUI thread, in one idiom for its three kinds.

- `GeneratorWorker`: iterates a step generator (a training run); every `yield` is a point where the run
  can be paused or stopped.
- `LatestJobWorker`: computes the newest job submitted (an inspection, a probe snapshot); a job submitted
  while another is computed replaces the one waiting, so nothing queues up.
- `OneShotWorker`: runs one function once (loading or saving a model).

The idiom, after superqt's `thread_worker` and Orange's `concurrent` helpers: the work is a plain generator
or function; a stop request is a flag (a thread is never killed); what comes back crosses a signal as plain
Python / numpy values or frozen dataclasses of them, and a failure as an `explorer.common.failure.Failure`, never as
the exception itself. The thread rules below each fixed a crash or a stall (see `git log`):

1. The worker objects stay in the GUI thread; only a small `_ThreadEntry` moves to the worker thread and
   runs the work there. Qt delivers a signal to a plain Python callable (a lambda, pytest-qt's
   `waitSignal`) in the thread the *sender* belongs to, so a worker moved to its thread would run such
   callables there: a QTimer stopped from that thread is left dangling and crashes the GUI thread later.
2. Python's cycle collector runs only in the GUI thread once a worker thread exists (`gui_gc`): a Qt
   object collected in a worker thread aborts the process. Every worker installs that collector, from the
   GUI thread, before its thread starts.
3. A thread is kept before it is started: work that fails at once ends (and reads the thread) before
   `start()` returns.
4. torch's intra-op thread count is per calling thread (OpenMP keeps it per thread), so each worker sets
   its own and the rest of the process keeps its count. Training leaves a core to the GUI on small
   machines; probes use one thread; an inspection uses one below a size (see
   `explorer.inspector.inspection_threads`).
5. Training and probe threads are niced (Linux: per thread), so the GUI thread wins the CPU and a repaint
   never waits behind a training step.
6. The GUI never starts new work from a `finished` slot (queue it with a zero-delay timer instead), and a
   window shuts its workers down (stop, then join) before it closes: a QThread destroyed while its thread
   still runs aborts the process.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import torch
from PySide6.QtCore import QObject, QThread, Signal, Slot

from explorer.common._qt.gui_gc import collect_garbage_in_gui_thread
from explorer.common.failure import describe_exception


# ---------------------------------------------------------------- the thread an idiom runs in
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


def _make_thread(name: str, target: Callable[[], None]) -> tuple[QThread, _ThreadEntry]:
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


# ---------------------------------------------------------------- a generator run
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
        self._thread, self._entry = _make_thread(self._name, self._run)
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


# ---------------------------------------------------------------- a newest-request-wins job
class LatestJobWorker(QObject):
    """Runs `compute(job)` in its own long-lived thread on the newest job submitted.

    `submit` never blocks and never queues stale work: a job submitted while another is computed replaces
    any job waiting behind it (`dropped` counts those), so a user typing ten characters during a forward
    pass gets one more inspection, and a training thread can hand over weights every N steps however slow
    probing is. With `drop_superseded`, a result whose job was superseded while it was computed is not
    emitted either (an inspection of text already edited); without it every computed result is (each probe
    snapshot is kept).

    torch_threads: an int for every job, or a function of the job (`InspectionThreads`); None leaves it.
    niceness: added to this thread's nice value (rule 5).
    """

    done = Signal(object, object)  # key, result
    failed = Signal(object, object)  # key, Failure
    _wake = Signal()
    _retire = Signal()

    def __init__(self, compute: Callable[[Any], Any], *, name: str = "latestJobThread",
                 torch_threads: int | Callable[[Any], int] | None = None, niceness: int = 0,
                 drop_superseded: bool = False):
        super().__init__()
        self._compute = compute
        self._torch_threads = torch_threads
        self._niceness = niceness
        self._drop_superseded = drop_superseded
        self._lock = threading.Lock()
        self._pending: tuple[Any, Any] | None = None
        self._busy = False
        self._closed = False
        self._idle = threading.Event()
        self._idle.set()
        self._niced = False
        self._threads_set = 0
        self.dropped = 0  # jobs replaced before they started
        self.compute_seconds: deque[float] = deque(maxlen=10_000)  # wall time of each job, for the benchmarks
        self.last_compute_ms = float("nan")
        self.last_compute_cpu_ms = float("nan")  # CPU time of this thread: equals the wall time when alone
        self.last_threads = 0
        self._thread, self._entry = _make_thread(name, self._drain)
        self._wake.connect(self._entry.run)  # queued: drains in the worker thread
        self._retire.connect(self._entry.quit_thread)  # queued behind a job in progress
        self._thread.start()

    def submit(self, key: Any, job: Any) -> None:
        """Compute `job` as soon as the thread is free; `done(key, result)` follows. Thread-safe, never blocks."""
        with self._lock:
            if self._closed:
                return
            if self._pending is not None:
                self.dropped += 1
            self._pending = (key, job)
            self._idle.clear()
            if self._busy:
                return
            self._busy = True
        self._wake.emit()

    @property
    def is_running(self) -> bool:
        return self._thread.isRunning()

    def wait_idle(self, timeout_s: float = 30.0) -> bool:
        """Block until nothing is waiting or computing (tests, the end of a run)."""
        return self._idle.wait(timeout_s)

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Drop the waiting job, let the one computing finish, end the thread (rule 6). True when it ended."""
        with self._lock:
            already = self._closed
            self._closed = True
            self._pending = None
        if not already:
            self._retire.emit()  # runs in the worker thread after the job in progress, then quits it
        return self._thread.wait(timeout_ms)

    # ---- worker thread ----
    def _drain(self) -> None:
        if not self._niced:
            lower_this_thread_priority(self._niceness)
            self._niced = True
        while True:
            with self._lock:
                job, self._pending = self._pending, None
                if job is None or self._closed:
                    self._busy = False
                    self._idle.set()
                    return
            key, work = job
            threads = self._torch_threads(work) if callable(self._torch_threads) else self._torch_threads
            if threads and threads != self._threads_set:
                torch.set_num_threads(threads)
                self._threads_set = threads
            self.last_threads = threads or torch.get_num_threads()
            began, began_cpu = time.perf_counter(), time.thread_time()
            try:
                result, failure = self._compute(work), None
            except Exception as error:  # a bad job must not end the worker; the window shows the message
                result, failure = None, describe_exception(error)
            seconds = time.perf_counter() - began
            self.compute_seconds.append(seconds)
            self.last_compute_ms = seconds * 1e3
            self.last_compute_cpu_ms = (time.thread_time() - began_cpu) * 1e3
            with self._lock:
                superseded = self._closed or (self._drop_superseded and self._pending is not None)
            if superseded:
                continue
            if failure is None:
                self.done.emit(key, result)
            else:
                self.failed.emit(key, failure)


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
        self._thread, self._entry = _make_thread(name, self._run)

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
