"""How a run tab shows a run folder written elsewhere (`<command> --out PATH`, here or on another machine): the
folder dialog, refusing a run of the other kind, and what the `RunWatcher` reports onto the plots, the checkpoint
list and the run's lifecycle."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from explorer.runs._qt.form_fields import default_runs_dir
from explorer.runs._qt.run_watcher import RunWatcher
from explorer.runs.curve_layout import is_held_out
from explorer.runs.lifecycle import checkpoint_written
from explorer.runs.run_kinds import run_folder_verdict


class RunWatching:
    """Watching a run folder, for `explorer.runs._qt.run_panel.RunPanel` (its base class), which sets what these
    read: command, curve_layout, lifecycle, plots, status, checkpoints, runner, run_dir and `_busy`, `_clear_run`.
    A folder is judged first (`explorer.runs.run_kinds.run_folder_verdict`): what is no run is said at once, never
    waited on."""

    def _make_watcher(self, poll_interval_ms: int) -> RunWatcher:
        self._waiting_for = ""  # what the folder opened awaits before its first step (run_folder_verdict)
        watcher = RunWatcher(poll_interval_ms, parent=self)
        watcher.started.connect(self._on_watch_started)
        watcher.restarted.connect(self._on_watched_restart)
        watcher.statsArrived.connect(self._on_watched_stats)
        watcher.checkpointsChanged.connect(self.checkpoints.refresh)
        watcher.status.connect(self.lifecycle.say)
        watcher.ended.connect(self._on_watched_end)
        return watcher

    @property
    def is_watching(self) -> bool:
        return self.watcher.is_watching

    def _browse_run_folder(self) -> None:
        start = self.run_dir.parent if self.run_dir is not None else default_runs_dir()
        path = QFileDialog.getExistingDirectory(self, f"Run folder (written by {self.command} --out, or by this "
                                                      "tab)", str(start))
        if path:
            self.watch_run_folder(path)

    def watch_run_folder(self, path: str | os.PathLike) -> bool:
        """Show a run written elsewhere (`<command> --out path`), following its metrics as they grow. A folder that
        is no such run (a run of the other kind, a Trainer or TensorBoard folder, a checkpoint, anything else) is
        said and refused; one that may still become a run is watched, its status saying what it waits for."""
        if self._busy:
            self.lifecycle.say("Stop the current run before opening another run folder.", "error")
            return False
        verdict = run_folder_verdict(path, self.curve_layout.kind) if Path(path).is_dir() else None
        if verdict is not None and not verdict.watch:
            self.lifecycle.say(verdict.message, "error")
            return False
        self._waiting_for = verdict.message if verdict is not None else ""
        return self.watcher.watch(path)

    def _on_watch_started(self, folder: str, planned: int | None) -> None:
        self._clear_run(Path(folder), planned)
        self.lifecycle.watch(Path(folder), planned, self.watcher.description, self._waiting_for)
        self.runner.restart_prober()

    def _on_watched_end(self, how: str, last_step: int) -> None:
        self.checkpoints.refresh()
        run_dir = self.run_dir
        self.lifecycle.watched_ended(how, last_step, checkpoint_written(run_dir, last_step or None))

    def _on_watched_restart(self) -> None:
        self.plots.clear()
        self.plots.show_planned_steps(self.watcher.total_steps)

    def _on_watched_stats(self, stats: list) -> None:
        self.plots.add_all(stats)
        steps = [record for record in stats if not is_held_out(record)]
        self.status.show_warnings(steps)
        if steps:
            self.lifecycle.watched_steps(steps)
