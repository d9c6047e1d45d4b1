"""Follow a run folder written elsewhere (`bert-train --out` or `bert-finetune --out`, here or on another
machine) as it grows.

A poll timer tails the folder's `metrics.jsonl` (`run_watch.MetricsTail`: complete lines only, restarts
noticed) and hands its statistics on as the engine's own records (`run_watch.record_reader`: the trainer's
`StepStats` / `EvalStats`, read by `stats_from_record`, the one place where foreign spellings are read, or a
fine-tuning run's `TaskStepStats` / `TaskEvalStats`); its analysis records (kind "analysis": what the model has
learned at a step) go out as they are (`analysisArrived`). Checkpoints are the watched run's weights: each one is
offered for probing once, oldest first, one at a time (`probeCheckpoint`, then `checkpoint_probed()`).
It notices the end of the run (`ended`): a `summary.json` at the last step (what a finished or stopped run
writes), an error record, or a `final/` folder and no growth for `quiet_s`; it goes on watching, in case
the run is resumed. It draws nothing: the Train tab shows what it reports.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from bertcore.errors import RunFolderError
from bertcore.files.file_names import FINAL_DIR, METRICS_FILE
from bertcore.files.metrics_log import MetricsTail
from bertcore.files.run_folder import list_checkpoints, read_run_config
from explorer.runs.run_descriptions import describe_config, planned_steps
from explorer.runs.run_watch import record_reader, run_has_ended, stats_from_record
from explorer.runs.snapshot_probe import CheckpointProbeQueue
from explorer.train.analysis_timeline import RECORD_KIND as ANALYSIS_KIND


class RunWatcher(QObject):
    started = Signal(str, object)  # folder, the total steps its run config plans (None: it does not say)
    restarted = Signal()  # the metrics file was replaced or truncated: what was drawn belongs to another run
    statsArrived = Signal(object)  # list of StepStats / EvalStats, in file order
    analysisArrived = Signal(object)  # list of analysis records (dicts, kind "analysis"), in file order
    checkpointsChanged = Signal()  # the run wrote a checkpoint
    probeCheckpoint = Signal(int, str)  # step, folder: probe it next, then call checkpoint_probed()
    status = Signal(str, str)  # text, kind ("info" | "error")
    ended = Signal(str, int)  # "finished" | "stopped" | "failed", the last step the run wrote

    def __init__(self, poll_interval_ms: int = 250, parent: QObject | None = None, quiet_s: float = 60.0):
        super().__init__(parent)
        self.run_dir: Path | None = None
        self.total_steps: int | None = None
        self.last_step: int | None = None
        self.description = ""  # the watched run's configuration in one line
        self.ended_as: str | None = None  # how the run ended, None while it may still be going
        self.quiet_s = quiet_s
        self._last_growth = time.monotonic()
        self._tail: MetricsTail | None = None
        self._read_record = stats_from_record  # record_reader of the run's kind, once its run_config.json says
        self._kind_known = False
        self._checkpoints = CheckpointProbeQueue()
        self._timer = QTimer(self)
        self._timer.setInterval(poll_interval_ms)
        self._timer.timeout.connect(self.poll)

    @property
    def is_watching(self) -> bool:
        return self._tail is not None

    def watch(self, path: str | os.PathLike) -> bool:
        """Start following `path`; False, with a status message, when it is not a folder."""
        folder = Path(path)
        if not folder.is_dir():
            self.status.emit(f"{folder} is not a folder; pick the folder given to bert-train --out", "error")
            return False
        self.stop()
        try:
            config = read_run_config(folder)
        except ValueError:
            config = {}
        self.run_dir, self.total_steps = folder, planned_steps(config)
        self._read_record, self._kind_known = record_reader(config), bool(config)
        if not (folder / METRICS_FILE).exists() and not config:
            text = f"{folder} holds no {METRICS_FILE} yet; watching for it to appear."
        else:
            text = f"Watching {folder}"
        described = self.description = describe_config(config)
        self.status.emit(f"{text} ({described})" if described else text, "info")
        self.last_step, self.ended_as, self._last_growth = None, None, time.monotonic()
        self.started.emit(str(folder), self.total_steps)
        self._checkpoints = CheckpointProbeQueue()
        self._tail = MetricsTail(folder / METRICS_FILE)
        self.poll()
        if not self.is_watching:  # its metrics file is not a file: poll said so and stopped
            return False
        self.checkpointsChanged.emit()
        self._offer_new_checkpoints()  # those written before the folder was opened
        self._timer.start()
        return True

    def stop(self) -> None:
        self._timer.stop()
        self._tail = None

    def poll(self) -> None:
        """Read what the run appended since the last poll (the timer calls this)."""
        if self._tail is None:
            return
        try:
            update = self._tail.poll()
        except RunFolderError as error:  # a FIFO or folder named metrics.jsonl: the same answer every 250 ms
            self.stop()
            self.status.emit(f"Stopped watching {self.run_dir}: {error}", "error")
            return
        if not self._kind_known and update.records:  # its run_config.json is written before any record
            try:
                config = read_run_config(self.run_dir)
                self._read_record, self._kind_known = record_reader(config), True
            except ValueError:
                pass
        if update.restarted:
            self.restarted.emit()
        analysed = [record for record in update.records if record.get("kind") == ANALYSIS_KIND]
        if analysed:
            self.analysisArrived.emit(analysed)
        # Records of a finished run's checkpoints analysed afterwards (here, or by another process) are no sign of
        # the run going on.
        grown = [record for record in update.records if not (record.get("kind") == ANALYSIS_KIND
                                                              and record.get("post_hoc"))]
        if not grown:
            self._notice_the_end(failed=False)
            return
        self._last_growth = time.monotonic()
        if self.ended_as is not None:  # it grows again: resumed (by bert-train --resume, say)
            self.ended_as = None
            self.status.emit(f"Watching {self.run_dir}: the run goes on.", "info")
        stats = [converted for converted in map(self._read_record, update.records) if converted is not None]
        if stats:
            self.last_step = max(record.step for record in stats)
            self.statsArrived.emit(stats)
        kinds = [record.get("kind") for record in update.records]
        if "checkpoint" in kinds:
            self.checkpointsChanged.emit()
            self._offer_new_checkpoints()
        failed = False
        for record in update.records:
            if record.get("kind") == "error":
                failed = True
                self.status.emit(f"The run failed at step {record.get('step')}: {record.get('message')}", "error")
        self._notice_the_end(failed)

    def _notice_the_end(self, failed: bool) -> None:
        if self.ended_as is not None or self.run_dir is None:
            return
        quiet = time.monotonic() - self._last_growth >= self.quiet_s
        if failed:
            how = "failed"
        elif run_has_ended(self.run_dir, self.last_step) or (quiet and (self.run_dir / FINAL_DIR).is_dir()):
            done = self.total_steps is not None and self.last_step is not None and self.last_step >= self.total_steps
            how = "finished" if done or (self.run_dir / FINAL_DIR).is_dir() else "stopped"
        else:
            return
        self.ended_as = how
        self.checkpointsChanged.emit()
        self.ended.emit(how, self.last_step or 0)

    def checkpoint_probed(self) -> None:
        """The checkpoint offered last was probed (or its probe failed): offer the next one."""
        if self._checkpoints.done():
            self._offer_next()

    def _offer_new_checkpoints(self) -> None:
        if self.run_dir is not None:
            self._checkpoints.add(list_checkpoints(self.run_dir))
            self._offer_next()

    def _offer_next(self) -> None:
        # One checkpoint in flight at a time (a probe worker keeps only the newest waiting job).
        checkpoint = self._checkpoints.take() if self.is_watching else None
        if checkpoint is not None:
            step, folder = checkpoint
            self.probeCheckpoint.emit(step, str(folder))
