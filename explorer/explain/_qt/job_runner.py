"""The Explain tab's work off the GUI thread: one `GeneratorWorker` at a time, in the order the state's `JobQueue`
gives (a newer job of the running kind stops it), each record it yields handed to the `ExplainState`."""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import QObject, QTimer

from explorer.common._qt.workers.generator import GeneratorWorker
from explorer.explain.jobs import JobQueue, job_steps
from explorer.explain.state import ExplainState

EXPLAIN_NICENESS = 5  # as the training thread: the GUI thread wins the CPU


class ExplainJobs(QObject):
    """Runs the jobs `submit` is given; an attribution's gradients and the patching's hooks must not share the model
    between two threads, so one runs at a time. Stopped and ended workers are kept until their threads end."""

    def __init__(self, state: ExplainState, torch_threads: int | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.state = state
        self.queue = JobQueue()
        self.torch_threads = torch_threads or max(1, (os.cpu_count() or 1) - 1)
        self.worker: GeneratorWorker | None = None
        self._retired: list[GeneratorWorker] = []  # stopped or ended workers whose threads may still be ending

    def submit(self, job: Any) -> None:
        """Queue `job` (None: nothing to do) and start it as soon as the worker is free."""
        if job is None:
            return
        if self.queue.submit(job) and self.worker is not None:
            self.worker.request_stop()  # newest wins: the running job of this kind is stale
        QTimer.singleShot(0, self._start_next)

    def cancel(self) -> None:
        """Drop the waiting jobs and stop the running one."""
        self.queue.cancel()
        if self.worker is not None:
            self.worker.request_stop()

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        """Cancel, then join every worker's thread; False if one did not end in time."""
        self.cancel()
        joined = True
        for worker in self._retired + ([self.worker] if self.worker is not None else []):
            joined = worker.shutdown(timeout_ms) and joined
        return joined

    @property
    def busy(self) -> bool:
        return self.queue.running is not None or bool(self.queue.pending)

    def _start_next(self) -> None:
        job = self.queue.start_next()
        if job is None:
            return
        worker = GeneratorWorker(lambda: job_steps(job), torch_threads=self.torch_threads,
                                 niceness=EXPLAIN_NICENESS, name="explainThread")
        self.worker = worker
        worker.yielded.connect(self.state.arrived)
        worker.returned.connect(lambda _: self._on_ended(worker, job, "finished", ""))
        worker.stopped.connect(lambda _: self._on_ended(worker, job, "stopped", ""))
        worker.errored.connect(lambda failure, _: self._on_ended(worker, job, "failed", failure.text))
        self._retired = [old for old in self._retired if not old.wait(0)]
        worker.start()

    def _on_ended(self, worker: GeneratorWorker, job: Any, outcome: str, message: str) -> None:
        self.state.job_ended(job.kind, job.request_id, outcome, message)
        self.queue.ended(job)
        if worker is self.worker:
            self.worker = None
        self._retired.append(worker)  # its thread ends after this signal (rule 6 of explorer.common._qt.workers)
        QTimer.singleShot(0, self._start_next)  # never start new work from a worker's last signals
