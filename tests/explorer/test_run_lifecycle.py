"""A run tab's lifecycle (explorer.runs.lifecycle), headless: every transition, the illegal ones, and the status
and progress text derived from it, including the texts that once went stale (time left after a stop, the
checkpoint a stop saved, the inspector's model after another was loaded)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from explorer.runs.lifecycle import (
    IllegalTransitionError,
    RunLifecycle,
    RunState,
    checkpoint_written,
)
from explorer.runs.status_lines import progress_line, status_line

RUN = Path("/runs/run-1")


@dataclass
class Record:
    step: int
    total_steps: int = 300
    tokens_per_second: float = 5400.0
    elapsed_seconds: float = math.nan
    checkpoint: str | None = None


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make(clock=None) -> tuple[RunLifecycle, list]:
    lifecycle = RunLifecycle(idle_text="Pick a corpus and a model, then Start.", command="bert-train",
                             clock=clock or Clock())
    heard = []
    lifecycle.changed.connect(lambda source, what: heard.append((source.state, what)))
    return lifecycle, heard


def running(lifecycle: RunLifecycle, steps=(1, 2, 3)) -> RunLifecycle:
    lifecycle.start(RUN, 300)
    for step in steps:
        lifecycle.step_done(Record(step, elapsed_seconds=step * 0.5))
    return lifecycle


def write_checkpoint(run_dir: Path, step: int) -> Path:
    folder = run_dir / "checkpoints" / f"step-{step:06d}"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    return folder


# ---------------------------------------------------------------- transitions
def test_a_run_goes_idle_preparing_running_paused_running_stopping_stopped():
    lifecycle, heard = make()
    assert lifecycle.state == RunState.IDLE and status_line(lifecycle).text.startswith("Pick a corpus")
    lifecycle.start(RUN, 300)
    assert lifecycle.state == RunState.PREPARING and lifecycle.shown is None  # not shown before it says something
    assert status_line(lifecycle).text == f"Starting in {RUN}: preparing the data and the model…"
    lifecycle.step_done(Record(1))
    assert lifecycle.state == RunState.RUNNING and lifecycle.shown.run_dir == RUN
    assert status_line(lifecycle).text == f"Training in {RUN}"
    lifecycle.request_pause()
    assert lifecycle.state == RunState.RUNNING and status_line(lifecycle).text == "Pausing at the next step…"
    lifecycle.paused()
    assert lifecycle.state == RunState.PAUSED and not lifecycle.pause_requested
    assert status_line(lifecycle).text == "Paused after step 1. Resume continues the same run."
    lifecycle.resumed()
    assert lifecycle.state == RunState.RUNNING
    lifecycle.request_stop()
    assert lifecycle.state == RunState.STOPPING
    assert status_line(lifecycle).text == "Stopping at the next step and saving a checkpoint…"
    lifecycle.step_done(Record(2))  # the step in flight when the stop was asked
    lifecycle.ended("stopped", Path("/runs/run-1/checkpoints/step-000002"))
    assert lifecycle.state == RunState.STOPPED and lifecycle.resumable == RUN
    assert [state for state, what in heard if what == "state"] == [
        RunState.PREPARING, RunState.RUNNING, RunState.RUNNING, RunState.PAUSED, RunState.RUNNING,
        RunState.STOPPING, RunState.STOPPED]


def test_a_run_that_finishes_says_where_its_checkpoint_is_and_is_not_resumable():
    lifecycle = running(make()[0], steps=range(1, 301))
    lifecycle.ended("finished", RUN / "final")
    line = status_line(lifecycle)
    assert lifecycle.state == RunState.FINISHED and lifecycle.resumable is None
    assert line.text == f"Finished at step 300. Checkpoint: {RUN / 'final'}." and line.kind == "ok"
    assert progress_line(lifecycle).text == "step 300 / 300  ·  5,400 tok/s  ·  finished"


def test_a_failed_run_says_its_message_and_resumes_from_its_checkpoint():
    lifecycle = running(make()[0])
    lifecycle.failed("The run diverged: nan at step 3.", RUN / "checkpoints" / "step-000002")
    assert lifecycle.state == RunState.FAILED and lifecycle.resumable == RUN
    assert status_line(lifecycle).text == "The run diverged: nan at step 3." and status_line(lifecycle).kind == "error"
    assert progress_line(lifecycle).text.endswith("·  failed")
    lifecycle.resume_from(RUN, 300, 2, RUN / "checkpoints" / "step-000002", last_record=Record(2))
    assert lifecycle.state == RunState.PREPARING and lifecycle.shown.last_step == 2
    assert status_line(lifecycle).text == f"Resuming {RUN} from step 2 (step-000002)…"
    lifecycle.step_done(Record(3))
    assert status_line(lifecycle).text == f"Training in {RUN} (resumed at step 2)"


def test_a_start_that_ends_before_its_first_step_leaves_the_run_shown_as_it_was():
    lifecycle = running(make()[0])
    lifecycle.ended("finished", RUN / "final")
    lifecycle.start(Path("/runs/run-2"), 50)
    assert progress_line(lifecycle).text.startswith("step 3 / 300")  # still the first run's
    lifecycle.failed("The corpus cannot be used: latin-1.", None)
    assert lifecycle.state == RunState.FINISHED and lifecycle.shown.run_dir == RUN and lifecycle.outcome == "failed"
    assert status_line(lifecycle).text == f"The corpus cannot be used: latin-1. (still showing the run in {RUN})"
    lifecycle.start(Path("/runs/run-3"), 50)
    lifecycle.request_stop()
    lifecycle.ended("stopped", None)
    assert lifecycle.state == RunState.FINISHED
    assert status_line(lifecycle).text == f"Stopped before the first step. (still showing the run in {RUN})"


def test_pausing_before_the_first_step_and_going_on_keeps_it_preparing():
    lifecycle, _ = make()
    lifecycle.start(RUN, 10)
    lifecycle.request_pause()
    lifecycle.paused()
    assert status_line(lifecycle).text.startswith("Paused before the first step")
    lifecycle.resumed()
    assert lifecycle.state == RunState.PREPARING
    lifecycle.begin_showing()  # its first probe
    assert lifecycle.state == RunState.RUNNING and progress_line(lifecycle).text == "training…"


def test_a_pause_that_took_effect_after_a_stop_leaves_it_stopping():
    lifecycle = running(make()[0])
    lifecycle.request_pause()
    lifecycle.request_stop()
    lifecycle.paused()
    assert lifecycle.state == RunState.STOPPING and not lifecycle.pause_requested


def test_a_watched_run_follows_its_folder_ends_and_goes_on_when_it_grows_again():
    lifecycle, _ = make()
    lifecycle.watch(RUN, 20, "tiny preset, 20 steps of 4 × 32")
    assert status_line(lifecycle).text == f"Watching {RUN} (tiny preset, 20 steps of 4 × 32)"
    assert progress_line(lifecycle).text == "waiting for the run's first step…"
    lifecycle.watched_steps([Record(1, 20), Record(2, 20)])
    lifecycle.watched_ended("stopped", 2, RUN / "checkpoints" / "step-000002")
    assert lifecycle.state == RunState.STOPPED and lifecycle.resumable == RUN
    assert "The watched run stopped after step 2 (tiny preset" in status_line(lifecycle).text
    assert "bert-train --resume" in status_line(lifecycle).text
    lifecycle.watched_steps([Record(3, 20)])
    assert lifecycle.state == RunState.WATCHING and lifecycle.shown.ended_as is None
    lifecycle.say("The run failed at step 4: the loss became nan", "error")
    lifecycle.watched_ended("failed", 4, None)
    assert status_line(lifecycle).text == "The run failed at step 4: the loss became nan"


@pytest.mark.parametrize("action", ["paused", "resumed", "request_stop", "request_pause", "begin_showing"])
def test_what_needs_a_run_going_is_refused_while_idle(action):
    lifecycle, _ = make()
    with pytest.raises(IllegalTransitionError, match="while idle; only while"):
        getattr(lifecycle, action)()


def test_illegal_transitions_raise_and_change_nothing():
    lifecycle = running(make()[0])
    with pytest.raises(IllegalTransitionError, match="cannot start while running"):
        lifecycle.start(RUN, 3)
    with pytest.raises(IllegalTransitionError, match="cannot open a run folder while running"):
        lifecycle.watch(RUN, 3)
    with pytest.raises(IllegalTransitionError, match="no run folder is watched"):
        lifecycle.watched_steps([Record(4)])
    with pytest.raises(ValueError, match="a failure is failed"):
        lifecycle.ended("failed", None)
    lifecycle.ended("stopped", None)
    for action in (lifecycle.request_stop, lifecycle.paused, lifecycle.request_pause):
        with pytest.raises(IllegalTransitionError, match="while stopped"):
            action()
    with pytest.raises(IllegalTransitionError):
        lifecycle.step_done(Record(5))
    assert lifecycle.state == RunState.STOPPED and lifecycle.shown.last_step == 3


def test_a_notice_shows_until_the_next_transition_and_steps_do_not_clear_it():
    lifecycle = running(make()[0])
    lifecycle.say("Probing at step 3 failed: out of memory", "error")
    lifecycle.step_done(Record(4))
    assert status_line(lifecycle).text.startswith("Probing at step 3 failed")
    lifecycle.request_stop()
    assert status_line(lifecycle).text.startswith("Stopping")


# ---------------------------------------------------------------- the texts that went stale
def test_no_time_left_is_shown_once_the_run_stopped_or_paused():
    clock = Clock()
    lifecycle = running(make(clock)[0], steps=range(1, 11))
    assert progress_line(lifecycle).text == "step 10 / 300  ·  5,400 tok/s  ·  2:25 left"
    lifecycle.request_pause()
    assert "left" not in progress_line(lifecycle).text
    lifecycle.paused()
    assert progress_line(lifecycle).text == "step 10 / 300  ·  5,400 tok/s  ·  paused"
    lifecycle.resumed()
    lifecycle.request_stop()
    assert progress_line(lifecycle).text == "step 10 / 300  ·  5,400 tok/s  ·  stopping"
    lifecycle.ended("stopped", None)
    assert progress_line(lifecycle).text == "step 10 / 300  ·  5,400 tok/s  ·  stopped"


def test_a_stop_names_the_checkpoint_it_saved_not_the_last_one_a_step_reported(tmp_path):
    run = tmp_path / "run"
    lifecycle, _ = make()
    lifecycle.start(run, 100_000)
    lifecycle.step_done(Record(100, checkpoint=str(write_checkpoint(run, 100))))
    for step in range(101, 122):
        lifecycle.step_done(Record(step))
    lifecycle.request_stop()
    saved = write_checkpoint(run, 121)  # the engine saves on its way out; no step reports it
    lifecycle.ended("stopped", checkpoint_written(run, lifecycle.shown.last_step))
    text = status_line(lifecycle).text
    assert text == f"Stopped after step 121. Checkpoint: {saved}." and "step-000100" not in text


def test_checkpoint_written_is_the_last_steps_else_the_newest_complete_one(tmp_path):
    assert checkpoint_written(tmp_path, 5) is None and checkpoint_written(None, 5) is None
    older = write_checkpoint(tmp_path, 4)
    (tmp_path / "checkpoints" / ".step-000006.tmp").mkdir()  # being written: not a checkpoint yet
    assert checkpoint_written(tmp_path, 6) == older
    assert checkpoint_written(tmp_path, 4) == older


def test_the_inspector_line_goes_when_the_window_loads_another_model():
    lifecycle = running(make()[0])
    lifecycle.ended("finished", RUN / "final")
    lifecycle.inspector_uses(RUN / "final")
    assert status_line(lifecycle).text == f"The inspector now uses {RUN / 'final'}."
    lifecycle.model_changed(str(RUN / "final"))  # the model it sent, loaded: still true
    assert status_line(lifecycle).text == f"The inspector now uses {RUN / 'final'}."
    lifecycle.model_changed("/models/minilm")
    assert status_line(lifecycle).text == f"Finished at step 3. Checkpoint: {RUN / 'final'}."
    lifecycle.say("No checkpoint yet", "error")
    lifecycle.model_changed(None)  # a notice about something else stays
    assert status_line(lifecycle).text == "No checkpoint yet"


def test_the_inspector_line_gives_way_to_the_message_when_that_checkpoint_could_not_be_opened():
    lifecycle = running(make()[0])
    lifecycle.inspector_uses(RUN / "final")
    lifecycle.model_load_failed("Could not open checkpoint /models/other: no config.json")  # another one's
    assert status_line(lifecycle).text == f"The inspector now uses {RUN / 'final'}."
    lifecycle.model_load_failed(f"Could not open checkpoint {RUN / 'final'}: no weights — still showing tiny")
    line = status_line(lifecycle)
    assert line.text.startswith(f"Could not open checkpoint {RUN / 'final'}") and line.kind == "error"
