"""The "Train" tab: pretrain a BERT in a worker thread, watch its curves and its attention change.

What every run tab does (start, pause, stop, resume exactly as `bert-train --resume`, watch a run folder, keep
what is on screen when a Start fails, faults in words, "use this model in the inspector") is `RunPanel`'s. What
is pretraining's own is here:
- The run is `bertcore.training.pretraining`'s step generator; its `StepStats` cross to the plots as they are.
- Every N steps the training thread hands a CPU copy of the weights to the runner's probe thread, which loads it
  into its own model (eval mode, no grad) and inspects the probe pairs. The newest snapshot supersedes a waiting
  one, so probing never holds the run back. The pairs, the snapshots and their step slider are the `ProbeBox`;
  the selected snapshot goes to the inspector through `showInspection`. A watched run's checkpoints are probed
  the same way, one at a time.
- "Continue the loaded model" trains a copy of the inspector's model further.
- What the model learns, measured every "Analyse every" steps on the step's weights off the training thread
  (bertcore's analysis records: syntax in the heads, the layer probes and BLiMP, representation health), lands in an
  `AnalysisTimeline` and is drawn by three timelines on the loss curves' step axis (`syntaxTimeline`,
  `probeTimeline`, `healthTimeline`), tabs beside the probe pairs. Records come with the step records of the tab's
  own run, from the metrics file of a folder opened (as it grows) or resumed, and from "Analyse checkpoints" for a
  run without them (`AnalysisBar`). The step slider above the tabs is the probe box's: the loss plots' marker and the
  timelines follow it, and a click on a timeline or a drag of the marker moves it (to the nearest probe snapshot;
  with none, the step itself is chosen).

The form is `TrainingForm`; what it drives is plain Python in `explorer.runs.training_run` (settings, the engine
adapter, the run driver, the prober, a run's pace).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSplitter, QTabWidget, QToolButton, QVBoxLayout, QWidget

from explorer.runs._qt.run_panel import RunPanel
from explorer.runs.lifecycle import RunState
from explorer.runs.training_run import (
    DEFAULT_PROBE,
    EngineFactory,
    TrainingSettings,
    continue_refusal,
    initial_model,
    make_engine_run,
    settings_for_resume,
    warm_up_engine,
)
from explorer.train._qt.analysis_bar import AnalysisBar
from explorer.train._qt.health_timeline import HealthTimeline
from explorer.train._qt.probe_box import ProbeBox
from explorer.train._qt.probe_timeline import ProbeTimeline
from explorer.train._qt.syntax_timeline import SyntaxTimeline
from explorer.train._qt.training_form import TrainingForm
from explorer.train.analysis_timeline import AnalysisTimeline, read_analysis_records


class TrainingPanel(RunPanel):
    """The training tab; see the module docstring."""

    probed = Signal(int)  # step of a new probe snapshot

    def __init__(self, parent: QWidget | None = None, *, engine_factory: EngineFactory | None = None,
                 torch_threads: int | None = None, niceness: int = 5, poll_interval_ms: int = 250):
        super().__init__(TrainingForm(), engine_factory or make_engine_run, warm_up_engine,
                         torch_threads=torch_threads, niceness=niceness, poll_interval_ms=poll_interval_ms,
                         parent=parent)
        self.setObjectName("trainingPanel")
        self._inspector_model: tuple[Any, Any] = (None, None)
        self.runner.probed.connect(self._on_probed)
        self.runner.probeFailed.connect(self._on_probe_failed)
        self.form.probeEveryChanged.connect(self.runner.set_probe_every)
        self.probes = ProbeBox(DEFAULT_PROBE)
        self.plots.markerMoved.connect(self.choose_step)
        self.probes.snapshotShown.connect(self._on_snapshot_shown)
        self.probes.showInspection.connect(self._send_snapshot)
        self.watcher.probeCheckpoint.connect(self._probe_checkpoint)

        # what the model learns: records in, three timelines on the loss plots' step axis
        self.analysis = AnalysisTimeline()
        self.syntax_timeline = SyntaxTimeline()
        self.probe_timeline = ProbeTimeline()
        self.health_timeline = HealthTimeline()
        self.timelines = (self.syntax_timeline, self.probe_timeline, self.health_timeline)
        for view in self.timelines:
            view.follow(self.analysis)
            view.link_steps(self.plots.loss_plot)
            view.stepChosen.connect(self.choose_step)
        self.analysis_bar = AnalysisBar(self.analysis)
        self.analysis_bar.recordAnalysed.connect(self.analysis.add)
        self.watcher.analysisArrived.connect(self.analysis.add_all)
        self.lifecycle.changed.connect(self._show_analysis_state)
        self.runEnded.connect(self._show_analysis_state)  # the training thread has ended by now
        self.view_tabs = QTabWidget()
        self.view_tabs.setObjectName("trainingViewTabs")
        self.view_tabs.setDocumentMode(True)
        for page, title, tip in (
                (self.probes, "Probe pairs", "The sentence pairs re-inspected with the training weights"),
                (self.syntax_timeline, "Syntax", "Which heads track dependency syntax, and when the structure "
                                                 "forms"),
                (self.probe_timeline, "Probes && BLiMP", "What each layer knows (POS probes with their control "
                                                         "task) and how the model scores minimal pairs"),
                (self.health_timeline, "Health", "Anisotropy, effective rank and attention entropy: a collapsing "
                                                 "representation")):
            self.view_tabs.addTab(page, title)
            self.view_tabs.setTabToolTip(self.view_tabs.count() - 1, tip)
        for button, direction in zip(self.view_tabs.tabBar().findChildren(QToolButton), ("left", "right"),
                                     strict=False):  # shown when the tab is too narrow for the tab names
            button.setToolTip(f"Scroll the tab names {direction}")
        lower = QWidget()
        lower_column = QVBoxLayout(lower)
        lower_column.setContentsMargins(0, 0, 0, 0)
        lower_column.addWidget(self.probes.take_slider_bar())
        lower_column.addWidget(self.analysis_bar)
        lower_column.addWidget(self.view_tabs, 1)

        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.plots)
        right.addWidget(lower)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 3)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self._left_column())
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([330, 900])
        QVBoxLayout(self).addWidget(splitter)
        self._show_planned_steps(self.form.planned_steps())

    # ---- what the window tells the tab ----
    def on_pair_changed(self, text_a: str, text_b: str | None = None) -> None:
        """The inspector's pair becomes the first probe pair from the next probe on."""
        self.probes.set_current_pair(text_a, text_b)

    def on_model_changed(self, loaded: Any) -> None:
        """The inspector's model: what "continue the loaded model" trains further."""
        super().on_model_changed(loaded)
        self._inspector_model = (loaded.model, loaded.tokenizer)
        self.form.set_continue_refusal(continue_refusal(loaded.model))

    def _send_snapshot(self, inspection: Any, caption: str) -> None:
        if not self._closing:
            self.showInspection.emit(inspection, caption)

    # ---- RunPanel's hooks ----
    def _initial_model(self, settings: TrainingSettings) -> Any:
        """What the run starts from (`training_run.initial_model`): the inspector's model, for "continue the
        loaded model"; the engine trains a copy, so the inspector keeps its own as it is."""
        return initial_model(settings, *self._inspector_model)

    def _settings_for_resume(self, folder: Path) -> TrainingSettings:
        return settings_for_resume(folder, self.form.device_combo.devices())

    def _probe_pairs(self) -> tuple:
        return self.probes.pairs

    def _run_shown(self, run_dir: Path | None) -> None:
        self.probes.clear()
        self.analysis.clear()
        self._show_analysis_state()

    def _run_ended(self, status: str) -> None:
        """Records written that no step record carried (the one in flight when the run was stopped) are in the run's
        metrics file: read them from there."""
        try:
            records = read_analysis_records(self.run_dir) if self.run_dir is not None else []
        except ValueError:
            return
        self.analysis.add_all(record for record in records if record.get("step") not in set(self.analysis.steps))

    def _run_resumed(self, run_dir: Path, step: int) -> None:
        """A resume continues from `step`: the records of later steps go with the rest of what came after it."""
        try:
            records = read_analysis_records(run_dir, up_to_step=step)
        except ValueError:
            records = []  # read_curve said what is wrong with the metrics file
        self.analysis.clear()
        self.analysis.add_all(records)

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        joined = self.analysis_bar.shutdown(timeout_ms)
        return super().shutdown(timeout_ms) and joined

    # ---- the step the views follow ----
    def choose_step(self, step: int) -> None:
        """Show `step` everywhere: the slider moves to the probe snapshot nearest to it (the plots' marker and the
        timelines follow it); without snapshots the step itself is chosen."""
        if self.probes.show_snapshot(step) is None:
            self.plots.set_marker(step)
            self.analysis.select_step(step)

    def _on_snapshot_shown(self, step: int) -> None:
        self.plots.set_marker(step)
        self.analysis.select_step(step)

    # ---- analysis records ----
    def _on_step(self, stats: Any) -> None:
        super()._on_step(stats)
        record = getattr(stats, "analysis", None)
        if record is not None:
            self.analysis.add(record, step=stats.step)

    def _show_analysis_state(self, *_args) -> None:
        """The analysis bar may analyse the run shown while nothing trains in it here (a watched run once ended)."""
        lifecycle = self.lifecycle
        resting = not lifecycle.is_going and lifecycle.state is not RunState.WATCHING
        self.analysis_bar.show_run(self.run_dir, resting and not self.runner.is_running)

    # ---- probes ----
    def _on_probed(self, step: int, inspections: dict) -> None:
        self._adopt_pending_run()
        self.probes.add_snapshot(step, inspections)
        self.probed.emit(step)
        if self.is_watching:
            self.watcher.checkpoint_probed()

    def _on_probe_failed(self, step: int, failure: Any) -> None:
        self.lifecycle.say(f"Probing at step {step} failed: {failure.text}", "error")
        if self.is_watching:  # e.g. a checkpoint the writer pruned meanwhile: go on with the next
            self.watcher.checkpoint_probed()

    def _probe_checkpoint(self, step: int, folder: str) -> None:
        if not self.runner.probe_checkpoint(step, folder, self.probes.pairs):
            self.watcher.checkpoint_probed()  # nothing to probe it with: on to the next
