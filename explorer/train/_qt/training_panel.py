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

The form is `TrainingForm`; what it drives is plain Python in `explorer.runs.training_run` (settings, the engine
adapter, the run driver, the prober, a run's pace).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from explorer.runs._qt.run_panel import RunPanel
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
from explorer.train._qt.probe_box import ProbeBox
from explorer.train._qt.training_form import TrainingForm


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
        self.plots.markerMoved.connect(self.probes.show_snapshot)
        self.probes.snapshotShown.connect(self.plots.set_marker)
        self.probes.showInspection.connect(self._send_snapshot)
        self.watcher.probeCheckpoint.connect(self._probe_checkpoint)

        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.plots)
        right.addWidget(self.probes)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
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
