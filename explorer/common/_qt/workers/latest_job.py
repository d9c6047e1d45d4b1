"""A newest-request-wins job off the GUI thread (an inspection as you type, a probe snapshot). The thread rules it
keeps are in `explorer.common._qt.workers`."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import torch
from PySide6.QtCore import QObject, Signal

from explorer.common._qt.workers.threads import lower_this_thread_priority, make_worker_thread
from explorer.common.failure import describe_exception

HAND_OVER_S = 0.002  # how long `submit` waits for the thread to take the job (it takes ~0.1 ms when a core is free)


class LatestJobWorker(QObject):
    """Runs `compute(job)` in its own long-lived thread on the newest job submitted.

    `submit` never waits for a job to run and never queues stale work: a job submitted while another is computed
    replaces any job waiting behind it (`dropped` counts those), so a user typing ten characters during a forward
    pass gets one more inspection, and a training thread can hand over weights every N steps however slow
    probing is. With `drop_superseded`, a result whose job was superseded while it was computed is not
    emitted either (an inspection of text already edited); without it every computed result is (each probe
    snapshot is kept).

    torch_threads: an int for every job, or a function of the job (`InspectionThreads`); None leaves it.
    niceness: added to this thread's nice value (rule 5).
    hand_over: `submit` to an idle thread waits (at most HAND_OVER_S) until the thread has taken the job. Python
    runs one thread at a time: without it the woken thread waits for the interpreter until the submitting one
    lets go of it, ~1.5 ms into whatever it does next (after an inspection's submit: the views redrawing the new
    input), and the job starts that much later. For a job someone is waiting for: the caller pauses instead,
    about as long (the thread's Python holds the interpreter until its first long torch call), while the job
    runs.
    """

    done = Signal(object, object)  # key, result
    failed = Signal(object, object)  # key, Failure
    _wake = Signal()
    _retire = Signal()

    def __init__(self, compute: Callable[[Any], Any], *, name: str = "latestJobThread",
                 torch_threads: int | Callable[[Any], int] | None = None, niceness: int = 0,
                 drop_superseded: bool = False, hand_over: bool = False):
        super().__init__()
        self._compute = compute
        self._torch_threads = torch_threads
        self._niceness = niceness
        self._drop_superseded = drop_superseded
        self._hand_over = hand_over
        self._lock = threading.Lock()
        self._pending: tuple[Any, Any] | None = None
        self._busy = False
        self._closed = False
        self._idle = threading.Event()
        self._idle.set()
        self._taken = threading.Event()  # set by the worker thread when it takes a job
        self._niced = False
        self._threads_set = 0
        self.dropped = 0  # jobs replaced before they started
        self.compute_seconds: deque[float] = deque(maxlen=10_000)  # wall time of each job, for the benchmarks
        self.last_compute_ms = float("nan")
        self.last_compute_cpu_ms = float("nan")  # CPU time of this thread: equals the wall time when alone
        self.last_threads = 0
        self._thread, self._entry = make_worker_thread(name, self._drain)
        self._wake.connect(self._entry.run)  # queued: drains in the worker thread
        self._retire.connect(self._entry.quit_thread)  # queued behind a job in progress
        self._thread.start()

    def submit(self, key: Any, job: Any) -> None:
        """Compute `job` as soon as the thread is free; `done(key, result)` follows. Thread-safe; it never waits for a
        job to run (with hand_over, only ~1-2 ms for an idle thread to take this one)."""
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
            self._taken.clear()
        self._wake.emit()
        if self._hand_over:
            self._taken.wait(HAND_OVER_S)  # lets go of the interpreter lock while it waits

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
            self._taken.set()
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
