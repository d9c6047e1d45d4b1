"""What the Train and Fine-tune tabs share: one run, its own or a watched one, shown and driven.

- The run is an engine's step generator in a training thread (`TrainingRunner`: start, pause, resume, stop,
  join); its step records cross to the plots as they are. Start / Pause / Resume / Stop act at step boundaries.
- "Open run folder…" watches a run written by the tab's command line (here or elsewhere): `RunWatcher`, which
  also notices when that run ends, tied to the tab by `explorer.runs._qt.run_watching`. A folder of the other kind
  (a fine-tuning run in the Train tab, a pretraining run in the Fine-tune tab) is refused with the tab to open it in.
- Resume continues a paused run, or, with nothing running, the run shown (the tab's own, stopped or failed, or
  a folder opened) from its latest checkpoint exactly as the command line's `--resume` does; its curves
  continue from its metrics file.
- A run never loses what is on screen: the settings are checked as they are typed and again at Start, and the
  previous run's curves and checkpoints stay until the new run has produced its first step (or probe); a Start
  that fails before that (bad data, a folder that holds a run) leaves them as they were.
- Faults (NaN, a loss that runs away, a full disk, out of memory, unreadable data) end in a message; the curves
  and the last good checkpoint stay, and the form unlocks. A step the engine marks with a warning shows in
  `trainingWarningLabel`. Closing the window stops the run, which saves a checkpoint, and joins the threads.

The run's lifecycle (idle, preparing, running, paused, stopping, finished / stopped / failed, watching) and the
facts its status needs live in `explorer.runs.lifecycle.RunLifecycle`; the status line, the progress bar and which
buttons act are rendered from it whenever it announces a change, so none of them states what is no longer true.

A subclass gives the form (an `explorer.runs._qt.form_fields.RunForm`), the engine factory, the curve layout and the
command, and lays the parts out; the hooks below say what else it does (the Train tab's probes). The tab talks
to the main window only through `WindowTab`'s signals and slots.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from explorer.common._qt.window_tab import WindowTab
from explorer.common._qt.workers.one_shot import OneShotWorker
from explorer.runs._qt.checkpoint_picker import CheckpointPicker
from explorer.runs._qt.form_fields import RunForm, default_runs_dir
from explorer.runs._qt.loss_plots import LossPlots
from explorer.runs._qt.run_buttons import RunButtons
from explorer.runs._qt.run_status import FIRST_STATUS, RunStatus
from explorer.runs._qt.run_watching import RunWatching
from explorer.runs._qt.training_runner import TrainingRunner
from explorer.runs.curve_layout import PRETRAINING, CurveLayout, is_held_out
from explorer.runs.lifecycle import RunLifecycle, RunState, checkpoint_written
from explorer.runs.run_descriptions import describe_failure
from explorer.runs.run_kinds import COMMAND_OF_KIND, wrong_tab_reason
from explorer.runs.run_watch import read_curve, resume_point
from explorer.runs.status_lines import progress_line, status_line
from explorer.runs.training_run import EngineFactory


class RunPanel(RunWatching, WindowTab):
    """A tab that runs and shows one training run; see the module docstring."""

    runStarted = Signal(str)  # run folder
    runEnded = Signal(str)  # "finished" | "stopped" | "failed"
    stepCompleted = Signal(int)

    def __init__(self, form: RunForm, engine_factory: EngineFactory, warm_up: Callable[[], None], *,
                 layout: CurveLayout = PRETRAINING, torch_threads: int | None = None, niceness: int = 5,
                 poll_interval_ms: int = 250, idle_text: str = FIRST_STATUS, parent: QWidget | None = None):
        super().__init__(parent)
        self.curve_layout = layout
        self.command = COMMAND_OF_KIND[layout.kind]
        self.lifecycle = RunLifecycle(idle_text=idle_text, command=self.command)
        # One core stays with the GUI (and the probe thread) on small machines; both threads are niced.
        self.runner = TrainingRunner(engine_factory, torch_threads or max(1, (os.cpu_count() or 1) - 1), niceness,
                                     parent=self)
        self.runner.step.connect(self._on_step)
        self.runner.paused.connect(self.lifecycle.paused)
        self.runner.resumed.connect(self.lifecycle.resumed)
        self.runner.ended.connect(self._on_ended)
        self.runner.failed.connect(self._on_errored)
        self.runner.preparing.connect(self.lifecycle.preparing_data)
        self.runner.finished.connect(self._on_finished)
        self._settings: Any = None  # the settings of the run launched last
        self._closing = False  # set by shutdown(): the window is going, nothing more is sent to it
        self.steps_received = 0

        # The engine's one-time costs, paid when the tab is made, in a thread of its own so that the window,
        # just shown, stays responsive; a run started before it ends simply waits its turn.
        self._warm_up = OneShotWorker("warm-up", warm_up, name="warmUpThread")
        self._warm_up.start()
        self.form = form
        self.buttons = RunButtons(command=self.command)
        self.buttons.start_button.clicked.connect(lambda: self.start_run())
        self.buttons.pause_button.clicked.connect(self.pause)
        self.buttons.resume_button.clicked.connect(self.resume)
        self.buttons.stop_button.clicked.connect(self.stop)
        self.buttons.open_run_button.clicked.connect(self._browse_run_folder)
        self.status = RunStatus()
        self.status.show_device(self.form.device_label())
        self.progress = self.status.progress
        self.form.deviceChanged.connect(self.status.show_device)
        self.form.stepsChanged.connect(self._show_planned_steps)
        self.form.problemsChanged.connect(lambda _problems: self._update_buttons())
        self.plots = LossPlots(layout=layout)
        self.plots.setMinimumHeight(320)
        self.checkpoints = CheckpointPicker()
        self.checkpoints.chosen.connect(self._open_checkpoint)
        self.watcher = self._make_watcher(poll_interval_ms)
        self.lifecycle.changed.connect(self._render)
        self._render(self.lifecycle, "state")

    def _left_column(self) -> QWidget:
        """The form, the buttons, the status and the checkpoints, top to bottom."""
        left = QWidget()
        column = QVBoxLayout(left)
        for part in (self.form, self.buttons, self.status, self.checkpoints):
            column.addWidget(part)
        column.addStretch(1)
        return left

    # ---- what a subclass adds ----
    def _initial_model(self, settings: Any) -> Any:
        """What a new run starts from besides its settings (e.g. the inspector's model); ValueError says why not."""
        return None

    def _settings_for_resume(self, folder: Path) -> Any:
        """The settings (resume_from set) that continue the run in `folder`; ValueError when they cannot."""
        raise NotImplementedError

    def _new_run_name(self, settings: Any) -> str:
        """The folder name of a run whose form names no folder."""
        return datetime.now().strftime("run-%Y%m%d-%H%M%S")

    def _probe_pairs(self) -> tuple:
        """The sentence pairs a run's weight snapshots are probed with (read in the training thread)."""
        return ()

    def _run_shown(self, run_dir: Path | None) -> None:
        """Another run is shown now (its curves cleared): forget what belonged to the previous one."""

    def _run_ended(self, status: str) -> None:
        """The tab's own run ended: "finished", "stopped" or "failed" (its checkpoints are listed by now)."""

    def _run_resumed(self, run_dir: Path, step: int) -> None:
        """`run_dir` is resumed from its checkpoint of `step` (its curves are read up to it); what the subclass
        keeps of the run after that step goes, as the metrics file's records do."""

    # ---- what the window tells the tab ----
    def on_model_changed(self, loaded: Any) -> None:
        """The inspector's model: a status line naming another one it used no longer holds."""
        self.lifecycle.model_changed(loaded.info.path)

    def on_model_load_failed(self, message: str) -> None:
        """A checkpoint this tab sent that the window could not open: the status says so, not that it is used."""
        self.lifecycle.model_load_failed(message)

    # ---- shown state: rendered from the lifecycle ----
    def _render(self, lifecycle: RunLifecycle, what: str) -> None:
        line = status_line(lifecycle)
        self.status.say(line.text, line.kind)
        self.progress.show_line(progress_line(lifecycle))
        if what not in ("step", "preparation"):
            self._update_buttons()

    def _show_planned_steps(self, steps: int) -> None:
        if not self.lifecycle.is_going and not self.is_watching:  # the empty plots span the run the form plans
            self.plots.show_planned_steps(steps)

    def _update_buttons(self) -> None:
        lifecycle = self.lifecycle
        problems = self.form.problems()
        self.buttons.show_state(lifecycle.state, pause_requested=lifecycle.pause_requested,
                                resumable=lifecycle.resumable,
                                problem=next(iter(problems.values())) if problems else None, command=self.command)
        self.form.set_editable(not lifecycle.is_going)

    @property
    def is_running(self) -> bool:
        """The training thread is going (its last words, how the run ended, may still be on their way)."""
        return self.runner.is_running

    @property
    def _busy(self) -> bool:
        """A run is going, or its thread has not ended yet: no other run may start, no folder be opened."""
        return self.lifecycle.is_going or self.runner.is_running

    @property
    def run_dir(self) -> Path | None:
        shown = self.lifecycle.shown
        return shown.run_dir if shown is not None else None

    @property
    def last_checkpoint(self) -> Path | None:
        """The newest checkpoint the run shown wrote (reported by a step, or found at its end)."""
        shown = self.lifecycle.shown
        return shown.checkpoint if shown is not None else None

    def _clear_run(self, run_dir: Path, planned: int | None) -> None:
        """Forget the previous run's curves, warning and checkpoints (and the subclass' own: `_run_shown`)."""
        self.status.clear_warning()
        self.plots.clear()
        self.plots.show_planned_steps(planned)
        self.checkpoints.show_run(run_dir)
        self._run_shown(run_dir)

    def _adopt_pending_run(self) -> None:
        """The run started has said something (a step, a probe): from now on it is what the tab shows."""
        starting = self.lifecycle.starting
        if starting is None or not self.lifecycle.is_going:
            return
        self._clear_run(starting.run_dir, starting.planned_steps)
        self.lifecycle.begin_showing()

    # ---- running ----
    def start_run(self, settings: Any = None) -> bool:
        """Start a run with `settings` (default: the form). False, with a message, when it cannot start; what
        is shown stays until the new run's first step (or probe)."""
        if self._busy:
            self.lifecycle.say("A run is already going; stop it first.", "error")
            return False
        try:
            settings = settings or self.form.settings()
            init = self._initial_model(settings)
            run_dir = Path(settings.out_dir) if settings.out_dir else default_runs_dir() / self._new_run_name(settings)
            run_dir.mkdir(parents=True, exist_ok=True)
        except (ValueError, OSError) as error:
            self.lifecycle.say(f"Cannot start: {error}", "error")
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
        self.lifecycle.start(run_dir, settings.steps)
        self._launch(settings, init)
        return True

    def resume_run(self, run_dir: str | os.PathLike | None = None) -> bool:
        """Continue `run_dir` (default: the run shown) from its latest checkpoint, exactly as the command line's
        `--out RUN --resume` does. False, with the reason, when there is nothing to resume."""
        if self._busy:
            self.lifecycle.say("A run is already going; stop it first.", "error")
            return False
        folder = Path(run_dir) if run_dir is not None else self.run_dir
        if folder is None:
            self.lifecycle.say("Nothing to resume: start a run, or open a stopped run's folder.", "error")
            return False
        try:
            if problem := wrong_tab_reason(folder, self.curve_layout.kind):
                raise ValueError(problem)
            point = resume_point(folder)
            settings = self._settings_for_resume(folder)
            curve = read_curve(folder, point.step)
        except (ValueError, OSError) as error:
            self.lifecycle.say(f"Cannot resume: {error}", "error")
            return False
        self.watcher.stop()
        try:
            self.form.set_settings(replace(settings, out_dir=self.form.typed_run_folder(), resume_from=None))
        except ValueError:
            pass
        if folder != self.run_dir:
            self._clear_run(folder, point.total_steps)
        else:  # the same run: its own metrics file is what it continues
            self.plots.clear()
        self.plots.add_all(curve)
        self.plots.flush()
        self._run_resumed(folder, point.step)
        steps = [record for record in curve if not is_held_out(record)]
        self.checkpoints.show_run(folder)
        self.lifecycle.resume_from(folder, point.total_steps, point.step, point.checkpoint,
                                   last_record=steps[-1] if steps else None)
        self._launch(settings, None)
        return True

    def _launch(self, settings: Any, init: Any) -> None:
        self._settings = settings
        self.steps_received = 0
        self.status.show_device(self.form.device_label(settings.device))
        self.runner.launch(settings, init, self._probe_pairs)
        self.runStarted.emit(str(settings.resume_from or settings.out_dir))

    def pause(self) -> None:
        if self.lifecycle.state in (RunState.PREPARING, RunState.RUNNING) and not self.lifecycle.pause_requested:
            self.runner.pause()
            self.lifecycle.request_pause()

    def resume(self) -> None:
        """Continue the paused run; with nothing running, resume the run shown from its latest checkpoint."""
        if self.lifecycle.state == RunState.PAUSED:
            self.runner.resume()  # the lifecycle goes on when the training thread says it did
        elif self.lifecycle.pause_requested:
            self.runner.resume()
            self.lifecycle.cancel_pause()
        elif not self.lifecycle.is_going:
            self.resume_run()

    def stop(self) -> None:
        """Stop at the next step boundary; the engine saves a checkpoint on the way out."""
        if self.lifecycle.is_going and self.lifecycle.state != RunState.STOPPING:
            self.runner.request_stop()
            self.lifecycle.request_stop()

    # ---- what the run says (GUI thread; only the run going now: see TrainingRunner) ----
    def _on_step(self, stats: Any) -> None:
        self._adopt_pending_run()
        self.status.show_warnings([stats])
        self.plots.add(stats)
        if stats.checkpoint:
            self.checkpoints.refresh()
        self.steps_received += 1
        self.lifecycle.step_done(stats)
        self.stepCompleted.emit(stats.step)

    def _on_ended(self, status: str) -> None:
        shown = self.lifecycle.shown if self.lifecycle.starting is None else None
        if shown is None:  # stopped before its first step: nothing of it to show
            self.lifecycle.ended(status, None)
            return
        self.checkpoints.refresh()
        # The engine saves on stop without a step to report it: what is on disk says which checkpoint it wrote.
        self.lifecycle.ended(status, checkpoint_written(shown.run_dir, shown.last_step))
        self._run_ended(status)

    def _on_errored(self, failure: Any, last_step: Any) -> None:
        shown = self.lifecycle.shown if self.lifecycle.starting is None else None
        if shown is None:  # it failed before showing anything: what is shown stays as it was
            self.lifecycle.failed(describe_failure(failure, None, None), None)
            return
        self.checkpoints.refresh()
        checkpoint = checkpoint_written(shown.run_dir, shown.last_step)
        self.lifecycle.failed(describe_failure(failure, last_step, checkpoint), checkpoint)
        self._run_ended("failed")

    def _on_finished(self) -> None:
        # Only tidy up here: never start new work from a finished slot (explorer.common._qt.workers, rule 6).
        self.plots.flush()
        self.runEnded.emit(self.lifecycle.outcome or "stopped")

    # ---- checkpoints and the inspector's model ----
    def use_selected_checkpoint(self) -> Path | None:
        """Ask the inspector to load the selected checkpoint (newest first) as its model."""
        path = self.checkpoints.choose()
        if path is None:
            self.lifecycle.say("No checkpoint yet: wait for the first one, or for the end of the run.", "error")
        return Path(path) if path else None

    def _open_checkpoint(self, path: str) -> None:
        self.lifecycle.inspector_uses(path)  # before asking: the window may say the model changed at once
        self.openCheckpoint.emit(path)

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
