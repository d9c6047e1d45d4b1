"""The "Train" tab: start a pretraining run in a worker thread, watch its curves and its attention change.

- The run is the engine's step generator (`bertcore.trainer`) driven by a `TrainingWorker`; only plain
  numbers and numpy arrays cross signals. Start / Pause / Resume / Stop act at step boundaries.
- Every N steps the training thread hands a CPU copy of the weights to a `ProbeWorker`, which loads it
  into its own model (eval mode, no grad) and inspects the probe pairs: the inspector's current pair plus
  the pinned ones. The newest snapshot supersedes a waiting one, so probing never holds the run back.
- A step slider walks the probe snapshots (a marker on the loss plot follows it); the selected snapshot
  is drawn here and sent to the inspector with `window.show_external_inspection`.
- "Open run folder…" watches a run written by `bert-train` (here or elsewhere) by polling its
  `metrics.jsonl` as it grows.
- Faults (NaN, out of memory, unreadable corpus) end in a message; the last good checkpoint stays;
  closing the window stops the run, which saves a checkpoint, and joins the threads.

`TrainingPanel` works on its own (window=None) for development; `install_training_panel(window)` adds it
as the main window's "Train" tab and wires it to the window's public API. What it drives is plain Python
in `explorer.training_run` (settings, the engine adapter, the prober, a run's pace and checkpoints); the
form is `training_form.TrainingForm`, the curves `loss_plots.LossPlots`, the snapshot heatmap
`probe_snapshot_view.SnapshotView`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSlider,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from explorer._qt.loss_plots import LossPlots
from explorer._qt.probe_snapshot_view import SnapshotView
from explorer._qt.training_form import TrainingForm, default_runs_dir
from explorer._qt.training_worker import ProbeWorker, TrainingWorker
from explorer.probe_history import ProbeHistory, ProbePair
from explorer.run_watch import (
    METRICS_FILE,
    MetricsTail,
    list_checkpoints,
    normalize_record,
    read_run_config,
)
from explorer.training_run import (  # re-exported: the tab's public names, as before the split
    CONTINUE_LOADED,
    DEFAULT_PROBE,
    PRESET_NAMES,
    CheckpointProbeQueue,
    EngineFactory,
    EngineRun,
    SnapshotProber,
    StepPace,
    TrainingSettings,
    available_devices,
    describe_failure,
    describe_run_config,
    format_duration,
    make_engine_run,
    planned_steps,
    warm_up_engine,
)

__all__ = [
    "CONTINUE_LOADED", "DEFAULT_PROBE", "PRESET_NAMES", "EngineFactory", "EngineRun", "TrainingPanel",
    "TrainingSettings", "available_devices", "default_runs_dir", "describe_failure", "install_training_panel",
    "make_engine_run", "warm_up_engine",
]

STATUS_STYLES = {"info": "", "ok": "color: #1a7f37;", "error": "color: #c62828; font-weight: bold;"}


# ---------------------------------------------------------------- the panel
class TrainingPanel(QWidget):
    """The training tab; see the module docstring."""

    runStarted = Signal(str)  # run folder
    runEnded = Signal(str)  # "finished" | "stopped" | "failed"
    stepCompleted = Signal(int)
    probed = Signal(int)  # step of a new probe snapshot
    modelChosen = Signal(str)  # checkpoint folder the user wants in the inspector (also done via window)

    def __init__(
        self,
        window: Any = None,
        parent: QWidget | None = None,
        *,
        engine_factory: EngineFactory | None = None,
        torch_threads: int | None = None,
        niceness: int = 5,
        poll_interval_ms: int = 250,
    ):
        super().__init__(parent)
        self.setObjectName("trainingPanel")
        self.window_ = window
        self._engine_factory = engine_factory or make_engine_run
        cores = os.cpu_count() or 1
        # One core stays with the GUI (and the probe thread) on small machines.
        self._torch_threads = torch_threads or max(1, cores - 1)
        self._niceness = niceness  # the training and probe threads yield the CPU to the GUI thread
        self.worker: TrainingWorker | None = None
        self.probe_worker: ProbeWorker | None = None
        self.history = ProbeHistory()
        self._run: EngineRun | None = None
        self._run_lock = threading.Lock()
        self._run_dir: Path | None = None
        self._settings: TrainingSettings | None = None
        self._probe_pairs: tuple[ProbePair, ...] = ()
        self._pinned: list[ProbePair] = []
        self._current_pair: ProbePair | None = None
        self._last_record: dict | None = None
        self._started_at = 0.0
        self._pace = StepPace()  # for the time left
        self._last_checkpoint: Path | None = None  # the newest checkpoint the running engine reported
        self._tail: MetricsTail | None = None
        self._watch_total_steps: int | None = None
        self._ending_status = ""
        self._closing = False  # set by shutdown(): the window is going, nothing more is sent to it
        self.steps_received = 0
        self._probe_every = TrainingSettings.probe_every
        self._checkpoints = CheckpointProbeQueue()  # a watched run's checkpoints, probed one at a time

        warm_up_engine()  # at install time (app start), so that no run pays it
        self._build_form()
        self._build_right()
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self._left)
        splitter.addWidget(self._right)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([330, 900])
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)
        self.form.stepsChanged.connect(self._show_planned_steps)
        self._show_planned_steps(self.form.planned_steps())

        self._watch_timer = QTimer(self)
        self._watch_timer.setInterval(poll_interval_ms)
        self._watch_timer.timeout.connect(self._poll_watched_run)

        if window is not None and hasattr(window, "current_pair"):
            try:
                text_a, text_b = window.current_pair()
                self._set_current_pair(text_a, text_b)
            except Exception:
                self._current_pair = None
        if self._current_pair is None:
            self._set_current_pair(DEFAULT_PROBE.text_a, DEFAULT_PROBE.text_b)
        self._update_buttons()

    # ---- building the widgets ----
    def _build_form(self) -> None:
        self._left = QWidget()
        left = QVBoxLayout(self._left)

        self.form = TrainingForm()
        self.form.probeEveryChanged.connect(self._set_probe_every)
        self.form.deviceChanged.connect(self._show_device)
        left.addWidget(self.form)

        buttons = QGridLayout()
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("startButton")
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("pauseButton")
        self.resume_button = QPushButton("Resume")
        self.resume_button.setObjectName("resumeButton")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.open_run_button = QPushButton("Open run folder…")
        self.open_run_button.setObjectName("openRunButton")
        self.start_button.clicked.connect(lambda: self.start_run())
        self.pause_button.clicked.connect(self.pause)
        self.resume_button.clicked.connect(self.resume)
        self.stop_button.clicked.connect(self.stop)
        self.open_run_button.clicked.connect(self._browse_run_folder)
        buttons.addWidget(self.start_button, 0, 0)
        buttons.addWidget(self.pause_button, 0, 1)
        buttons.addWidget(self.resume_button, 0, 2)
        buttons.addWidget(self.stop_button, 0, 3)
        buttons.addWidget(self.open_run_button, 1, 0, 1, 4)
        left.addLayout(buttons)

        self.progress = QProgressBar()
        self.progress.setObjectName("trainingProgress")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("idle")
        self.progress.setTextVisible(True)
        left.addWidget(self.progress)
        self.device_label = QLabel("")
        self.device_label.setObjectName("trainingDeviceLabel")
        left.addWidget(self.device_label)
        self.status_label = QLabel("Pick a corpus and a model, then Start.")
        self.status_label.setObjectName("trainingStatusLabel")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        left.addWidget(self.status_label)

        model_box = QGroupBox("Trained model")
        model_layout = QVBoxLayout(model_box)
        self.checkpoint_combo = QComboBox()
        self.checkpoint_combo.setObjectName("checkpointCombo")
        self.use_model_button = QPushButton("Use this model in the inspector")
        self.use_model_button.setObjectName("useModelButton")
        self.use_model_button.clicked.connect(self.use_selected_checkpoint)
        model_layout.addWidget(self.checkpoint_combo)
        model_layout.addWidget(self.use_model_button)
        left.addWidget(model_box)
        left.addStretch(1)
        for widget, name in ((self.start_button, "Start training"), (self.pause_button, "Pause training"),
                             (self.resume_button, "Resume training"), (self.stop_button, "Stop training"),
                             (self.open_run_button, "Open a run folder to watch"),
                             (self.progress, "Training progress"), (self.status_label, "Training status"),
                             (self.checkpoint_combo, "Checkpoint"),
                             (self.use_model_button, "Use this model in the inspector")):
            widget.setAccessibleName(name)
        self._show_device(self.form.device_label())

    def _build_right(self) -> None:
        self.plots = LossPlots()
        self.plots.setMinimumHeight(320)
        self.plots.markerMoved.connect(self._marker_moved)

        probe_box = QGroupBox("Probe pairs, re-inspected with the training weights")
        self.probe_list = QListWidget()
        self.probe_list.setObjectName("probeList")
        self.probe_list.setMaximumHeight(80)
        self.probe_list.currentRowChanged.connect(lambda _: self._show_selected_snapshot())
        self.pin_button = QPushButton("Pin the inspector's pair")
        self.pin_button.setObjectName("pinPairButton")
        self.pin_button.clicked.connect(self._pin_current)
        self.unpin_button = QPushButton("Unpin")
        self.unpin_button.setObjectName("unpinPairButton")
        self.unpin_button.clicked.connect(self._unpin_selected)
        self.to_inspector_check = QCheckBox("Show snapshots in the inspector")
        self.to_inspector_check.setObjectName("snapshotsToInspectorCheck")
        self.to_inspector_check.setToolTip("the Inspect tab shows the selected training snapshot until you edit "
                                           "its input; untick to keep it on the live model")
        self.to_inspector_check.setChecked(True)
        self.step_slider = QSlider(Qt.Orientation.Horizontal)
        self.step_slider.setObjectName("snapshotSlider")
        self.step_slider.setRange(0, 0)
        self.step_slider.setEnabled(False)
        self.step_slider.valueChanged.connect(self._slider_moved)
        self.step_label = QLabel("snapshot: none")
        self.step_label.setObjectName("snapshotLabel")
        self.step_label.setMinimumWidth(130)
        self.probe_list.setAccessibleName("Probe pairs")
        self.step_slider.setAccessibleName("Probe snapshot step")
        self.snapshot_view = SnapshotView()
        self.snapshot_view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

        column = QVBoxLayout()
        column.addWidget(self.probe_list)
        pin_row = QHBoxLayout()
        pin_row.addWidget(self.pin_button)
        pin_row.addWidget(self.unpin_button)
        pin_row.addStretch(1)
        pin_row.addWidget(self.to_inspector_check)
        column.addLayout(pin_row)
        slider_row = QHBoxLayout()
        slider_row.addWidget(self.step_slider, 1)
        slider_row.addWidget(self.step_label)
        column.addLayout(slider_row)
        column.addWidget(self.snapshot_view.controls, 1)
        probe_layout = QHBoxLayout(probe_box)
        probe_layout.addLayout(column, 3)
        probe_layout.addWidget(self.snapshot_view, 2)

        self._right = QSplitter(Qt.Orientation.Vertical)
        self._right.addWidget(self.plots)
        self._right.addWidget(probe_box)
        self._right.setStretchFactor(0, 3)
        self._right.setStretchFactor(1, 2)

    # ---- form ----
    def _show_planned_steps(self, steps: int) -> None:
        if not self.is_running and not self.is_watching:  # the empty plots span the run the form plans
            self.plots.show_planned_steps(steps)

    def _set_probe_every(self, steps: int) -> None:
        self._probe_every = int(steps)  # read by the training thread: a plain int, replaced whole

    def _show_device(self, label: str) -> None:
        self.device_label.setText(f"Trains on: {label}")

    def _browse_run_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Run folder (written by bert-train --out)")
        if path:
            self.watch_run_folder(path)

    def _set_status(self, text: str, kind: str = "info") -> None:
        self.status_label.setText(text)
        self.status_label.setStyleSheet(STATUS_STYLES[kind])

    def _update_buttons(self) -> None:
        running = self.is_running
        paused = running and self.worker.is_paused
        self.start_button.setEnabled(not running)
        self.pause_button.setEnabled(running and not paused and not self.worker.stop_requested)
        self.resume_button.setEnabled(paused and not self.worker.stop_requested)
        self.stop_button.setEnabled(running and not self.worker.stop_requested)
        self.open_run_button.setEnabled(not running)
        self.form.set_editable(not running)
        self.use_model_button.setEnabled(self.checkpoint_combo.count() > 0)

    @property
    def is_running(self) -> bool:
        return self.worker is not None and self.worker.is_running

    @property
    def run_dir(self) -> Path | None:
        return self._run_dir

    # ---- probe pairs ----
    def _set_current_pair(self, text_a: str, text_b: str | None) -> None:
        text_a = (text_a or "").strip()
        if not text_a:
            return
        self._current_pair = ProbePair(text_a, (text_b or "").strip() or None)
        self._refresh_probe_list()

    def on_pair_changed(self, text_a: str, text_b: str | None = None) -> None:
        """The inspector's pair changed: it becomes the first probe pair from the next probe on."""
        self._set_current_pair(text_a, text_b)

    def pin_pair(self, text_a: str, text_b: str | None = None) -> ProbePair:
        pair = ProbePair(text_a.strip(), (text_b or "").strip() or None)
        if not pair.text_a:
            raise ValueError("a probe pair needs a sentence A; type one in the inspector first")
        if pair not in self._pinned:
            self._pinned.append(pair)
        self._refresh_probe_list()
        return pair

    def _pin_current(self) -> None:
        if self._current_pair is not None:
            self.pin_pair(self._current_pair.text_a, self._current_pair.text_b)

    def _unpin_selected(self) -> None:
        pair = self.selected_pair()
        if pair in self._pinned:
            self._pinned.remove(pair)
            self._refresh_probe_list()

    def probe_pairs(self) -> tuple[ProbePair, ...]:
        pairs = [self._current_pair] if self._current_pair else []
        pairs += [pair for pair in self._pinned if pair not in pairs]
        return tuple(pairs)

    def _refresh_probe_list(self) -> None:
        selected = self.selected_pair()
        self._probe_pairs = self.probe_pairs()  # read by the training thread: a tuple, replaced whole
        known = list(self._probe_pairs) + [p for p in self.history.pairs() if p not in self._probe_pairs]
        self.probe_list.blockSignals(True)
        self.probe_list.clear()
        for pair in known:
            tag = "inspector" if pair == self._current_pair else ("pinned" if pair in self._pinned else "earlier")
            item = QListWidgetItem(f"[{tag}] {pair.caption}")
            item.setData(Qt.ItemDataRole.UserRole, pair)
            self.probe_list.addItem(item)
        row = known.index(selected) if selected in known else 0
        self.probe_list.setCurrentRow(row if known else -1)
        self.probe_list.blockSignals(False)

    def selected_pair(self) -> ProbePair | None:
        item = self.probe_list.currentItem() if hasattr(self, "probe_list") else None
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    # ---- running ----
    def start_run(self, settings: TrainingSettings | None = None) -> bool:
        """Start a run with `settings` (default: the form). False, with a message, when it cannot start."""
        if self.is_running:
            self._set_status("A run is already going; stop it first.", "error")
            return False
        self._stop_watching()
        try:
            settings = settings or self.form.settings()
            init = self._initial_model(settings)
            run_dir = Path(settings.out_dir) if settings.out_dir else (
                default_runs_dir() / datetime.now().strftime("run-%Y%m%d-%H%M%S"))
            run_dir.mkdir(parents=True, exist_ok=True)
        except (ValueError, OSError) as error:
            self._set_status(f"Cannot start: {error}", "error")
            return False
        if settings != self.form.settings_or_none():
            # Started with explicit settings (a test, a script): show them; the run folder field keeps what
            # the user typed, so the next Start does not write into this run's folder.
            try:
                self.form.set_settings(replace(settings, out_dir=self.form.typed_run_folder()))
            except ValueError:
                pass  # e.g. a device this machine lacks: the engine says so in its own message
        self._probe_every = settings.probe_every
        settings = replace(settings, out_dir=str(run_dir))
        warm_up_engine()  # cheap: done at install time
        self._settings = settings
        self._run_dir = run_dir
        self._last_record = None
        self._last_checkpoint = None
        self._pace.clear()
        self.steps_received = 0
        self._ending_status = ""
        self.history.clear()
        self.plots.clear()
        self.plots.show_planned_steps(settings.steps)
        self._refresh_probe_list()
        self._refresh_checkpoints()
        self._reset_slider()
        self.progress.setRange(0, settings.steps)
        self.progress.setValue(0)
        self.progress.setFormat("preparing the corpus and the model…")
        self._set_status(f"Starting in {run_dir}", "info")
        self._show_device(self.form.device_label(settings.device))

        # The previous run's threads are ending (or ended): join them before their Python wrappers go, since a
        # QThread destroyed while its thread still runs aborts the process.
        if self.worker is not None:
            self.worker.wait(30_000)
        self._start_probe_worker()
        self.worker = TrainingWorker(
            lambda: self._make_steps(settings, init),
            on_step=self._on_step_in_worker,
            stop_hook=self._stop_engine,
            torch_threads=self._torch_threads,
            niceness=self._niceness,
        )
        # Bound methods of this (GUI-thread) object, never lambdas: a lambda would run in the worker thread.
        self.worker.yielded.connect(self._on_step)
        self.worker.paused.connect(self._on_paused)
        self.worker.resumed.connect(self._on_resumed)
        self.worker.returned.connect(self._on_returned)
        self.worker.stopped.connect(self._on_stopped)
        self.worker.errored.connect(self._on_errored)
        self.worker.finished.connect(self._on_finished)
        self._started_at = time.perf_counter()
        self.worker.start()
        self._update_buttons()
        self.runStarted.emit(str(run_dir))
        return True

    def _initial_model(self, settings: TrainingSettings) -> Any:
        """For "continue the loaded model": the inspector's (model, tokenizer).

        The training thread saves it as the run's starting checkpoint (reading the weights, never changing
        them) and the engine trains a copy loaded from there, so the inspector keeps its own model as it is.
        """
        if settings.preset != CONTINUE_LOADED:
            return None
        if self.window_ is None or not hasattr(self.window_, "model_and_tokenizer"):
            raise ValueError("there is no loaded model to continue; pick a preset instead")
        model, tokenizer = self.window_.model_and_tokenizer()
        if model is None:
            raise ValueError("the inspector has no model loaded; pick a preset instead")
        if not getattr(model, "has_pretraining_heads", True):
            raise ValueError("the loaded model has no MLM/NSP heads (e.g. MiniLM), so it cannot be pretrained "
                             "further here; pick a preset instead")
        return model, tokenizer

    # worker thread
    def _make_steps(self, settings: TrainingSettings, init: Any) -> Iterator:
        run = self._engine_factory(settings, init)
        with self._run_lock:
            self._run = run
        if self.worker is not None and self.worker.stop_requested:
            run.request_stop()
        if settings.probe_every:
            self._submit_probe(run, 0)  # "before": the weights the run starts from
        return run.steps

    # worker thread
    def _on_step_in_worker(self, value: Any) -> None:
        settings, run, every = self._settings, self._run, self._probe_every
        if not settings or not every or run is None:
            return
        step = value.get("step") if isinstance(value, dict) else getattr(value, "step", None)
        if step is None:
            return
        if int(step) % every == 0 or int(step) == settings.steps:
            self._submit_probe(run, int(step))

    def _submit_probe(self, run: EngineRun, step: int) -> None:
        pairs, probe_worker = self._probe_pairs, self.probe_worker
        if not pairs or probe_worker is None:
            return
        probe_worker.submit(step, (run.snapshot(), run.model_config, run.tokenizer, pairs))

    def _stop_engine(self) -> None:
        with self._run_lock:
            run = self._run
        if run is not None:
            run.request_stop()

    def pause(self) -> None:
        if self.is_running:
            self.worker.pause()
            self._set_status("Pausing at the next step…")
            self._update_buttons()

    def resume(self) -> None:
        if self.is_running:
            self.worker.resume()
            self._update_buttons()

    def stop(self) -> None:
        """Stop at the next step boundary; the engine saves a checkpoint on the way out."""
        if self.is_running:
            self.worker.request_stop()
            self._set_status("Stopping at the next step and saving a checkpoint…")
            self._update_buttons()

    # ---- worker signals (GUI thread) ----
    def _stale(self, current: Any) -> bool:
        """True in a slot invoked by a worker that is no longer this panel's (a signal queued before it was
        replaced): its news belongs to an earlier run."""
        sender = self.sender()
        return sender is not None and sender is not current

    def _on_step(self, record: Any) -> None:
        if self._stale(self.worker) or not isinstance(record, dict):
            return
        held_out = record.pop("held_out", None)
        record = normalize_record(record)
        self.plots.add_record(record)
        if isinstance(held_out, dict):
            self.plots.add_record(held_out)
        if record.get("checkpoint"):
            self._last_checkpoint = Path(record["checkpoint"])
            self._refresh_checkpoints()
        if record["eval"]:
            return
        self.steps_received += 1
        self._last_record = record
        self._show_progress(record, self._settings.steps if self._settings else None)
        self.stepCompleted.emit(int(record.get("step", 0)))

    def _show_progress(self, record: dict, total: int | None) -> None:
        step = int(record.get("step", 0))
        total = int(record.get("total_steps") or total or max(step, 1))
        self.progress.setRange(0, total)
        self.progress.setValue(min(step, total))
        parts = [f"step {step:,} / {total:,}"]
        tokens_per_second = record.get("tokens_per_second")
        if tokens_per_second:
            parts.append(f"{tokens_per_second:,.0f} tok/s")
        elapsed = record.get("elapsed")
        if elapsed is None:
            elapsed = time.perf_counter() - self._started_at
        self._pace.add(step, elapsed)
        seconds_left = self._pace.seconds_left(step, total)
        if seconds_left is not None:
            parts.append(f"{format_duration(seconds_left)} left")
        self.progress.setFormat("  ·  ".join(parts))

    def _on_returned(self, _value: Any) -> None:
        if self._stale(self.worker):
            return
        self._on_ended("finished")

    def _on_stopped(self, _value: Any) -> None:
        if self._stale(self.worker):
            return
        self._on_ended("stopped")

    def _on_paused(self, _last: Any = None) -> None:
        if self._stale(self.worker):
            return
        step = self._last_record.get("step") if self._last_record else 0
        self._set_status(f"Paused after step {step}. Resume continues the same run.")
        self._update_buttons()

    def _on_resumed(self) -> None:
        if self._stale(self.worker):
            return
        self._pace.clear()  # the pause is not part of the pace
        self._set_status("Training…")
        self._update_buttons()

    def _on_ended(self, status: str) -> None:
        self._ending_status = status
        step = self._last_record.get("step") if self._last_record else 0
        self._refresh_checkpoints()
        checkpoint = self._latest_checkpoint()
        where = f" Checkpoint: {checkpoint}." if checkpoint else ""
        if status == "finished":
            self._set_status(f"Finished at step {step}.{where}", "ok")
        else:
            self._set_status(f"Stopped after step {step}.{where}", "ok" if checkpoint else "info")

    def _on_errored(self, info: dict) -> None:
        if self._stale(self.worker):
            return
        self._ending_status = "failed"
        self._refresh_checkpoints()
        self._set_status(describe_failure(info, self._latest_checkpoint()), "error")
        self.progress.setFormat(self.progress.format() + "  ·  failed")

    def _on_finished(self) -> None:
        if self._stale(self.worker):
            return
        # Only tidy up here: never start new work from a finished slot. The probe of the last step may
        # still be running; its result arrives through `probed` like the others.
        self.plots.flush()
        self._update_buttons()
        self.runEnded.emit(self._ending_status or "stopped")

    def _on_probed(self, result: tuple[int, dict]) -> None:
        if self._stale(self.probe_worker):
            return
        step, inspections = result
        follow = self.step_slider.value() == self.step_slider.maximum()
        self.history.add(step, inspections)
        steps = self.history.steps()
        self.step_slider.blockSignals(True)
        self.step_slider.setRange(0, len(steps) - 1)
        self.step_slider.setEnabled(len(steps) > 0)
        if follow:
            self.step_slider.setValue(len(steps) - 1)
        self.step_slider.blockSignals(False)
        if set(inspections) - set(self._probe_pairs):
            self._refresh_probe_list()
        self._show_selected_snapshot(send_to_window=follow)
        self.probed.emit(step)
        if self.is_watching:
            self._checkpoint_probe_done()

    def _on_probe_failed(self, info: dict) -> None:
        if self._stale(self.probe_worker):
            return
        self._set_status(f"Probing at step {info.get('step')} failed: {info.get('message')}", "error")
        if self.is_watching:  # e.g. a checkpoint the writer pruned meanwhile: go on with the next
            self._checkpoint_probe_done()

    # ---- the snapshot slider ----
    def _reset_slider(self) -> None:
        self.step_slider.blockSignals(True)
        self.step_slider.setRange(0, 0)
        self.step_slider.setEnabled(False)
        self.step_slider.blockSignals(False)
        self.step_label.setText("snapshot: none")

    def selected_snapshot_step(self) -> int | None:
        steps = self.history.steps()
        if not steps:
            return None
        return steps[min(self.step_slider.value(), len(steps) - 1)]

    def _slider_moved(self, _value: int) -> None:
        self._show_selected_snapshot(send_to_window=True)

    def _marker_moved(self, step: int) -> None:
        nearest = self.history.nearest_step(step)
        if nearest is None:
            return
        self.step_slider.setValue(self.history.steps().index(nearest))

    def show_snapshot(self, step: int) -> int | None:
        """Select the probe snapshot nearest to `step` (what the slider does); returns its step."""
        nearest = self.history.nearest_step(step)
        if nearest is not None:
            self.step_slider.setValue(self.history.steps().index(nearest))
            self._show_selected_snapshot(send_to_window=True)
        return nearest

    def _show_selected_snapshot(self, send_to_window: bool = True) -> None:
        step = self.selected_snapshot_step()
        pair = self.selected_pair()
        if step is None or pair is None:
            return
        shown_step, inspection = self.history.nearest(step, pair)
        if inspection is None:
            return
        self.step_label.setText(f"snapshot: step {shown_step:,}")
        self.plots.set_marker(shown_step)
        caption = f"training step {shown_step:,}"
        self.snapshot_view.show_inspection(inspection, caption)
        if (send_to_window and self.to_inspector_check.isChecked() and self.window_ is not None
                and not self._closing and hasattr(self.window_, "show_external_inspection")):
            try:
                self.window_.show_external_inspection(inspection, f"{pair.caption} — {caption}")
            except Exception as error:  # the inspector's trouble must not end the run
                self._set_status(f"The inspector could not show the snapshot: {error}", "error")

    # ---- checkpoints and the inspector's model ----
    def _refresh_checkpoints(self) -> None:
        self.checkpoint_combo.clear()
        if self._run_dir is not None:
            final = self._run_dir / "final"
            if (final / "config.json").is_file():
                self.checkpoint_combo.addItem("final weights  (final)", str(final))
            for step, folder in reversed(list_checkpoints(self._run_dir)):
                label = f"step {step:,}" if step is not None else folder.name
                self.checkpoint_combo.addItem(f"{label}  ({folder.name})", str(folder))
        self.use_model_button.setEnabled(self.checkpoint_combo.count() > 0)

    def _latest_checkpoint(self) -> Path | None:
        if self._last_checkpoint is not None and self._last_checkpoint.is_dir():
            return self._last_checkpoint
        checkpoints = list_checkpoints(self._run_dir) if self._run_dir else []
        return checkpoints[-1][1] if checkpoints else None

    def use_selected_checkpoint(self) -> Path | None:
        """Load the selected checkpoint (newest first) as the inspector's model."""
        path = self.checkpoint_combo.currentData()
        if not path:
            self._set_status("No checkpoint yet: wait for the first one, or for the end of the run.", "error")
            return None
        self.modelChosen.emit(path)
        if self.window_ is not None and hasattr(self.window_, "load_checkpoint"):
            try:
                self.window_.load_checkpoint(path)
            except Exception as error:
                self._set_status(f"The inspector could not load {path}: {error}", "error")
                return None
            self._set_status(f"The inspector now uses {path}.", "ok")
        return Path(path)

    # ---- watching a run folder ----
    def watch_run_folder(self, path: str | os.PathLike) -> bool:
        """Show a run written elsewhere (`bert-train --out path`), following its metrics as they grow."""
        if self.is_running:
            self._set_status("Stop the current run before opening another run folder.", "error")
            return False
        folder = Path(path)
        if not folder.is_dir():
            self._set_status(f"{folder} is not a folder; pick the folder given to bert-train --out", "error")
            return False
        self._stop_watching()
        self._run_dir = folder
        self._pace.clear()
        self._started_at = time.perf_counter()
        self._watch_total_steps = None
        try:
            config = read_run_config(folder)
        except ValueError:
            config = {}
        self._watch_total_steps = planned_steps(config)
        if not (folder / METRICS_FILE).exists() and not config:
            self._set_status(f"{folder} holds no {METRICS_FILE} yet; watching for it to appear.", "info")
        else:
            self._set_status(f"Watching {folder}", "info")
        described = describe_run_config(config)
        if described:
            self._set_status(f"{self.status_label.text()} ({described})", "info")
        self.plots.clear()
        self.plots.show_planned_steps(self._watch_total_steps)
        self.history.clear()
        self._reset_slider()
        self._refresh_probe_list()
        # Checkpoints are the watched run's weights: each one is probed once, oldest first, one at a time.
        self._start_probe_worker()
        self._checkpoints = CheckpointProbeQueue()
        self._tail = MetricsTail(folder / METRICS_FILE)
        self._poll_watched_run()
        self._refresh_checkpoints()
        self._probe_new_checkpoints()  # those written before the folder was opened
        self._watch_timer.start()
        return True

    def _start_probe_worker(self) -> None:
        if self.probe_worker is not None:
            self.probe_worker.shutdown()
        self.probe_worker = ProbeWorker(SnapshotProber(), torch_threads=1, niceness=self._niceness)
        self.probe_worker.probed.connect(self._on_probed)
        self.probe_worker.failed.connect(self._on_probe_failed)

    def _probe_new_checkpoints(self) -> None:
        """Queue the watched run's checkpoints not probed yet; submit the next when the probe thread is free."""
        if self._run_dir is None or self.probe_worker is None:
            return
        self._checkpoints.add(list_checkpoints(self._run_dir))
        self._submit_next_checkpoint()

    def _submit_next_checkpoint(self) -> None:
        # One checkpoint in flight at a time (the probe worker keeps only the newest waiting job).
        if not self.is_watching or self.probe_worker is None or not self._probe_pairs:
            return
        checkpoint = self._checkpoints.take()
        if checkpoint is not None:
            step, folder = checkpoint
            self.probe_worker.submit(step, (str(folder), self._probe_pairs))

    def _checkpoint_probe_done(self) -> None:
        if self._checkpoints.done():
            self._submit_next_checkpoint()

    def _stop_watching(self) -> None:
        self._watch_timer.stop()
        self._tail = None

    def _poll_watched_run(self) -> None:
        if self._tail is None:
            return
        update = self._tail.poll()
        if update.restarted:
            self.plots.clear()
            self.plots.show_planned_steps(self._watch_total_steps)
        if not update.records:
            return
        self.plots.add_records(update.records)
        for record in reversed(update.records):
            if record.get("kind") not in (None, "step"):
                continue
            record = normalize_record(record)
            if not record["eval"] and "step" in record:
                self._last_record = record
                self._show_progress(record, self._watch_total_steps)
                break
        if any(record.get("kind") == "checkpoint" for record in update.records):
            self._refresh_checkpoints()
            self._probe_new_checkpoints()
        for record in update.records:
            if record.get("kind") == "error":
                self._set_status(f"The run failed at step {record.get('step')}: {record.get('message')}", "error")
        self._update_buttons()

    @property
    def is_watching(self) -> bool:
        return self._tail is not None

    # ---- closing ----
    def closeEvent(self, event) -> None:  # the panel opened on its own, as a window (development)
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        """Stop a run (it saves a checkpoint), join the worker threads, stop watching. True when joined."""
        self._closing = True
        self._stop_watching()
        joined = True
        if self.worker is not None:
            joined = self.worker.shutdown(timeout_ms)
        if self.probe_worker is not None:
            joined = self.probe_worker.shutdown(timeout_ms) and joined
        return joined


def install_training_panel(window: Any) -> TrainingPanel:
    """Add the "Train" tab to `window.tabs` and wire it to the window's public API."""
    panel = TrainingPanel(window)
    window.tabs.addTab(panel, "Train")
    if hasattr(window, "pairChanged"):
        window.pairChanged.connect(panel.on_pair_changed)
    if hasattr(window, "closing"):
        window.closing.connect(panel.shutdown)
    window.training_panel = panel
    return panel
