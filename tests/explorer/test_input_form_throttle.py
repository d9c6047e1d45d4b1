"""The input form's throttle counts from the end of a settle, so a settle slower than the throttle (a 512-token table
rebuilt on a loaded machine) still leaves the window time for the keys between two settles. It used to stamp the
settle's start: once a settle outlasted the throttle, every key settled again at once and the GUI thread did nothing
but rebuild the table (found with MiniLM at 512 tokens, typing fast on a busy machine)."""

from __future__ import annotations

import itertools
import time

import pytest

from explorer.inspector._qt.input_form import InputForm

THROTTLE_MS = 100
SETTLE_S = 0.15  # longer than the throttle


@pytest.mark.slow
def test_a_settle_slower_than_the_throttle_leaves_the_throttle_free_after_it(qtbot):
    form = InputForm(throttle_ms=THROTTLE_MS)
    qtbot.addWidget(form)
    settles: list[tuple[float, float]] = []

    def slow_settle():
        started = time.monotonic()
        time.sleep(SETTLE_S)
        settles.append((started, time.monotonic()))

    form.settled.connect(slow_settle)
    edit = form.sentence_a_edit
    edit.setText("")
    settles.clear()
    keys = 30
    for _ in range(keys):  # a key every ~20 ms, as a fast typist
        edit.insert("x")
        qtbot.wait(20)
    qtbot.waitUntil(lambda: not form._throttle.isActive(), timeout=5000)
    gaps = [later[0] - earlier[1] for earlier, later in itertools.pairwise(settles)]
    assert len(settles) < keys / 2, f"{len(settles)} settles for {keys} keys"
    assert min(gaps) >= THROTTLE_MS / 1000 * 0.9, gaps  # the window had the throttle's time between two settles
    assert edit.text() == "x" * keys
