"""The "Train" tab: start a pretraining run in a worker thread, watch its curves and its attention change.

- The run is the engine's step generator (`bertcore.trainer`) in a training thread, which the tab's
  `TrainingRunner` starts, pauses, stops and joins; its `StepStats` cross to the plots as they are.
  Start / Pause / Resume / Stop act at step boundaries.
- Every N steps the training thread hands a CPU copy of the weights to the runner's probe thread, which
  loads it into its own model (eval mode, no grad) and inspects the probe pairs. The newest snapshot supersedes a
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
the engine adapter, the run driver, the prober, a run's pace). Its parts: the form (`TrainingForm`), the
run buttons (`RunButtons`), the progress and status lines (`RunStatus`), the checkpoints (`CheckpointPicker`),
the curves (`LossPlots`), the probes (`ProbeBox`); this module shows one run in them, its own or a watched one.
"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFileDialog, QSplitter, QVBoxLayout, QWidget

from bertcore.trainer import StepStats
from explorer._qt.checkpoint_picker import CheckpointPicker
from explorer._qt.loss_plots import LossPlots
from explorer._qt.probe_box import ProbeBox
from explorer._qt.run_buttons import RunButtons
from explorer._qt.run_status import RunStatus
from explorer._qt.run_watcher import RunWatcher
from explorer._qt.training_form import TrainingForm, default_runs_dir
from explorer._qt.training_runner import TrainingRunner
from explorer._qt.window_tab import WindowTab
from explorer._qt.workers import OneShotWorker
from explorer.run_watch import can_resume, read_curve, resume_point
from explorer.training_run import (
    DEFAULT_PROBE,
    EngineFactory,
    TrainingSettings,
    describe_failure,
    initial_model,
    make_engine_run,
    settings_for_resume,
    warm_up_engine,
)


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
        # One core stays with the GUI (and the probe thread) on small machines; both threads are niced.
        self.runner = TrainingRunner(engine_factory or make_engine_run,
                                     torch_threads or max(1, (os.cpu_count() or 1) - 1), niceness, parent=self)
        self.runner.step.connect(self._on_step)
        self.runner.paused.connect(self._on_paused)
        self.runner.resumed.connect(self._on_resumed)
        self.runner.ended.connect(self._on_ended)
        self.runner.failed.connect(self._on_errored)
        self.runner.finished.connect(self._on_finished)
        self.runner.probed.connect(self._on_probed)
        self.runner.probeFailed.connect(self._on_probe_failed)
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
        self.buttons = RunButtons()
        self.buttons.start_button.clicked.connect(lambda: self.start_run())
        self.buttons.pause_button.clicked.connect(self.pause)
        self.buttons.resume_button.clicked.connect(self.resume)
        self.buttons.stop_button.clicked.connect(self.stop)
        self.buttons.open_run_button.clicked.connect(self._browse_run_folder)
        self.status = RunStatus()
        self.status.show_device(self.form.device_label())
        self.progress = self.status.progress
        self.form.probeEveryChanged.connect(self.runner.set_probe_every)
        self.form.deviceChanged.connect(self.status.show_device)
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
        self.watcher.status.connect(self.status.say)
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
        for part in (self.form, self.buttons, self.status, self.checkpoints):
            column.addWidget(part)
        column.addStretch(1)
        return left

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

    def _update_buttons(self) -> None:
        running = self.is_running
        problems = self.form.problems()
        self.buttons.show_state(running=running, paused=self.runner.is_paused, stopping=self.runner.stop_requested,
                                resumable=None if running else self._resumable(),
                                problem=next(iter(problems.values())) if problems else None)
        self.form.set_editable(not running)

    def _resumable(self) -> Path | None:
        """The run shown, when Resume can continue it."""
        ended_as = self.watcher.ended_as if self.is_watching else self._ending_status
        return self._run_dir if can_resume(self._run_dir, ended_as) else None

    @property
    def is_running(self) -> bool:
        return self.runner.is_running

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
        self.status.clear_warning()
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
        self.status.say(f"Training in {run_dir}", "info")

    # ---- running ----
    def start_run(self, settings: TrainingSettings | None = None) -> bool:
        """Start a run with `settings` (default: the form). False, with a message, when it cannot start; what
        is shown stays until the new run's first step (or probe)."""
        if self.is_running:
            self.status.say("A run is already going; stop it first.", "error")
            return False
        try:
            settings = settings or self.form.settings()
            init = self._initial_model(settings)
            run_dir = Path(settings.out_dir) if settings.out_dir else (
                default_runs_dir() / datetime.now().strftime("run-%Y%m%d-%H%M%S"))
            run_dir.mkdir(parents=True, exist_ok=True)
        except (ValueError, OSError) as error:
            self.status.say(f"Cannot start: {error}", "error")
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
            self.status.say("A run is already going; stop it first.", "error")
            return False
        folder = Path(run_dir) if run_dir is not None else self._run_dir
        if folder is None:
            self.status.say("Nothing to resume: start a run, or open a stopped run's folder.", "error")
            return False
        try:
            point = resume_point(folder)
            devices = tuple(self.form.device_combo.itemData(i) for i in range(self.form.device_combo.count()))
            settings = settings_for_resume(folder, devices)
            curve = read_curve(folder, point.step)
        except (ValueError, OSError) as error:
            self.status.say(f"Cannot resume: {error}", "error")
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
        self.status.say(status, "info")
        self.status.show_device(self.form.device_label(settings.device))
        self.runner.launch(settings, init, lambda: self.probes.pairs)
        self._update_buttons()
        self.runStarted.emit(str(settings.resume_from or settings.out_dir))

    def _initial_model(self, settings: TrainingSettings) -> Any:
        """What the run starts from (`training_run.initial_model`): the inspector's model, for "continue the
        loaded model"; the engine trains a copy, so the inspector keeps its own as it is."""
        return initial_model(settings, *self._inspector_model)

    def pause(self) -> None:
        if self.is_running:
            self.runner.pause()
            self.status.say("Pausing at the next step…")
            self._update_buttons()

    def resume(self) -> None:
        """Continue the paused run; with nothing running, resume the run shown from its latest checkpoint."""
        if self.is_running:
            self.runner.resume()
            self._update_buttons()
        else:
            self.resume_run()

    def stop(self) -> None:
        """Stop at the next step boundary; the engine saves a checkpoint on the way out."""
        if self.is_running:
            self.runner.request_stop()
            self.status.say("Stopping at the next step and saving a checkpoint…")
            self._update_buttons()

    # ---- what the run says (GUI thread; only the run going now: see TrainingRunner) ----
    def _on_step(self, stats: Any) -> None:
        self._adopt_pending_run()
        if self.steps_received == 0:
            resumed = f" (resumed at step {self._resumed_at:,})" if self._resumed_at is not None else ""
            self.status.say(f"Training in {self._run_dir}{resumed}", "info")
        self.status.show_warnings([stats])
        self.plots.add(stats)
        if stats.checkpoint:
            self._last_checkpoint = Path(stats.checkpoint)
            self.checkpoints.refresh()
        self.steps_received += 1
        self._last_stats = stats
        self.progress.show_step(stats, self._settings.steps if self._settings else None)
        self.stepCompleted.emit(stats.step)

    def _on_paused(self) -> None:
        self.status.say(f"Paused after step {self._last_step()}. Resume continues the same run.")
        self._update_buttons()

    def _on_resumed(self) -> None:
        self.progress.forget_pace()
        self.status.say("Training…")
        self._update_buttons()

    def _last_step(self) -> int:
        return self._last_stats.step if self._last_stats is not None else 0

    def _on_ended(self, status: str) -> None:
        self._outcome = status
        if self._pending is not None:  # stopped before its first step: nothing of it to show
            self._pending = None
            self.status.say("Stopped before the first step." + self._still_shown(), "info")
            self._restore_progress()
            return
        self._ending_status = status
        self.checkpoints.refresh()
        checkpoint = self.checkpoints.latest(self._last_checkpoint)
        where = f" Checkpoint: {checkpoint}." if checkpoint else ""
        if status == "finished":
            self.status.say(f"Finished at step {self._last_step()}.{where}", "ok")
        else:
            self.status.say(f"Stopped after step {self._last_step()}.{where}", "ok" if checkpoint else "info")

    def _on_errored(self, failure: Any, last_step: Any) -> None:
        self._outcome = "failed"
        if self._pending is not None:  # it failed before showing anything: what is shown stays as it was
            self._pending = None
            self.status.say(describe_failure(failure, None, None) + self._still_shown(), "error")
            self._restore_progress()
            return
        self._ending_status = "failed"
        self.checkpoints.refresh()
        self.status.say(describe_failure(failure, last_step, self.checkpoints.latest(self._last_checkpoint)),
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
        # Only tidy up here: never start new work from a finished slot. The probe of the last step may
        # still be running; its result arrives through `probed` like the others.
        self.plots.flush()
        self._update_buttons()
        self.runEnded.emit(self._outcome or "stopped")

    def _on_probed(self, step: int, inspections: dict) -> None:
        self._adopt_pending_run()
        self.probes.add_snapshot(step, inspections)
        self.probed.emit(step)
        if self.is_watching:
            self.watcher.checkpoint_probed()

    def _on_probe_failed(self, step: int, failure: Any) -> None:
        self.status.say(f"Probing at step {step} failed: {failure.text}", "error")
        if self.is_watching:  # e.g. a checkpoint the writer pruned meanwhile: go on with the next
            self.watcher.checkpoint_probed()

    # ---- checkpoints and the inspector's model ----
    def use_selected_checkpoint(self) -> Path | None:
        """Ask the inspector to load the selected checkpoint (newest first) as its model."""
        path = self.checkpoints.choose()
        if path is None:
            self.status.say("No checkpoint yet: wait for the first one, or for the end of the run.", "error")
        return Path(path) if path else None

    def _open_checkpoint(self, path: str) -> None:
        self.openCheckpoint.emit(path)
        self.status.say(f"The inspector now uses {path}.", "ok")

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
            self.status.say("Stop the current run before opening another run folder.", "error")
            return False
        return self.watcher.watch(path)

    def _on_watch_started(self, folder: str, planned: int | None) -> None:
        self._pending = None
        self._clear_run(Path(folder), planned, "waiting for the run's first step…")
        self.runner.restart_prober()

    def _on_watched_end(self, how: str, last_step: int) -> None:
        self.checkpoints.refresh()
        described = f" ({self.watcher.description})" if self.watcher.description else ""
        if how == "finished":
            self.status.say(f"The watched run finished at step {last_step:,}{described}.", "ok")
        elif how == "stopped":
            self.status.say(f"The watched run stopped after step {last_step:,}{described}. Resume continues it "
                             "from its latest checkpoint, as bert-train --resume does.", "info")
        self.progress.setFormat(self.progress.format() + f"  ·  {how}")
        self._update_buttons()

    def _on_watched_restart(self) -> None:
        self.plots.clear()
        self.plots.show_planned_steps(self.watcher.total_steps)

    def _on_watched_stats(self, stats: list) -> None:
        self.plots.add_all(stats)
        steps = [record for record in stats if isinstance(record, StepStats)]
        self.status.show_warnings(steps)
        if steps:
            self._last_stats = steps[-1]
            self.progress.show_step(steps[-1], self.watcher.total_steps)
        self._update_buttons()

    def _probe_checkpoint(self, step: int, folder: str) -> None:
        if not self.runner.probe_checkpoint(step, folder, self.probes.pairs):
            self.watcher.checkpoint_probed()  # nothing to probe it with: on to the next

    # ---- closing ----
    def closeEvent(self, event) -> None:  # the tab opened on its own, as a window (development)
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        """Stop a run (it saves a checkpoint), join the worker threads, stop watching. True when joined."""
        self._closing = True
        self.watcher.stop()
        joined = self._warm_up.wait(timeout_ms)
        return self.runner.shutdown(timeout_ms) and joined
