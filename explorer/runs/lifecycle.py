"""One run tab's run, from Start to its end, as a state machine; the tab's status line and progress text are
derived from it (explorer.runs.status_lines), so neither can outlive the facts it states.

    idle ──start──▶ preparing ──first step (or probe)──▶ running ⇄ paused
      ▲                 │                                   │        │
      │  (ended before its first step: back to what was     └─stop──▶ stopping ──▶ finished | stopped | failed
      │   shown, with a notice)                                                      │
      └── watch ──▶ watching ──the watched run ends──▶ finished | stopped | failed ◀─┘  (resume: ▶ preparing)

A run started is not shown until it says something (its first step or probe): until then the previous run's
curves, progress and ending stay, and a start that fails leaves them as they were. A resume shows its run at
once (its curve continues from its metrics file). A watched run is one written elsewhere (`RunWatcher`); it
ends as the tab's own do, marked `watched`.

A `Notice` is what was said beside the state (a Start refused, a probe that failed, a watched run's own words,
"the inspector now uses …"): it shows instead of the state's line until the next transition. The inspector's
line also goes when the window loads another model (`model_changed`), and gives way to the window's message when
that checkpoint cannot be opened (`model_load_failed`). Steps do not clear a notice.

Qt-free: the Qt tab (`explorer.runs._qt.run_panel.RunPanel`) drives it from its workers' signals and renders on
`changed`. A transition not in the diagram above is a bug in the caller: `IllegalTransitionError`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from bertcore.files.file_names import checkpoint_name
from bertcore.files.run_folder import list_checkpoints
from explorer.common.events import Event
from explorer.runs.training_run import StepPace

__all__ = ["AT_REST", "ENDED", "GOING", "IllegalTransitionError", "Notice", "RunLifecycle", "RunState", "ShownRun",
           "checkpoint_written"]


class RunState(str, Enum):
    IDLE = "idle"  # nothing going; a run may still be shown (a start that never began left it)
    PREPARING = "preparing"  # started (or resumed): the engine reads its data and builds its model
    RUNNING = "running"
    PAUSED = "paused"
    STOPPING = "stopping"  # asked to stop: it ends at its next step boundary, with a checkpoint
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"
    WATCHING = "watching"  # a run folder written elsewhere, followed as it grows


GOING = frozenset({RunState.PREPARING, RunState.RUNNING, RunState.PAUSED, RunState.STOPPING})
ENDED = frozenset({RunState.FINISHED, RunState.STOPPED, RunState.FAILED})
AT_REST = ENDED | {RunState.IDLE, RunState.WATCHING}  # where a new run may start or a folder be opened


class IllegalTransitionError(RuntimeError):
    """The lifecycle was asked for a transition its diagram does not have (a caller's bug, not a user's)."""


@dataclass(frozen=True)
class Notice:
    """What was said beside the state: `kind` "info", "ok" or "error"; `about_model`, the checkpoint folder the
    notice says the inspector uses (it goes when the inspector's model is another)."""

    text: str
    kind: str = "info"
    about_model: str | None = None


@dataclass(frozen=True)
class ShownRun:
    """The facts about the run a tab shows."""

    run_dir: Path
    planned_steps: int | None  # what its settings (or run config) plan; None when they do not say
    last_record: Any = None  # the newest step record (a `StepStats`-like record); None before the first
    last_step: int | None = None  # its step (a watched run's end may say a later one)
    total_steps: int | None = None  # what the newest step record says the run will reach
    tokens_per_second: float = math.nan
    checkpoint: Path | None = None  # the newest checkpoint it wrote (reported by a step, or found at its end)
    resumed_at: int | None = None  # the step it continues from, when it was resumed
    watched: bool = False  # written elsewhere, followed through its folder
    description: str = ""  # a watched run's configuration in one line
    waiting: str = ""  # what a watched folder awaits before its first step, in words ("" once it has one)
    ended_as: str | None = None  # "finished" | "stopped" | "failed"; None while it may go on
    end_message: str = ""  # how a failed run failed, in words


def checkpoint_written(run_dir: Path | None, last_step: int | None) -> Path | None:
    """The checkpoint a run that ended after `last_step` wrote last, as it is on disk: the one of that step (the
    engine saves one on stop and at the end), else the newest complete one; None when there is none."""
    if run_dir is None:
        return None
    if last_step is not None:
        at_last_step = Path(run_dir) / "checkpoints" / checkpoint_name(last_step)
        if at_last_step.is_dir() and any(folder == at_last_step for _, folder in list_checkpoints(run_dir)):
            return at_last_step
    numbered = [folder for step, folder in list_checkpoints(run_dir) if step is not None]
    return numbered[-1] if numbered else None


class RunLifecycle:
    """A run tab's run: its state, the facts the status needs, and `changed(lifecycle, what)` after each change;
    `what` is "state" (a transition), "step" (a step record, the pace) or "notice"."""

    def __init__(self, *, idle_text: str, command: str, clock: Callable[[], float] = time.monotonic):
        self.idle_text = idle_text  # the status line before anything was started or opened
        self.command = command  # the tab's command line ("bert-train"), named in what Resume does
        self.changed = Event()
        self.state = RunState.IDLE
        self.shown: ShownRun | None = None
        self.starting: ShownRun | None = None  # a run started, not shown until it says something
        self.pause_requested = False
        self.outcome: str | None = None  # how the run launched last ended, shown or not ("finished", …)
        self.notice: Notice | None = None
        # How far the corpus preparation of the run starting is (bertcore.data.prepare.PreparationProgress: phase,
        # done_bytes, total_bytes, describe()), while it prepares; None otherwise.
        self.preparation: Any = None
        self.pace = StepPace()  # the time left, from recent (step, elapsed) points
        self._clock = clock
        self._opened_at = clock()  # for records that do not say their elapsed time
        self._before_start = RunState.IDLE  # where a start that ends before its first step goes back to

    # ---- what can be done now (the buttons) ----
    @property
    def is_going(self) -> bool:
        return self.state in GOING

    @property
    def resumable(self) -> Path | None:
        """The run shown, when Resume can continue it from its checkpoint: it stopped or failed, and wrote one."""
        shown = self.shown
        if self.state in (RunState.STOPPED, RunState.FAILED) and shown is not None and shown.checkpoint is not None:
            return shown.run_dir
        return None

    def seconds_left(self) -> float | None:
        """At the recent pace, while the run shown goes on and nothing holds it; None otherwise."""
        shown = self.shown
        if (shown is None or shown.last_step is None or self.pause_requested
                or self.state not in (RunState.RUNNING, RunState.WATCHING)):
            return None
        return self.pace.seconds_left(shown.last_step, shown.total_steps or shown.planned_steps or 0)

    # ---- the tab's own run ----
    def start(self, run_dir: Path, planned_steps: int | None) -> None:
        """A new run starts in `run_dir`; what is shown stays until it says something."""
        self._require("start", AT_REST)
        self._before_start = RunState.IDLE if self.state == RunState.WATCHING else self.state
        self.outcome = None
        self.starting = ShownRun(Path(run_dir), planned_steps)
        self._transition(RunState.PREPARING)

    def resume_from(self, run_dir: Path, planned_steps: int | None, step: int, checkpoint: Path,
                    last_record: Any = None) -> None:
        """Continue `run_dir` from its `checkpoint` at `step`; shown at once, its curve read back to `step`
        (`last_record`, the newest step record read)."""
        self._require("resume", AT_REST)
        self._before_start = RunState.IDLE
        self.outcome = None
        self.starting = None
        self._show(ShownRun(Path(run_dir), planned_steps, checkpoint=Path(checkpoint), resumed_at=step))
        if last_record is not None:
            self._take_record(last_record, pace=False)
        self._transition(RunState.PREPARING)

    def begin_showing(self) -> None:
        """The run started has said something (a step, a probe): from now on it is the run shown."""
        self._require("show the run started", GOING)
        self.preparation = None  # it said something: its corpus is prepared
        if self.starting is not None:
            self._show(self.starting)
            self.starting = None
            if self.state == RunState.PREPARING:
                self._transition(RunState.RUNNING)
            else:
                self._announce("state")
        elif self.state == RunState.PREPARING:
            self._transition(RunState.RUNNING)

    def step_done(self, record: Any) -> None:
        """A step record (`StepStats`-like: step, total_steps, tokens_per_second, elapsed_seconds, checkpoint)."""
        self._require("take a step", {RunState.PREPARING, RunState.RUNNING, RunState.STOPPING})
        self.begin_showing()
        self._take_record(record)
        self._announce("step")

    def preparing_data(self, progress: Any) -> None:
        """The run starting reports its corpus preparation; news that comes after it moved on is dropped."""
        if self.state not in (RunState.PREPARING, RunState.STOPPING):
            return
        self.preparation = progress
        self._announce("preparation")

    def request_pause(self) -> None:
        self._require("pause", {RunState.PREPARING, RunState.RUNNING})
        self.pause_requested = True
        self.notice = None
        self._announce("state")

    def cancel_pause(self) -> None:
        """Resume asked before the pause took effect."""
        self._require("cancel a pause", {RunState.PREPARING, RunState.RUNNING})
        self.pause_requested = False
        self.notice = None
        self._announce("state")

    def paused(self) -> None:
        """The run holds after its step. One asked to stop meanwhile stays stopping (the stop wins)."""
        self._require("hold", {RunState.PREPARING, RunState.RUNNING, RunState.STOPPING})
        if self.state != RunState.STOPPING:
            self._transition(RunState.PAUSED)

    def resumed(self) -> None:
        """A paused run goes on; the pause is not part of its pace."""
        self._require("go on", {RunState.PAUSED, RunState.STOPPING})
        if self.state == RunState.PAUSED:
            self.pace.clear()
            self._transition(RunState.PREPARING if self.starting is not None else RunState.RUNNING)

    def request_stop(self) -> None:
        self._require("stop", GOING)
        self._transition(RunState.STOPPING)

    def ended(self, how: str, checkpoint: Path | None) -> None:
        """The run ended "finished" or "stopped"; `checkpoint` is the newest it wrote, as found on disk."""
        if how not in ("finished", "stopped"):
            raise ValueError(f"a run ends 'finished' or 'stopped', not {how!r}; a failure is failed()")
        self._require(f"end as {how}", GOING)
        self.outcome = how
        if self.starting is not None:  # nothing of it was shown: what is shown stays
            self._back_before_start(Notice("Stopped before the first step." + self._still_shown()))
            return
        self._show(replace(self.shown, ended_as=how, checkpoint=checkpoint or self.shown.checkpoint))
        self._transition(RunState.FINISHED if how == "finished" else RunState.STOPPED)

    def failed(self, message: str, checkpoint: Path | None) -> None:
        """The run failed; `message` says how and what was kept (`run_descriptions.describe_failure`)."""
        self._require("fail", GOING)
        self.outcome = "failed"
        if self.starting is not None:
            self._back_before_start(Notice(message + self._still_shown(), "error"))
            return
        self._show(replace(self.shown, ended_as="failed", end_message=message,
                           checkpoint=checkpoint or self.shown.checkpoint))
        self._transition(RunState.FAILED)

    # ---- a run folder watched ----
    def watch(self, run_dir: Path, planned_steps: int | None, description: str = "", waiting: str = "") -> None:
        """Show the run in `run_dir`, written elsewhere; `waiting` says what is awaited before its first step (an
        empty folder, a run only just started), said until that step comes."""
        self._require("open a run folder", AT_REST)
        self.starting = None
        self._show(ShownRun(Path(run_dir), planned_steps, watched=True, description=description, waiting=waiting))
        self._transition(RunState.WATCHING)

    def watched_steps(self, records: list) -> None:
        """Step records the watched run appended; after its end, they mean it goes on (resumed elsewhere)."""
        self._require_watched("take its steps")
        for record in records:
            self._take_record(record)
        if self.state in ENDED:
            self._show(replace(self.shown, ended_as=None, end_message=""))
            self._transition(RunState.WATCHING)
        else:
            self._announce("step")

    def watched_ended(self, how: str, last_step: int | None, checkpoint: Path | None) -> None:
        """The watched run ended `how`; a failure's words are what its folder said just before (the notice)."""
        self._require("end the watched run", {RunState.WATCHING})
        message = self.notice.text if how == "failed" and self.notice and self.notice.kind == "error" else ""
        step = self.shown.last_step if last_step is None else last_step
        self._show(replace(self.shown, ended_as=how, end_message=message, last_step=step,
                           checkpoint=checkpoint or self.shown.checkpoint))
        self._transition({"finished": RunState.FINISHED, "stopped": RunState.STOPPED}.get(how, RunState.FAILED))

    # ---- what was said beside the state ----
    def say(self, text: str, kind: str = "info") -> None:
        self.notice = Notice(text, kind)
        self._announce("notice")

    def inspector_uses(self, checkpoint: str | Path) -> None:
        """The tab sent `checkpoint` to the inspector."""
        self.notice = Notice(f"The inspector now uses {checkpoint}.", "ok", about_model=str(checkpoint))
        self._announce("notice")

    def model_changed(self, path: str | Path | None) -> None:
        """The inspector's model is now the one in `path` (None: one not from a folder): a notice naming another
        model is no longer true, so it goes."""
        notice = self.notice
        if notice is not None and notice.about_model is not None and not _same_folder(notice.about_model, path):
            self.notice = None
            self._announce("notice")

    def model_load_failed(self, message: str) -> None:
        """The window could not open a model; `message` (the window's) names it. When it is the one a notice
        says the inspector uses, that notice was never true: the window's message takes its place."""
        notice = self.notice
        if notice is not None and notice.about_model is not None and notice.about_model in message:
            self.notice = Notice(message, "error")
            self._announce("notice")

    # ---- inside ----
    def _require(self, action: str, allowed) -> None:
        if self.state not in allowed:
            names = ", ".join(sorted(state.value for state in allowed))
            raise IllegalTransitionError(f"cannot {action} while {self.state.value}; only while {names}")

    def _require_watched(self, action: str) -> None:
        if self.shown is None or not self.shown.watched or self.state not in ({RunState.WATCHING} | ENDED):
            raise IllegalTransitionError(f"cannot {action} while {self.state.value}: no run folder is watched")

    def _show(self, shown: ShownRun) -> None:
        if self.shown is None or shown.run_dir != self.shown.run_dir or shown.watched != self.shown.watched \
                or shown.resumed_at != self.shown.resumed_at:
            self.pace.clear()
            self._opened_at = self._clock()
        self.shown = shown

    def _take_record(self, record: Any, pace: bool = True) -> None:
        shown = self.shown
        checkpoint = getattr(record, "checkpoint", None)
        self.shown = replace(shown, last_record=record, last_step=record.step,
                             total_steps=int(getattr(record, "total_steps", 0) or 0) or shown.total_steps,
                             tokens_per_second=getattr(record, "tokens_per_second", math.nan),
                             checkpoint=Path(checkpoint) if checkpoint else shown.checkpoint)
        if pace:
            elapsed = getattr(record, "elapsed_seconds", math.nan)
            if not math.isfinite(elapsed):  # a metrics file that does not say: the time since it was opened
                elapsed = self._clock() - self._opened_at
            self.pace.add(record.step, elapsed)

    def _still_shown(self) -> str:
        return f" (still showing the run in {self.shown.run_dir})" if self.shown is not None else ""

    def _back_before_start(self, notice: Notice) -> None:
        self.starting = None
        self._transition(self._before_start)
        self.notice = notice
        self._announce("notice")

    def _transition(self, state: RunState) -> None:
        # A run holds only between its steps, so a paused one prepares nothing (the bar said "20 / 20 MB" under
        # "Paused after step 0").
        if state not in (RunState.PREPARING, RunState.STOPPING) or self.state in AT_REST:
            self.preparation = None  # the first step came, the run paused or ended, or another one starts
        self.state = state
        self.notice = None
        if state not in (RunState.PREPARING, RunState.RUNNING):
            self.pause_requested = False
        self._announce("state")

    def _announce(self, what: str) -> None:
        self.changed.emit(self, what)


def _same_folder(a: str | Path | None, b: str | Path | None) -> bool:
    if a is None or b is None:
        return False
    return Path(a).expanduser().absolute() == Path(b).expanduser().absolute()
