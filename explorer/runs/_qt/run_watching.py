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
from explorer.runs.run_kinds import wrong_tab_reason


class RunWatching:
    """Watching a run folder, for `explorer.runs._qt.run_panel.RunPanel` (its base class), which sets what these
    read: command, curve_layout, lifecycle, plots, status, checkpoints, runner, run_dir and `_busy`, `_clear_run`."""

    def _make_watcher(self, poll_interval_ms: int) -> RunWatcher:
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
        """Show a run written elsewhere (`<command> --out path`), following its metrics as they grow."""
        if self._busy:
            self.lifecycle.say("Stop the current run before opening another run folder.", "error")
            return False
        if problem := wrong_tab_reason(path, self.curve_layout.kind):
            self.lifecycle.say(f"Cannot open it here: {problem}.", "error")
            return False
        return self.watcher.watch(path)

    def _on_watch_started(self, folder: str, planned: int | None) -> None:
        self._clear_run(Path(folder), planned)
        self.lifecycle.watch(Path(folder), planned, self.watcher.description)
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
