"""The Train tab's analysis bar: what the timelines hold, and a finished run's checkpoints analysed afterwards.

It says how many analysis records the run shown has and over which steps. For a run that is not training (its own
run once ended, a folder opened and ended), "Analyse checkpoints" runs `bertcore.analyse_checkpoints` over the
checkpoints that have no record yet, in a `GeneratorWorker` (a core left to the GUI, niced, as the training thread),
with a progress bar and Cancel: each record is appended to the run's metrics.jsonl as it is whole and reaches the
timelines at once (`recordAnalysed`); Cancel stops between parts and keeps the records appended so far. A folder a
live run holds, a folder that is no run, a checkpoint that cannot be opened: the reason in the bar, never a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QSizePolicy, QWidget

from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.widget_names import named
from explorer.common._qt.workers.generator import GeneratorWorker
from explorer.common.message_text import sentence_case
from explorer.train.analysis_timeline import AnalysisTimeline

ANALYSIS_NICENESS = 5  # as the training thread: the GUI thread wins the CPU
ANALYSE_TIP = ("Analyse each checkpoint of this run that has no analysis record yet (syntax in the heads, the layer "
               "probes, BLiMP, representation health), appending the records to its metrics.jsonl. Cancel keeps the "
               "records made so far; a second run continues with the checkpoints left.")


class AnalysisBar(QWidget):
    recordAnalysed = Signal(object)  # a record just appended to the run's metrics.jsonl (kind "analysis", its step)
    analysisEnded = Signal(str)  # "finished" | "stopped" | "failed"

    def __init__(self, timeline: AnalysisTimeline, parent: QWidget | None = None, *,
                 torch_threads: int | None = None):
        super().__init__(parent)
        self.setObjectName("analysisBar")
        self.timeline = timeline
        self.torch_threads = torch_threads or max(1, (os.cpu_count() or 1) - 1)
        self.run_dir: Path | None = None
        self.can_analyse = False  # the run shown is not training: its checkpoints may be analysed
        self.worker: GeneratorWorker | None = None
        self._retired: list[GeneratorWorker] = []  # cancelled or ended workers whose threads may still be ending
        self._note = ""  # what the last analysis said (kept under the record count until the run changes)

        self.status_label = plain_label(named(QLabel(), "analysisStatus", "analysis records"))
        self.status_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.analyse_button = named(QPushButton("Analyse checkpoints"), "analyseCheckpointsButton",
                                    "analyse the run's checkpoints", ANALYSE_TIP)
        self.analyse_button.clicked.connect(self.start)
        self.cancel_button = named(QPushButton("Cancel"), "cancelAnalysisButton", "cancel the checkpoint analysis",
                                   "Stop after the current part; the records appended so far stay")
        self.cancel_button.clicked.connect(self.cancel)
        self.progress = named(QProgressBar(), "analysisProgress", "checkpoint analysis progress")
        self.progress.setTextVisible(True)
        self.progress.setMaximumWidth(320)
        self.progress.hide()
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.status_label, 1)
        row.addWidget(self.progress)
        row.addWidget(self.analyse_button)
        row.addWidget(self.cancel_button)
        timeline.changed.connect(self._on_timeline_changed)
        self._render()

    @property
    def running(self) -> bool:
        return self.worker is not None and self.worker.is_running

    def show_run(self, run_dir: Path | None, can_analyse: bool) -> None:
        """The run shown and whether its checkpoints may be analysed now (no training writes to it here)."""
        if run_dir != self.run_dir:
            self.cancel()
            self._note = ""
        self.run_dir, self.can_analyse = run_dir, can_analyse
        self._render()

    # ---- the analysis ----
    def start(self) -> bool:
        """Analyse the run's checkpoints that lack a record; False, with the reason, when it cannot start."""
        if self.running:
            return False
        if self.run_dir is None or not self.can_analyse:
            self._note = ("Nothing to analyse: open a run folder, or let the run end first." if self.run_dir is None
                          else "The run is training: its records come as it goes (the form's \"Analyse every\").")
            self._render()
            return False
        run_dir = str(self.run_dir)
        worker = GeneratorWorker(lambda: _analyse(run_dir), torch_threads=self.torch_threads,
                                 niceness=ANALYSIS_NICENESS, name="checkpointAnalysisThread")
        self.worker = worker
        worker.yielded.connect(lambda progress: self._on_progress(worker, progress))
        worker.returned.connect(lambda _value: self._on_ended(worker, "finished", ""))
        worker.stopped.connect(lambda _value: self._on_ended(worker, "stopped", ""))
        # a run folder in use, a checkpoint that cannot be opened: bertcore's message says it all; a bug, where too
        worker.errored.connect(lambda failure, _last: self._on_ended(
            worker, "failed", failure.message if failure.is_a("RunFolderError") else failure.text))
        self._note = "Analysing the checkpoints…"
        self.progress.setRange(0, 0)
        self.progress.setFormat("starting…")
        worker.start()
        self._render()
        return True

    def cancel(self) -> None:
        """Stop after the current part; the records appended so far stay."""
        worker, self.worker = self.worker, None
        if worker is not None and worker.is_running:
            worker.request_stop()
            self._note = "Cancelled; the records analysed so far stay."
        if worker is not None:
            self._retired.append(worker)  # joined at shutdown (rule 6 of explorer.common._qt.workers)
        self._render()

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        self.cancel()
        joined = True
        for worker in self._retired:
            joined = worker.shutdown(timeout_ms) and joined
        self._retired = [worker for worker in self._retired if worker.is_running]
        return joined

    def _on_progress(self, worker: GeneratorWorker, progress: Any) -> None:
        if worker is not self.worker:
            return  # a cancelled run's last words
        self.progress.setRange(0, 1000)
        self.progress.setValue(round(1000 * progress.fraction))
        self.progress.setFormat(f"{progress.done} / {progress.total} checkpoints")
        if not progress.total:
            self._note = "Every checkpoint has a record already."
        elif progress.done == progress.total:
            self._note = f"Analysed {progress.total} checkpoint{'s' if progress.total != 1 else ''}."
        else:
            self._note = f"Analysing {progress.what}"
        self._render()
        if progress.record is not None:  # last: whoever hears it may cancel the rest
            self.recordAnalysed.emit(progress.record)

    def _on_ended(self, worker: GeneratorWorker, outcome: str, message: str) -> None:
        if worker is not self.worker:
            return
        self._retired.append(worker)
        self.worker = None
        if outcome == "failed":
            self._note = f"Cannot analyse the checkpoints: {sentence_case(message)}"
        elif outcome == "stopped":
            self._note = "Cancelled; the records analysed so far stay."
        self._render()
        self.analysisEnded.emit(outcome)

    # ---- shown ----
    def _on_timeline_changed(self, _timeline: AnalysisTimeline, what: str) -> None:
        if what == "records":
            self._render()

    def _render(self) -> None:
        timeline = self.timeline
        if len(timeline):
            steps = timeline.steps
            post_hoc = sum(bool(record.get("post_hoc")) for record in timeline.records)
            text = (f"{len(timeline)} analysis record{'s' if len(timeline) != 1 else ''}, step {steps[0]:,}"
                    + (f" to {steps[-1]:,}" if len(steps) > 1 else "")
                    + (f" ({post_hoc} analysed afterwards)" if post_hoc else ""))
        elif self.run_dir is not None:
            text = "No analysis records in this run yet."
        else:
            text = "No run shown: its analysis records appear here."
        if timeline.refused:
            text += f" {timeline.refused} record(s) could not be read."
        self.status_label.setText(f"{text} · {self._note}" if self._note else text)
        running = self.running
        self.progress.setVisible(running)
        self.analyse_button.setEnabled(not running and self.can_analyse and self.run_dir is not None)
        self.cancel_button.setEnabled(running)


def _analyse(run_dir: str):
    """The checkpoint analysis' step generator (made in the worker thread: importing bertcore's analyses there
    keeps its cost off the GUI thread)."""
    from bertcore.analysis.run_analysis import analyse_checkpoints

    return analyse_checkpoints(run_dir)
