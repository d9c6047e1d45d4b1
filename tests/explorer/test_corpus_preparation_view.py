"""The Train tab while a run prepares its corpus: "Preparing corpus …" with a bar (MB, MB/s, time left), the
window free meanwhile, and Stop cancelling the preparation (explorer.runs: lifecycle, status_lines, the runner).

The engine factory is a stand-in that reports preparation progress the way bertcore.data.prepare does (from the
training thread, between chunks) and waits between reports, so the test sees each state."""

from __future__ import annotations

import threading
import time

import pytest

from bertcore.data.prepare import PreparationProgress
from explorer.runs.training_run import TrainingSettings
from explorer.train._qt.training_panel import TrainingPanel

TIMEOUT_MS = 30_000


def preparing_factory(reported: threading.Event, release: threading.Event):
    def factory(settings, init, progress):
        total = 100_000_000
        for done in range(0, total + 1, 10_000_000):
            progress(PreparationProgress("tokenizing", done, total, elapsed_seconds=1 + done / 5e6))
            if done == 50_000_000:
                reported.set()
                while not release.wait(0.01):  # as a chunk being tokenized: Stop is heard at the next report
                    pass
        raise AssertionError("the preparation should have been cancelled")

    return factory


@pytest.mark.slow
def test_the_train_tab_shows_the_preparation_and_stop_cancels_it(qtbot, tmp_path):
    reported, release = threading.Event(), threading.Event()
    panel = TrainingPanel(engine_factory=preparing_factory(reported, release), torch_threads=1)
    qtbot.addWidget(panel)
    assert panel.start_run(TrainingSettings(out_dir=str(tmp_path / "run"), steps=10, probe_every=0))
    qtbot.waitUntil(reported.is_set, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: "50 / 100 MB" in panel.progress.format(), timeout=TIMEOUT_MS)
    assert panel.progress.value() == 500 and panel.progress.maximum() == 1000
    assert "MB/s" in panel.progress.format() and "left" in panel.progress.format()
    status = panel.status.status_label.text()
    assert "Preparing the corpus" in status and "Stop cancels" in status
    assert panel.buttons.stop_button.isEnabled()
    started = time.perf_counter()
    qtbot.wait(50)  # the event loop turns while the training thread prepares
    assert time.perf_counter() - started < 5
    with qtbot.waitSignal(panel.runEnded, timeout=TIMEOUT_MS) as ended:
        panel.buttons.stop_button.click()
        release.set()
    assert ended.args == ["stopped"]
    assert "Stopped before the first step" in panel.status.status_label.text()
    assert "Preparing" not in panel.progress.format()
    assert panel.shutdown()
