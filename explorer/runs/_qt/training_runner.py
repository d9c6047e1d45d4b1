"""One training run in this process, in two worker threads: the engine's step generator (`RunDriver`) in a
`GeneratorWorker` (the training thread) and the prober in a `LatestJobWorker` (the probe thread). Here they
are started, paused, resumed, stopped and joined; the Train tab hears what they say through the runner's
signals, and only from the run going now: what an earlier run's worker queued before it was replaced is
dropped here. The probe thread also probes a watched run's checkpoints (`probe_checkpoint`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from explorer.common._qt.workers.generator import GeneratorWorker
from explorer.common._qt.workers.latest_job import LatestJobWorker
from explorer.runs.probe_history import ProbePair
from explorer.runs.snapshot_probe import CheckpointJob, SnapshotProber
from explorer.runs.training_run import EngineFactory, RunDriver, TrainingSettings


class TrainingRunner(QObject):
    step = Signal(object)  # the StepStats of a step done
    paused = Signal()
    resumed = Signal()
    ended = Signal(str)  # "finished" (every step done) | "stopped" (asked to, a checkpoint saved)
    failed = Signal(object, object)  # Failure, the last StepStats before it (None: it failed before its first step)
    finished = Signal()  # the training thread is done; always after ended or failed
    probed = Signal(int, object)  # step, {ProbePair: Inspection} of a weights snapshot or a checkpoint
    probeFailed = Signal(int, object)  # step, Failure
    preparing = Signal(object)  # bertcore.data.prepare.PreparationProgress while the run prepares its corpus
    # The training thread's preparation news: a queued connection to this (GUI-thread) object's slot hands it over.
    _preparation_news = Signal(object, object)  # driver, PreparationProgress

    def __init__(self, engine_factory: EngineFactory, torch_threads: int, niceness: int,
                 parent: QObject | None = None):
        super().__init__(parent)
        self._engine_factory = engine_factory
        self._torch_threads = torch_threads
        self._niceness = niceness  # the training and probe threads yield the CPU to the GUI thread
        self.worker: GeneratorWorker | None = None
        self.probe_worker: LatestJobWorker | None = None
        self.driver: RunDriver | None = None
        self._preparation_news.connect(self._on_preparation_news, Qt.ConnectionType.QueuedConnection)

    @property
    def is_running(self) -> bool:
        return self.worker is not None and self.worker.is_running

    @property
    def is_paused(self) -> bool:
        return self.is_running and self.worker.is_paused

    @property
    def stop_requested(self) -> bool:
        return self.is_running and self.worker.stop_requested

    def launch(self, settings: TrainingSettings, init: Any, pairs: Callable[[], tuple[ProbePair, ...]]) -> None:
        """Start a run; `pairs()` (called in the training thread) are the probe pairs of its next snapshot."""
        # The previous run's threads are ending (or ended): join them before their Python wrappers go, since a
        # QThread destroyed while its thread still runs aborts the process.
        if self.worker is not None:
            self.worker.wait(30_000)
        self.restart_prober()
        driver = RunDriver(settings, init, self._engine_factory, self.probe_worker.submit, pairs,
                           on_preparation=lambda progress: self._preparation_news.emit(driver, progress))
        self.driver = driver
        self.worker = GeneratorWorker(self.driver.make_steps, on_step=self.driver.after_step,
                                      stop_hook=self.driver.request_stop, torch_threads=self._torch_threads,
                                      niceness=self._niceness, name="trainingThread")
        # Bound methods of this (GUI-thread) object: their slots run in the GUI thread.
        self.worker.yielded.connect(self._on_yielded)
        self.worker.paused.connect(self._on_paused)
        self.worker.resumed.connect(self._on_resumed)
        self.worker.returned.connect(self._on_returned)
        self.worker.stopped.connect(self._on_stopped)
        self.worker.errored.connect(self._on_errored)
        self.worker.finished.connect(self._on_finished)
        self.worker.start()

    def _on_preparation_news(self, driver: Any, progress: Any) -> None:
        if driver is self.driver:  # not news from an earlier run's thread
            self.preparing.emit(progress)

    def restart_prober(self) -> None:
        """A fresh probe thread (for a new run, or a run folder opened): the old one's work is dropped."""
        if self.probe_worker is not None:
            self.probe_worker.shutdown()
        self.probe_worker = LatestJobWorker(SnapshotProber(), name="probeThread", torch_threads=1,
                                            niceness=self._niceness)
        self.probe_worker.done.connect(self._on_probed)
        self.probe_worker.failed.connect(self._on_probe_failed)

    def probe_checkpoint(self, step: int, folder: str, pairs: tuple[ProbePair, ...]) -> bool:
        """Probe a watched run's checkpoint; False when there is no probe thread or nothing to probe with."""
        if self.probe_worker is None or not pairs:
            return False
        self.probe_worker.submit(step, CheckpointJob(folder, pairs))
        return True

    def set_probe_every(self, steps: int) -> None:
        if self.driver is not None:
            self.driver.probe_every = int(steps)  # read by the training thread: a plain int, replaced whole

    def pause(self) -> None:
        if self.is_running:
            self.worker.pause()

    def resume(self) -> None:
        if self.is_running:
            self.worker.resume()

    def request_stop(self) -> None:
        """Stop at the next step boundary; the engine saves a checkpoint on the way out."""
        if self.is_running:
            self.worker.request_stop()

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        """Stop the run (it saves a checkpoint) and join both threads. True when joined."""
        joined = True
        if self.worker is not None:
            joined = self.worker.shutdown(timeout_ms)
        if self.probe_worker is not None:
            joined = self.probe_worker.shutdown(timeout_ms) and joined
        return joined

    # ---- the workers' signals (GUI thread), passed on when they come from the run going now ----
    def _from(self, current: Any) -> bool:
        """False in a slot invoked by a worker that is no longer the runner's (a signal queued before it was
        replaced): its news belongs to an earlier run."""
        sender = self.sender()
        return sender is None or sender is current

    def _on_yielded(self, stats: Any) -> None:
        if self._from(self.worker):
            self.step.emit(stats)

    def _on_paused(self, _last: Any) -> None:
        if self._from(self.worker):
            self.paused.emit()

    def _on_resumed(self) -> None:
        if self._from(self.worker):
            self.resumed.emit()

    def _on_returned(self, _value: Any) -> None:
        if self._from(self.worker):
            self.ended.emit("finished")

    def _on_stopped(self, _last: Any) -> None:
        if self._from(self.worker):
            self.ended.emit("stopped")

    def _on_errored(self, failure: Any, last_step: Any) -> None:
        if self._from(self.worker):
            self.failed.emit(failure, last_step)

    def _on_finished(self) -> None:
        if self._from(self.worker):
            self.finished.emit()

    def _on_probed(self, step: int, inspections: dict) -> None:
        if self._from(self.probe_worker):
            self.probed.emit(step, inspections)

    def _on_probe_failed(self, step: int, failure: Any) -> None:
        if self._from(self.probe_worker):
            self.probeFailed.emit(step, failure)
