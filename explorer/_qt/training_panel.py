"""The "Train" tab: start a pretraining run in a worker thread, watch its curves and its attention change.

- The run is the engine's step generator (`bertcore.trainer`) driven by a `GeneratorWorker`; its
  `StepStats` cross to the plots as they are. Start / Pause / Resume / Stop act at step boundaries.
- Every N steps the training thread hands a CPU copy of the weights to a `LatestJobWorker`, which loads it
  into its own model (eval mode, no grad) and inspects the probe pairs. The newest snapshot supersedes a
  waiting one, so probing never holds the run back. The pairs, the snapshots and their step slider are the
  `ProbeBox`; the selected snapshot goes to the inspector through `showInspection`.
- "Open run folder…" watches a run written by `bert-train` (here or elsewhere): `RunWatcher`, which also
  notices when that run ends.
- Resume continues a paused run, or, with nothing running, the run shown (the app's own, stopped or
  failed, or a `bert-train` folder opened) from its latest checkpoint exactly as `bert-train --resume`
  does (`Trainer(its recorded config, resume=True)`); its curves continue from its metrics file.
- A run never loses what is on screen: the settings are checked as they are typed and again at Start, and
  the previous run's curves, probes and checkpoints stay until the new run has produced its first step or
  probe; a Start that fails before that (a bad corpus, a folder that holds a run) leaves them as they were.
- Faults (NaN, a loss that runs away, a full disk, out of memory, an unreadable corpus) end in a message;
  the curves and the last good checkpoint stay, and the form unlocks. A step the engine marks with a
  warning (its loss rising far above its start) shows in `trainingWarningLabel`. Closing the window stops
  the run, which saves a checkpoint, and joins the threads.

The tab talks to the main window only through `WindowTab`'s signals and slots (`MainWindow.add_tab` wires
them), so it also works on its own. What it drives is plain Python in `explorer.training_run` (settings,
the engine adapter, the run driver, the prober, a run's pace); the form is `training_form.TrainingForm`,
the curves `loss_plots.LossPlots`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QGridLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from bertcore.run_folder import list_checkpoints
from bertcore.trainer import StepStats
from explorer._qt.checkpoint_picker import CheckpointPicker
from explorer._qt.loss_plots import LossPlots
from explorer._qt.probe_box import ProbeBox
from explorer._qt.run_progress import RunProgress
from explorer._qt.run_watcher import RunWatcher
from explorer._qt.training_form import TrainingForm, default_runs_dir
from explorer._qt.window_tab import WindowTab
from explorer._qt.workers import GeneratorWorker, LatestJobWorker, OneShotWorker
from explorer.run_watch import read_curve, resume_point
from explorer.training_run import (
    CONTINUE_LOADED,
    DEFAULT_PROBE,
    CheckpointJob,
    EngineFactory,
    RunDriver,
    SnapshotProber,
    TrainingSettings,
    describe_failure,
    make_engine_run,
    settings_for_resume,
    warm_up_engine,
)

STATUS_STYLES = {"info": "", "ok": "color: #1a7f37;", "error": "color: #c62828; font-weight: bold;"}
WARNING_STYLE = "color: #6b4a00; background: #fff4d6; border: 1px solid #e6c66e; border-radius: 3px; padding: 3px;"


class TrainingPanel(WindowTab):
    """The training tab; see the module docstring."""

    runStarted = Signal(str)  # run folder
    runEnded = Signal(str)  # "finished" | "stopped" | "failed"
    stepCompleted = Signal(int)
    probed = Signal(int)  # step of a new probe snapshot

    def __init__(self, parent: QWidget | None = None, *, engine_factory: EngineFactory | None = None,
                 torch_threads: int | None = None, niceness: int = 5, poll_interval_ms: int = 250):
        super().__init__(parent)
        self.setObjectName("trainingPanel")
        self._engine_factory = engine_factory or make_engine_run
        # One core stays with the GUI (and the probe thread) on small machines.
        self._torch_threads = torch_threads or max(1, (os.cpu_count() or 1) - 1)
        self._niceness = niceness  # the training and probe threads yield the CPU to the GUI thread
        self.worker: GeneratorWorker | None = None
        self.probe_worker: LatestJobWorker | None = None
        self.driver: RunDriver | None = None
        self._inspector_model: tuple[Any, Any] = (None, None)
        self._run_dir: Path | None = None
        self._settings: TrainingSettings | None = None
        self._last_stats: Any = None  # the newest StepStats shown
        self._last_checkpoint: Path | None = None  # the newest checkpoint the running engine reported
        self._pending: tuple[Path, TrainingSettings] | None = None  # a run started, not shown until it says so
        self._resumed_at: int | None = None  # the step a resumed run continues from
        self._ending_status = ""  # how the run shown ended ("finished", "stopped", "failed"; "" while it goes)
        self._outcome = ""
        self._closing = False  # set by shutdown(): the window is going, nothing more is sent to it
        self.steps_received = 0

        # The engine's one-time costs (see warm_up_engine), paid when the tab is made, in a thread of its own so
        # that the window, just shown, stays responsive; a run started before it ends simply waits its turn.
        self._warm_up = OneShotWorker("warm-up", warm_up_engine, name="warmUpThread")
        self._warm_up.start()
        self.form = TrainingForm()
        self.form.probeEveryChanged.connect(self._set_probe_every)
        self.form.deviceChanged.connect(self._show_device)
        self.form.stepsChanged.connect(self._show_planned_steps)
        self.form.problemsChanged.connect(lambda _problems: self._update_buttons())
        self.plots = LossPlots()
        self.plots.setMinimumHeight(320)
        self.probes = ProbeBox(DEFAULT_PROBE)
        self.plots.markerMoved.connect(self.probes.show_snapshot)
        self.probes.snapshotShown.connect(self.plots.set_marker)
        self.probes.showInspection.connect(self._send_snapshot)
        self.checkpoints = CheckpointPicker()
        self.checkpoints.chosen.connect(self._open_checkpoint)
        self.watcher = RunWatcher(poll_interval_ms, parent=self)
        self.watcher.started.connect(self._on_watch_started)
        self.watcher.restarted.connect(self._on_watched_restart)
        self.watcher.statsArrived.connect(self._on_watched_stats)
        self.watcher.checkpointsChanged.connect(self.checkpoints.refresh)
        self.watcher.probeCheckpoint.connect(self._probe_checkpoint)
        self.watcher.status.connect(self._set_status)
        self.watcher.ended.connect(self._on_watched_end)

        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.plots)
        right.addWidget(self.probes)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self._build_left())
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([330, 900])
        QVBoxLayout(self).addWidget(splitter)
        self._show_planned_steps(self.form.planned_steps())
        self._update_buttons()

    def _build_left(self) -> QWidget:
        left = QWidget()
        column = QVBoxLayout(left)
        column.addWidget(self.form)
        buttons = QGridLayout()
        self.start_button = self._button("Start", "startButton", "Start training", lambda: self.start_run(),
                                         "Start a new run with these settings (what is shown now stays until the "
                                         "new run's first step)")
        self.pause_button = self._button("Pause", "pauseButton", "Pause training", self.pause,
                                         "Hold the run after the current step")
        self.resume_button = self._button("Resume", "resumeButton", "Resume training", self.resume, "")
        self.stop_button = self._button("Stop", "stopButton", "Stop training", self.stop,
                                        "Stop after the current step and save a checkpoint (Resume continues it)")
        self.open_run_button = self._button("Open run folder…", "openRunButton", "Open a run folder to watch",
                                            self._browse_run_folder,
                                            "Show a run folder written by bert-train or by this tab: its curves "
                                            "follow it while it grows, and Resume continues it once it stopped")
        for column_index, button in enumerate((self.start_button, self.pause_button, self.resume_button,
                                               self.stop_button)):
            buttons.addWidget(button, 0, column_index)
        buttons.addWidget(self.open_run_button, 1, 0, 1, 4)
        column.addLayout(buttons)

        self.progress = RunProgress()
        column.addWidget(self.progress)
        self.device_label = QLabel("")
        self.device_label.setObjectName("trainingDeviceLabel")
        column.addWidget(self.device_label)
        self.status_label = QLabel("Pick a corpus and a model, then Start.")
        self.status_label.setObjectName("trainingStatusLabel")
        self.status_label.setAccessibleName("Training status")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        column.addWidget(self.status_label)
        self.warning_label = QLabel()
        self.warning_label.setObjectName("trainingWarningLabel")
        self.warning_label.setAccessibleName("Training warning")
        self.warning_label.setWordWrap(True)
        self.warning_label.setStyleSheet(WARNING_STYLE)
        self.warning_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.warning_label.hide()
        column.addWidget(self.warning_label)

        column.addWidget(self.checkpoints)
        column.addStretch(1)
        self._show_device(self.form.device_label())
        return left

    def _button(self, text: str, name: str, accessible: str, slot, tip: str) -> QPushButton:
        button = QPushButton(text)
        button.setObjectName(name)
        button.setAccessibleName(accessible)
        button.setToolTip(tip)
        button.clicked.connect(slot)
        return button

    # ---- what the window tells the tab ----
    def on_pair_changed(self, text_a: str, text_b: str | None = None) -> None:
        """The inspector's pair becomes the first probe pair from the next probe on."""
        self.probes.set_current_pair(text_a, text_b)

    def on_model_changed(self, loaded: Any) -> None:
        """The inspector's model: what "continue the loaded model" trains further."""
        self._inspector_model = (loaded.model, loaded.tokenizer)

    def _send_snapshot(self, inspection: Any, caption: str) -> None:
        if not self._closing:
            self.showInspection.emit(inspection, caption)

    # ---- shown state ----
    def _show_planned_steps(self, steps: int) -> None:
        if not self.is_running and not self.is_watching:  # the empty plots span the run the form plans
            self.plots.show_planned_steps(steps)

    def _set_probe_every(self, steps: int) -> None:
        if self.driver is not None:
            self.driver.probe_every = int(steps)  # read by the training thread: a plain int, replaced whole

    def _show_device(self, label: str) -> None:
        self.device_label.setText(f"Trains on: {label}")

    def _set_status(self, text: str, kind: str = "info") -> None:
        self.status_label.setText(text)
        self.status_label.setStyleSheet(STATUS_STYLES[kind])

    def _update_buttons(self) -> None:
        running = self.is_running
        paused = running and self.worker.is_paused
        resumable = None if running else self._resumable()
        self.start_button.setEnabled(not running)
        problems = self.form.problems()
        self.start_button.setToolTip("Fix the settings first: " + next(iter(problems.values())) if problems else
                                     "Start a new run with these settings (what is shown now stays until the new "
                                     "run's first step)")
        self.pause_button.setEnabled(running and not paused and not self.worker.stop_requested)
        self.resume_button.setEnabled((paused and not self.worker.stop_requested) or resumable is not None)
        if paused:
            self.resume_button.setToolTip("Continue the paused run")
        elif resumable is not None:
            self.resume_button.setToolTip(f"Continue {resumable} from its latest checkpoint, exactly as "
                                          "bert-train --resume does; its curves go on from its metrics file")
        else:
            self.resume_button.setToolTip("Continues a paused run, or a stopped one (this tab's, or a run folder "
                                          "you open) from its latest checkpoint")
        self.stop_button.setEnabled(running and not self.worker.stop_requested)
        self.open_run_button.setEnabled(not running)
        self.form.set_editable(not running)

    def _resumable(self) -> Path | None:
        """The run shown, when Resume can continue it: it has a checkpoint, and is not going on or finished."""
        run_dir = self._run_dir
        if run_dir is None or self._ending_status == "finished":
            return None
        if self.is_watching and self.watcher.ended_as not in ("stopped", "failed"):
            return None  # it may still be written by another process
        if not self.is_watching and self._ending_status not in ("stopped", "failed"):
            return None
        return run_dir if list_checkpoints(run_dir) else None

    @property
    def is_running(self) -> bool:
        return self.worker is not None and self.worker.is_running

    @property
    def is_watching(self) -> bool:
        return self.watcher.is_watching

    @property
    def run_dir(self) -> Path | None:
        return self._run_dir

    def _clear_run(self, run_dir: Path, planned: int | None, progress: str) -> None:
        """Forget the previous run's curves, snapshots, progress and checkpoints."""
        self._run_dir = run_dir
        self._last_stats = None
        self._last_checkpoint = None
        self._ending_status = ""
        self.warning_label.hide()
        self.progress.begin(planned, progress)
        self.plots.clear()
        self.plots.show_planned_steps(planned)
        self.probes.clear()
        self.checkpoints.show_run(run_dir)

    def _adopt_pending_run(self) -> None:
        """The run started has said something (a step, a probe): from now on it is what the tab shows."""
        if self._pending is None:
            return
        run_dir, settings = self._pending
        self._pending = None
        self._clear_run(run_dir, settings.steps, "training…")
        self._set_status(f"Training in {run_dir}", "info")

    def _start_probe_worker(self) -> None:
        if self.probe_worker is not None:
            self.probe_worker.shutdown()
        self.probe_worker = LatestJobWorker(SnapshotProber(), name="probeThread", torch_threads=1,
                                            niceness=self._niceness)
        self.probe_worker.done.connect(self._on_probed)
        self.probe_worker.failed.connect(self._on_probe_failed)

    # ---- running ----
    def start_run(self, settings: TrainingSettings | None = None) -> bool:
        """Start a run with `settings` (default: the form). False, with a message, when it cannot start; what
        is shown stays until the new run's first step (or probe)."""
        if self.is_running:
            self._set_status("A run is already going; stop it first.", "error")
            return False
        try:
            settings = settings or self.form.settings()
            init = self._initial_model(settings)
            run_dir = Path(settings.out_dir) if settings.out_dir else (
                default_runs_dir() / datetime.now().strftime("run-%Y%m%d-%H%M%S"))
            run_dir.mkdir(parents=True, exist_ok=True)
        except (ValueError, OSError) as error:
            self._set_status(f"Cannot start: {error}", "error")
            return False
        self.watcher.stop()
        if settings != self.form.settings_or_none():
            # Started with explicit settings (a test, a script): show them; the run folder field keeps what
            # the user typed, so the next Start does not write into this run's folder.
            try:
                self.form.set_settings(replace(settings, out_dir=self.form.typed_run_folder()))
            except ValueError:
                pass  # e.g. a device this machine lacks: the engine says so in its own message
        settings = replace(settings, out_dir=str(run_dir))
        self._pending = (run_dir, settings)
        self._resumed_at = None
        self._launch(settings, init, f"Starting in {run_dir}: preparing the corpus and the model…")
        return True

    def resume_run(self, run_dir: str | os.PathLike | None = None) -> bool:
        """Continue `run_dir` (default: the run shown) from its latest checkpoint, exactly as
        `bert-train --out RUN --resume` does. False, with the reason, when there is nothing to resume."""
        if self.is_running:
            self._set_status("A run is already going; stop it first.", "error")
            return False
        folder = Path(run_dir) if run_dir is not None else self._run_dir
        if folder is None:
            self._set_status("Nothing to resume: start a run, or open a stopped run's folder.", "error")
            return False
        try:
            point = resume_point(folder)
            devices = tuple(self.form.device_combo.itemData(i) for i in range(self.form.device_combo.count()))
            settings = settings_for_resume(folder, devices)
            curve = read_curve(folder, point.step)
        except (ValueError, OSError) as error:
            self._set_status(f"Cannot resume: {error}", "error")
            return False
        self.watcher.stop()
        try:
            self.form.set_settings(replace(settings, out_dir=self.form.typed_run_folder(), resume_from=None))
        except ValueError:
            pass
        if folder != self._run_dir:
            self._clear_run(folder, point.total_steps, "resuming…")
        else:  # the same run: its own metrics file is what it continues
            self._run_dir, self._ending_status = folder, ""
            self.plots.clear()
            self.progress.begin(point.total_steps, "resuming…")
        self.plots.add_all(curve)
        self.plots.flush()
        steps = [record for record in curve if isinstance(record, StepStats)]
        if steps:
            self._last_stats = steps[-1]
            self.progress.show_step(steps[-1], point.total_steps)
        self.checkpoints.show_run(folder)
        self._pending = None
        self._resumed_at = point.step
        self._launch(settings, None, f"Resuming {folder} from step {point.step:,} ({point.checkpoint.name})…")
        return True

    def _launch(self, settings: TrainingSettings, init: Any, status: str) -> None:
        self._settings = settings
        self.steps_received = 0
        self._outcome = ""  # how this run ended, for runEnded
        self._set_status(status, "info")
        self._show_device(self.form.device_label(settings.device))
        # The previous run's threads are ending (or ended): join them before their Python wrappers go, since a
        # QThread destroyed while its thread still runs aborts the process.
        if self.worker is not None:
            self.worker.wait(30_000)
        self._start_probe_worker()
        self.driver = RunDriver(settings, init, self._engine_factory, self.probe_worker.submit,
                                lambda: self.probes.pairs)
        self.worker = GeneratorWorker(self.driver.make_steps, on_step=self.driver.after_step,
                                      stop_hook=self.driver.request_stop, torch_threads=self._torch_threads,
                                      niceness=self._niceness, name="trainingThread")
        # Bound methods of this (GUI-thread) object: their slots run in the GUI thread.
        self.worker.yielded.connect(self._on_step)
        self.worker.paused.connect(self._on_paused)
        self.worker.resumed.connect(self._on_resumed)
        self.worker.returned.connect(self._on_returned)
        self.worker.stopped.connect(self._on_stopped)
        self.worker.errored.connect(self._on_errored)
        self.worker.finished.connect(self._on_finished)
        self.worker.start()
        self._update_buttons()
        self.runStarted.emit(str(settings.resume_from or settings.out_dir))

    def _initial_model(self, settings: TrainingSettings) -> Any:
        """For "continue the loaded model": the inspector's (model, tokenizer).

        The training thread saves it as the run's starting checkpoint (reading the weights, never changing
        them) and the engine trains a copy loaded from there, so the inspector keeps its own model as it is.
        """
        if settings.preset != CONTINUE_LOADED:
            return None
        model, tokenizer = self._inspector_model
        if model is None:
            raise ValueError("the inspector has no model loaded; pick a preset instead")
        if not getattr(model, "has_pretraining_heads", True):
            raise ValueError("the loaded model has no MLM/NSP heads (e.g. MiniLM), so it cannot be pretrained "
                             "further here; pick a preset instead")
        return model, tokenizer

    def pause(self) -> None:
        if self.is_running:
            self.worker.pause()
            self._set_status("Pausing at the next step…")
            self._update_buttons()

    def resume(self) -> None:
        """Continue the paused run; with nothing running, resume the run shown from its latest checkpoint."""
        if self.is_running:
            self.worker.resume()
            self._update_buttons()
        else:
            self.resume_run()

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

    def _on_step(self, stats: Any) -> None:
        if self._stale(self.worker):
            return
        self._adopt_pending_run()
        if self.steps_received == 0:
            resumed = f" (resumed at step {self._resumed_at:,})" if self._resumed_at is not None else ""
            self._set_status(f"Training in {self._run_dir}{resumed}", "info")
        warning = getattr(stats, "warning", None)  # the engine's "loss rising far above its start" note
        if warning:
            self.warning_label.setText(f"Step {stats.step:,}: {warning}")
            self.warning_label.show()
        self.plots.add(stats)
        if stats.checkpoint:
            self._last_checkpoint = Path(stats.checkpoint)
            self.checkpoints.refresh()
        self.steps_received += 1
        self._last_stats = stats
        self.progress.show_step(stats, self._settings.steps if self._settings else None)
        self.stepCompleted.emit(stats.step)

    def _on_returned(self, _value: Any) -> None:
        if not self._stale(self.worker):
            self._on_ended("finished")

    def _on_stopped(self, _last: Any) -> None:
        if not self._stale(self.worker):
            self._on_ended("stopped")

    def _on_paused(self, _last: Any) -> None:
        if self._stale(self.worker):
            return
        self._set_status(f"Paused after step {self._last_step()}. Resume continues the same run.")
        self._update_buttons()

    def _on_resumed(self) -> None:
        if self._stale(self.worker):
            return
        self.progress.forget_pace()
        self._set_status("Training…")
        self._update_buttons()

    def _last_step(self) -> int:
        return self._last_stats.step if self._last_stats is not None else 0

    def _on_ended(self, status: str) -> None:
        self._outcome = status
        if self._pending is not None:  # stopped before its first step: nothing of it to show
            self._pending = None
            self._set_status("Stopped before the first step." + self._still_shown(), "info")
            self._restore_progress()
            return
        self._ending_status = status
        self.checkpoints.refresh()
        checkpoint = self.checkpoints.latest(self._last_checkpoint)
        where = f" Checkpoint: {checkpoint}." if checkpoint else ""
        if status == "finished":
            self._set_status(f"Finished at step {self._last_step()}.{where}", "ok")
        else:
            self._set_status(f"Stopped after step {self._last_step()}.{where}", "ok" if checkpoint else "info")

    def _on_errored(self, failure: Any, last_step: Any) -> None:
        if self._stale(self.worker):
            return
        self._outcome = "failed"
        if self._pending is not None:  # it failed before showing anything: what is shown stays as it was
            self._pending = None
            self._set_status(describe_failure(failure, None, None) + self._still_shown(), "error")
            self._restore_progress()
            return
        self._ending_status = "failed"
        self.checkpoints.refresh()
        self._set_status(describe_failure(failure, last_step, self.checkpoints.latest(self._last_checkpoint)),
                         "error")
        self.progress.mark_failed()

    def _still_shown(self) -> str:
        return f" (still showing the run in {self._run_dir})" if self._run_dir is not None else ""

    def _restore_progress(self) -> None:
        if self._last_stats is not None:
            self.progress.show_step(self._last_stats, self._last_stats.total_steps or None)
        else:
            self.progress.begin(1, "idle")

    def _on_finished(self) -> None:
        if self._stale(self.worker):
            return
        # Only tidy up here: never start new work from a finished slot. The probe of the last step may
        # still be running; its result arrives through `probed` like the others.
        self.plots.flush()
        self._update_buttons()
        self.runEnded.emit(self._outcome or "stopped")

    def _on_probed(self, step: int, inspections: dict) -> None:
        if self._stale(self.probe_worker):
            return
        self._adopt_pending_run()
        self.probes.add_snapshot(step, inspections)
        self.probed.emit(step)
        if self.is_watching:
            self.watcher.checkpoint_probed()

    def _on_probe_failed(self, step: int, failure: Any) -> None:
        if self._stale(self.probe_worker):
            return
        self._set_status(f"Probing at step {step} failed: {failure.text}", "error")
        if self.is_watching:  # e.g. a checkpoint the writer pruned meanwhile: go on with the next
            self.watcher.checkpoint_probed()

    # ---- checkpoints and the inspector's model ----
    def use_selected_checkpoint(self) -> Path | None:
        """Ask the inspector to load the selected checkpoint (newest first) as its model."""
        path = self.checkpoints.choose()
        if path is None:
            self._set_status("No checkpoint yet: wait for the first one, or for the end of the run.", "error")
        return Path(path) if path else None

    def _open_checkpoint(self, path: str) -> None:
        self.openCheckpoint.emit(path)
        self._set_status(f"The inspector now uses {path}.", "ok")

    # ---- watching a run folder ----
    def _browse_run_folder(self) -> None:
        start = self._run_dir.parent if self._run_dir is not None else default_runs_dir()
        path = QFileDialog.getExistingDirectory(self, "Run folder (written by bert-train --out, or by this tab)",
                                                str(start))
        if path:
            self.watch_run_folder(path)

    def watch_run_folder(self, path: str | os.PathLike) -> bool:
        """Show a run written elsewhere (`bert-train --out path`), following its metrics as they grow."""
        if self.is_running:
            self._set_status("Stop the current run before opening another run folder.", "error")
            return False
        return self.watcher.watch(path)

    def _on_watch_started(self, folder: str, planned: int | None) -> None:
        self._pending = None
        self._clear_run(Path(folder), planned, "waiting for the run's first step…")
        self._start_probe_worker()

    def _on_watched_end(self, how: str, last_step: int) -> None:
        self.checkpoints.refresh()
        described = f" ({self.watcher.description})" if self.watcher.description else ""
        if how == "finished":
            self._set_status(f"The watched run finished at step {last_step:,}{described}.", "ok")
        elif how == "stopped":
            self._set_status(f"The watched run stopped after step {last_step:,}{described}. Resume continues it "
                             "from its latest checkpoint, as bert-train --resume does.", "info")
        self.progress.setFormat(self.progress.format() + f"  ·  {how}")
        self._update_buttons()

    def _on_watched_restart(self) -> None:
        self.plots.clear()
        self.plots.show_planned_steps(self.watcher.total_steps)

    def _on_watched_stats(self, stats: list) -> None:
        self.plots.add_all(stats)
        steps = [record for record in stats if isinstance(record, StepStats)]
        warned = [record for record in steps if getattr(record, "warning", None)]
        if warned:
            self.warning_label.setText(f"Step {warned[-1].step:,}: {warned[-1].warning}")
            self.warning_label.show()
        if steps:
            self._last_stats = steps[-1]
            self.progress.show_step(steps[-1], self.watcher.total_steps)
        self._update_buttons()

    def _probe_checkpoint(self, step: int, folder: str) -> None:
        if self.probe_worker is None or not self.probes.pairs:
            self.watcher.checkpoint_probed()  # nothing to probe it with: on to the next
            return
        self.probe_worker.submit(step, CheckpointJob(folder, self.probes.pairs))

    # ---- closing ----
    def closeEvent(self, event) -> None:  # the tab opened on its own, as a window (development)
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        """Stop a run (it saves a checkpoint), join the worker threads, stop watching. True when joined."""
        self._closing = True
        self.watcher.stop()
        joined = self._warm_up.wait(timeout_ms)
        if self.worker is not None:
            joined = self.worker.shutdown(timeout_ms)
        if self.probe_worker is not None:
            joined = self.probe_worker.shutdown(timeout_ms) and joined
        return joined
