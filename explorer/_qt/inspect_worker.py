"""Model work off the GUI thread: inspections (newest request wins) and checkpoint loading.

`InspectWorker` is one long-lived thread with a single slot for the next request. `submit` overwrites that
slot, so while a forward pass runs the user can type ten more characters and only the last of them is
computed next; nothing queues up. A result whose request has been superseded is dropped rather than
emitted. Only the request id, the `Inspection` (numpy arrays and plain lists) and error text cross signals.

Threads: a forward pass of a small input is a few hundred tiny kernels, and with two OpenMP threads each
kernel waits for the slower thread; when anything else wants a core (the training tab, the GUI thread, another
program) that wait costs a time slice per kernel, and a 7 ms inspection took 100–400 ms in measurements on
a busy 2-core machine. So inspections below `SINGLE_THREAD_FLOPS` run on one thread (set per thread: OpenMP
keeps the count per calling thread, so the rest of the process keeps its own); larger ones use every thread
unless the load average says other work holds the cores (then one thread was faster even for base at 512).

`LoadWorker` runs one loading function (a checkpoint, a preset) and keeps the result on itself; the signal
carries just the job id, and the window takes the model from `worker.result` on the GUI thread.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import torch
from PySide6.QtCore import QThread, Signal

from explorer._qt.gui_gc import collect_garbage_in_gui_thread
from explorer.state import InspectRequest, run_inspection

SINGLE_THREAD_FLOPS = 2e9  # mini at 30 tokens is ~0.25 GFLOP, base at 30 ~5, mini at 512 ~4, base at 512 ~100


def estimated_flops(request: InspectRequest) -> float:
    """Multiply-adds ×2 of one forward pass: the dense layers plus the attention products."""
    config = request.model.config
    positions, hidden, layers = len(request.encoding), config.hidden_size, config.num_hidden_layers
    dense = 2 * positions * layers * (4 * hidden * hidden + 2 * hidden * config.intermediate_size)
    attention = 4 * layers * positions * positions * hidden
    return float(dense + attention)


class InspectWorker(QThread):
    inspected = Signal(int, object)  # request id, bertcore.inspection.Inspection
    failed = Signal(int, str)  # request id, message

    def __init__(self, compute: Callable[[InspectRequest], Any] = run_inspection, parent=None):
        super().__init__(parent)
        collect_garbage_in_gui_thread()
        self.setObjectName("inspectWorker")
        self._compute = compute
        self._condition = threading.Condition()
        self._pending: InspectRequest | None = None
        self._latest_id = 0
        self._stopping = False
        self._working = False
        self.computed_count = 0  # results emitted (the rest were superseded before or while computing)
        self.last_compute_ms = float("nan")  # the forward pass and numpy copies of the last request
        self.last_compute_cpu_ms = float("nan")
        self.last_threads = 0
        self.max_threads = torch.get_num_threads()  # used for inspections of SINGLE_THREAD_FLOPS and more

    def submit(self, request: InspectRequest) -> None:
        """Replace whatever was waiting; starts the thread on first use."""
        with self._condition:
            self._pending = request
            self._latest_id = max(self._latest_id, request.request_id)
            self._condition.notify()
        if not self.isRunning() and not self._stopping:
            self.start()

    def is_busy(self) -> bool:
        with self._condition:
            return self._pending is not None or self._working

    def threads_for(self, request: InspectRequest) -> int:
        try:
            large = estimated_flops(request) >= SINGLE_THREAD_FLOPS
        except AttributeError:  # a request without a real model (tests): nothing to size
            large = False
        return self.max_threads if large and not _cores_busy() else 1

    def stop(self, timeout_ms: int = 10_000) -> bool:
        """Ask the loop to end after the current forward pass and wait for it; True when it ended."""
        with self._condition:
            self._stopping = True
            self._pending = None
            self._condition.notify()
        return self.wait(timeout_ms) if self.isRunning() else True

    def run(self) -> None:
        while True:
            with self._condition:
                while self._pending is None and not self._stopping:
                    self._condition.wait()
                if self._stopping:
                    return
                request, self._pending = self._pending, None
                self._working = True
            started, started_cpu = time.perf_counter(), time.thread_time()
            try:
                self.last_threads = self.threads_for(request)
                torch.set_num_threads(self.last_threads)
                result = self._compute(request)
                error = None
            except Exception as exc:  # a bad request must not kill the worker; the window shows the message
                result, error = None, _describe(exc)
            self.last_compute_ms = (time.perf_counter() - started) * 1e3
            # CPU time of this thread: equal to the wall time on an idle machine when one thread computes
            self.last_compute_cpu_ms = (time.thread_time() - started_cpu) * 1e3
            with self._condition:
                self._working = False
                stale = self._stopping or request.request_id < self._latest_id
            if stale:
                continue
            self.computed_count += 1
            if error is None:
                self.inspected.emit(request.request_id, result)
            else:
                self.failed.emit(request.request_id, error)


class LoadWorker(QThread):
    """Runs `load()` once on its own thread; `result` (or `error`) is set before `loaded`/`failed` fire."""

    loaded = Signal(int)  # job id
    failed = Signal(int, str)  # job id, message

    def __init__(self, job_id: int, load: Callable[[], Any], parent=None):
        super().__init__(parent)
        collect_garbage_in_gui_thread()
        self.setObjectName("loadWorker")
        self.job_id = job_id
        self._load = load
        self.result: Any = None
        self.error: str | None = None

    def run(self) -> None:
        try:
            self.result = self._load()
        except Exception as exc:  # any loading failure becomes a message; the old model stays
            self.error = _describe(exc)
            self.failed.emit(self.job_id, self.error)
            return
        self.loaded.emit(self.job_id)


def _cores_busy() -> bool:
    """True when other work already holds half the cores (1-minute load average): then a second thread
    mostly waits for a core; one thread was 1.7–10× faster in every case measured with a busy 2-core machine."""
    try:
        return os.getloadavg()[0] >= (os.cpu_count() or 1) / 2
    except (AttributeError, OSError):  # no load average on this platform
        return False


def _describe(error: BaseException) -> str:
    message = str(error).strip() or type(error).__name__
    if isinstance(error, (ValueError, OSError, KeyError)):
        return message
    # An unexpected error type: keep the last frame so a bug report says where it happened.
    where = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    location = f" (at {where[0].filename}:{where[0].lineno})" if where else ""
    return f"{type(error).__name__}: {message}{location}"
