"""A run tab's buttons (Train, Fine-tune): Start, Pause, Resume, Stop and "Open run folder…", with which of them
can act now and why (their tooltips). The tab connects their `clicked` and tells them its run's state
(`show_state`, from its `RunLifecycle`): what acts follows from that state alone."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QGridLayout, QPushButton, QWidget

from explorer.common._qt.widget_names import named
from explorer.runs.lifecycle import GOING, RunState

START_TIP = "Start a new run with these settings (what is shown now stays until the new run's first step)"
RESUME_TIP = ("Continues a paused run, or a stopped one (this tab's, or a run folder you open) from its latest "
              "checkpoint")


class RunButtons(QWidget):
    def __init__(self, parent: QWidget | None = None, command: str = "bert-train"):
        super().__init__(parent)
        self.start_button = named(QPushButton("Start"), "startButton", "Start training", START_TIP)
        self.pause_button = named(QPushButton("Pause"), "pauseButton", "Pause training",
                                  "Hold the run after the current step")
        self.resume_button = named(QPushButton("Resume"), "resumeButton", "Resume training")
        self.stop_button = named(QPushButton("Stop"), "stopButton", "Stop training",
                                 "Stop after the current step and save a checkpoint (Resume continues it)")
        self.open_run_button = named(QPushButton("Open run folder…"), "openRunButton", "Open a run folder to watch",
                                     f"Show a run folder written by {command} or by this tab: its curves follow it "
                                     "while it grows, and Resume continues it once it stopped")
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        for column, button in enumerate((self.start_button, self.pause_button, self.resume_button,
                                         self.stop_button)):
            grid.addWidget(button, 0, column)
        grid.addWidget(self.open_run_button, 1, 0, 1, 4)

    def show_state(self, state: RunState, *, pause_requested: bool, resumable: Path | None, problem: str | None,
                   command: str = "bert-train") -> None:
        """Enable what can act in `state`: a run going (a pause asked and not yet taken, or a stop on its way) or
        not; the run shown that Resume can continue (`resumable`); the first problem of the form's settings."""
        going = state in GOING
        paused = state == RunState.PAUSED or pause_requested
        self.start_button.setEnabled(not going)
        self.start_button.setToolTip(f"Fix the settings first: {problem}" if problem else START_TIP)
        self.pause_button.setEnabled(state in (RunState.PREPARING, RunState.RUNNING) and not pause_requested)
        self.resume_button.setEnabled(paused or (not going and resumable is not None))
        if paused:
            self.resume_button.setToolTip("Continue the paused run")
        elif resumable is not None and not going:
            self.resume_button.setToolTip(f"Continue {resumable} from its latest checkpoint, exactly as "
                                          f"{command} --resume does; its curves go on from its metrics file")
        else:
            self.resume_button.setToolTip(RESUME_TIP)
        self.stop_button.setEnabled(going and state != RunState.STOPPING)
        self.open_run_button.setEnabled(not going)
