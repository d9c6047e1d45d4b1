"""The Explain tab while its work runs: Cancel acts from the click that asked for the work (not once the first
record arrives, seconds later on a long input), a cancelled view says it was cancelled instead of "Computing…", and
a long job says how long is left once its pace is known."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import Qt

from bertcore.data.masking import mask_exactly
from explorer.explain._qt.explain_tab import ExplainTab
from explorer.explain.jobs import JobRecord
from explorer.explain.state import ExplainRequest, ExplainState
from explorer.inspector.model_info import LoadedModel, describe_model

WAIT_MS = 10_000
FIRST_RECORD_S = 2.0  # MiniLM's first integrated-gradients batch at 500 tokens takes seconds on two cores


def request(tokenizer, position=2, text="the cat sat on the mat"):
    encoding = tokenizer.encode(text)
    masking = mask_exactly(encoding, tokenizer, [position])
    return ExplainRequest(("mlm", position, encoding.input_ids[position]), encoding, masking, text, None)


def late_steps(job, first_record_s=FIRST_RECORD_S, steps=60, pause=0.05):
    """Work whose first record comes late (a long input's first forward and backward pass), then steady steps."""
    time.sleep(first_record_s)
    for step in range(steps):
        yield JobRecord(job.kind, job.request_id, step / steps, f"step {step} of {steps}")
        time.sleep(pause)


@pytest.fixture
def tab(qtbot, monkeypatch, tiny_model, tokenizer):
    import explorer.explain._qt.job_runner as job_runner

    monkeypatch.setattr(job_runner, "job_steps", late_steps)
    tab = ExplainTab(torch_threads=1)
    qtbot.addWidget(tab)
    tab.resize(1400, 850)
    tab.show()
    tab.on_model_changed(LoadedModel(tiny_model, tokenizer, describe_model(tiny_model, "tiny")))
    yield tab
    assert tab.shutdown(30_000)


@pytest.mark.slow
def test_cancel_acts_at_once_and_the_cancelled_views_say_so(qtbot, tab, tokenizer):
    asked = time.monotonic()
    assert tab.explain(request(tokenizer))
    qtbot.waitUntil(tab.cancel_button.isEnabled, timeout=WAIT_MS)
    assert time.monotonic() - asked < FIRST_RECORD_S / 2, "Cancel waited for the work's first record"
    assert tab.progress.isVisibleTo(tab) and tab.status_label.text().startswith("attribution")
    qtbot.mouseClick(tab.cancel_button, Qt.MouseButton.LeftButton)
    assert tab.state.work == {} and not tab.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: not tab.busy, timeout=WAIT_MS)
    qtbot.wait(300)  # anything the stopped work still sent, and the redraw timer
    assert "Computing" not in tab.attribution_view.placeholder, tab.attribution_view.placeholder
    assert "Cancelled" in tab.attribution_view.placeholder
    assert "Computing" not in tab.faithfulness_plot.caption.text()
    assert "Computing" not in tab.mixing_view.note.text() and "Cancelled" in tab.mixing_view.note.text()
    assert "Cancelled" in tab.message_label.text()
    assert tab.explain(request(tokenizer, position=3))  # asked again, it computes again
    assert "Computing" in tab.attribution_view.placeholder


@pytest.mark.slow
def test_a_long_job_says_how_long_is_left(qtbot, monkeypatch, tab, tokenizer):
    import explorer.explain._qt.job_runner as job_runner

    monkeypatch.setattr(job_runner, "job_steps", lambda job: late_steps(job, first_record_s=0.1, steps=120))
    assert tab.explain(request(tokenizer))
    qtbot.waitUntil(lambda: " left" in tab.status_label.text(), timeout=WAIT_MS)
    assert tab.status_label.text().startswith("attribution")
    tab.cancel()


def test_the_time_left_follows_the_pace_once_it_is_known(tiny_model, tokenizer):
    now = [100.0]
    state = ExplainState(clock=lambda: now[0])
    state.set_model(tiny_model, tokenizer, "tiny")
    assert state.explain(request(tokenizer))
    job = state.attribution_job()
    assert state.work["attribution"][0] == 0.0 and state.progress() == 0.0  # asked for: work before any record
    lines = []
    for second in range(5):
        now[0] = 100.0 + 3.0 + second  # three seconds waiting for the thread do not count
        state.arrived(JobRecord("attribution", job.request_id, 0.1 * second, f"{second} of 10"))
        lines.append(state.work_line())
    assert all(" left" not in line for line in lines[:3])  # a pace from too few records, or too short a time
    assert lines[3].endswith("0:07 left"), lines[3]  # 0.3 of it in 3 s: 7 s for the other 0.7
    assert lines[4].endswith("0:06 left"), lines[4]
    state.cancel_all()
    assert state.work == {} and state.stopped == {"attribution"} and state.work_line() == ""


@pytest.mark.slow
def test_the_status_line_never_runs_under_the_buttons(qtbot, monkeypatch, tab, tokenizer):
    """At the window's width, with every method ticked and a long status line, the text stays left of the progress
    bar and the buttons (a fixed minimum width once laid the label over them)."""
    import explorer.explain._qt.job_runner as job_runner

    monkeypatch.setattr(job_runner, "job_steps", lambda job: late_steps(job, first_record_s=0.0, steps=400))
    for box in tab.method_boxes.values():
        box.setChecked(True)
    assert tab.explain(request(tokenizer))
    qtbot.waitUntil(lambda: "of 400" in tab.status_label.text(), timeout=WAIT_MS)
    qtbot.wait(200)
    row = [tab.progress, tab.cancel_button, tab.export]
    label = tab.status_label
    right_edge = label.mapTo(tab, label.rect().topRight()).x()
    assert right_edge < min(widget.mapTo(tab, widget.rect().topLeft()).x() for widget in row), (
        label.mapTo(tab, label.rect().topLeft()), label.width(), [widget.geometry() for widget in row])
    left_widgets = list(tab.method_boxes.values())
    assert label.mapTo(tab, label.rect().topLeft()).x() > max(box.mapTo(tab, box.rect().topRight()).x()
                                                                for box in left_widgets)
    assert tab.status_label.toolTip() == tab.status_label.text()  # all of it, whatever fits
    tab.cancel()
