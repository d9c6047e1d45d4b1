"""What a run tab's status line and progress bar say, derived from its `RunLifecycle` as it is now: nothing here
is stored, so no line can outlive the facts it states. Qt-free; `explorer.runs._qt.run_status` and
`run_progress` only show these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from explorer.common.message_text import format_duration
from explorer.runs.lifecycle import ENDED, Notice, RunLifecycle, RunState, ShownRun


def status_line(lifecycle: RunLifecycle) -> Notice:
    """The status line (text and kind) for the lifecycle as it is now."""
    if lifecycle.notice is not None:
        return lifecycle.notice
    state, shown, starting = lifecycle.state, lifecycle.shown, lifecycle.starting
    if lifecycle.pause_requested:
        return Notice("Pausing at the next step…")
    if state == RunState.PREPARING and lifecycle.preparation is not None:
        return Notice("Preparing the corpus before the first step: it is tokenized once and cached, so later runs "
                      "and resumes on it start at once. Stop cancels.")
    if state == RunState.PREPARING:
        if starting is not None:
            return Notice(f"Starting in {starting.run_dir}: preparing the data and the model…")
        checkpoint = shown.checkpoint.name if shown.checkpoint is not None else "its latest checkpoint"
        return Notice(f"Resuming {shown.run_dir} from step {shown.resumed_at or 0:,} ({checkpoint})…")
    if state == RunState.RUNNING:
        resumed = f" (resumed at step {shown.resumed_at:,})" if shown.resumed_at is not None else ""
        return Notice(f"Training in {shown.run_dir}{resumed}")
    if state == RunState.PAUSED:
        if starting is not None or shown.last_step is None:  # shown by its step-0 probe, no step taken yet
            return Notice("Paused before the first step. Resume continues the same run.")
        return Notice(f"Paused after step {shown.last_step or 0}. Resume continues the same run.")
    if state == RunState.STOPPING:
        return Notice("Stopping at the next step and saving a checkpoint…")
    if state == RunState.WATCHING:
        if shown.last_step is None and shown.waiting:
            return Notice(shown.waiting)
        described = f" ({shown.description})" if shown.description else ""
        return Notice(f"Watching {shown.run_dir}{described}")
    if state in ENDED and shown.watched:
        return _watched_end_line(lifecycle, shown)
    if state == RunState.FINISHED:
        return Notice(f"Finished at step {shown.last_step or 0}.{_checkpoint_sentence(shown)}", "ok")
    if state == RunState.STOPPED:
        return Notice(f"Stopped after step {shown.last_step or 0}.{_checkpoint_sentence(shown)}",
                      "ok" if shown.checkpoint is not None else "info")
    if state == RunState.FAILED:
        return Notice(shown.end_message or f"The run failed after step {shown.last_step or 0}.", "error")
    return Notice(lifecycle.idle_text)


def _checkpoint_sentence(shown: ShownRun) -> str:
    return f" Checkpoint: {shown.checkpoint}." if shown.checkpoint is not None else ""


def _watched_end_line(lifecycle: RunLifecycle, shown: ShownRun) -> Notice:
    described = f" ({shown.description})" if shown.description else ""
    step = shown.last_step or 0
    if shown.ended_as == "finished":
        return Notice(f"The watched run finished at step {step:,}{described}.", "ok")
    if shown.ended_as == "stopped":
        return Notice(f"The watched run stopped after step {step:,}{described}. Resume continues it from its "
                      f"latest checkpoint, as {lifecycle.command} --resume does.")
    return Notice(shown.end_message or f"The watched run failed after step {step:,}{described}.", "error")


@dataclass(frozen=True)
class ProgressLine:
    """The progress bar: `value` of `maximum` steps, and its text."""

    value: int
    maximum: int
    text: str


def progress_line(lifecycle: RunLifecycle) -> ProgressLine:
    """"step 120 / 300  ·  5,400 tok/s  ·  0:42 left" while the run shown goes on; how it ended once it has."""
    shown = lifecycle.shown
    if lifecycle.preparation is not None:
        return _preparation_line(lifecycle.preparation)
    if shown is None:
        return ProgressLine(0, 1, "idle")
    if shown.last_step is None:
        if shown.watched:
            waiting = "waiting for the run's first step…"
        elif lifecycle.state == RunState.PAUSED:
            waiting = "paused before the first step"
        elif shown.resumed_at is not None:
            waiting = "resuming…"
        else:
            waiting = "training…"
        return ProgressLine(0, shown.planned_steps or 1, waiting)
    step = shown.last_step
    total = int(shown.total_steps or shown.planned_steps or max(step, 1))
    parts = [f"step {step:,} / {total:,}"]
    if math.isfinite(shown.tokens_per_second) and shown.tokens_per_second:
        parts.append(f"{shown.tokens_per_second:,.0f} tok/s")
    seconds_left = lifecycle.seconds_left()
    if shown.ended_as is not None:
        parts.append(shown.ended_as)
    elif lifecycle.starting is not None:  # the run shown is not the one going: its state is not this one's
        pass
    elif lifecycle.state in (RunState.PAUSED, RunState.STOPPING):
        parts.append(lifecycle.state.value)
    elif seconds_left is not None:
        parts.append(f"{format_duration(seconds_left)} left")
    return ProgressLine(min(step, total), total, "  ·  ".join(parts))


def _preparation_line(progress) -> ProgressLine:
    """"Preparing corpus … 45 / 100 MB  ·  3.2 MB/s  ·  0:20 left" (the vocabulary's sample is drawn first)."""
    what = "Drawing the vocabulary's sample" if progress.phase == "vocabulary" else "Preparing corpus"
    parts = [f"{what} … {progress.done_bytes / 1e6:,.0f} / {progress.total_bytes / 1e6:,.0f} MB"]
    if progress.bytes_per_second:
        parts.append(f"{progress.bytes_per_second / 1e6:.1f} MB/s")
    if progress.eta_seconds is not None:
        parts.append(f"{format_duration(progress.eta_seconds)} left")
    return ProgressLine(round(1000 * progress.fraction), 1000, "  ·  ".join(parts))
