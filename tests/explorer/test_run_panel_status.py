"""The Train tab's status text stays true (explorer.runs._qt.run_panel with explorer.runs.lifecycle): what a newcomer
found stale — the time left still shown after Stop, Stop naming an older checkpoint than the one it saved, and
"the inspector now uses …" still shown after the window loaded another model.

The engine is a stand-in that writes real checkpoint folders the way bertcore's loop does: one reported by the
step it follows (step 100), and one on its way out after a stop that no step reports.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from bertcore.training.pretraining import StepStats
from explorer.runs.training_run import EngineRun, TrainingSettings
from explorer.train._qt.training_panel import TrainingPanel

RUN_TIMEOUT_MS = 60_000
REPORTED_AT = 100  # the step whose record reports its checkpoint


class StopSavingRun(EngineRun):
    """Steps every 2 ms with a steady pace (50 ms of training a step, so the tab has a time left to show)."""

    def __init__(self, settings: TrainingSettings, weights: Path):
        self.run_dir = Path(settings.out_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.model_config = self.tokenizer = None
        self._weights = weights
        self._stop = threading.Event()
        self.steps = self._steps(settings.steps)

    def _save(self, step: int) -> Path:
        folder = self.run_dir / "checkpoints" / f"step-{step:06d}"
        shutil.copytree(self._weights, folder)
        return folder

    def _steps(self, total: int):
        step = 0
        while step < total and not self._stop.is_set():
            step += 1
            time.sleep(0.002)
            checkpoint = self._save(step) if step == REPORTED_AT else None
            yield StepStats(step=step, total_steps=total, loss=5.0, mlm_loss=4.0, nsp_loss=1.0, mlm_accuracy=0.1,
                            nsp_accuracy=0.5, learning_rate=1e-3, grad_norm=1.0, tokens=128,
                            tokens_per_second=5000.0, elapsed_seconds=step * 0.05,
                            checkpoint=str(checkpoint) if checkpoint else None)
        if self._stop.is_set():
            self._save(step)  # as bertcore's loop does on stop: a checkpoint no step record names

    def request_stop(self) -> None:
        self._stop.set()

    def snapshot(self) -> dict:
        return {}


@pytest.fixture
def panel(qtbot, tiny_checkpoint):
    panel = TrainingPanel(engine_factory=lambda settings, init: StopSavingRun(settings, tiny_checkpoint),
                          torch_threads=1)
    qtbot.addWidget(panel)
    yield panel
    assert panel.shutdown()


def stopped_run(qtbot, panel, run_dir: Path, after_steps: int) -> int:
    """Start a long run, stop it after `after_steps` steps; the step it stopped at."""
    assert panel.start_run(TrainingSettings(out_dir=str(run_dir), steps=100_000, probe_every=0))
    qtbot.waitUntil(lambda: panel.steps_received >= after_steps, timeout=RUN_TIMEOUT_MS)
    qtbot.waitUntil(lambda: "left" in panel.progress.format(), timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        panel.buttons.stop_button.click()
    assert ended.args == ["stopped"]
    return panel.plots.last_step()


def test_no_time_left_is_shown_after_stop(qtbot, panel, tmp_path):
    last = stopped_run(qtbot, panel, tmp_path / "run", 5)
    text = panel.progress.format()
    assert "left" not in text, text
    assert text == f"step {last:,} / 100,000  ·  5,000 tok/s  ·  stopped"
    assert panel.buttons.resume_button.isEnabled() and not panel.buttons.stop_button.isEnabled()


@pytest.mark.slow
def test_stop_names_the_checkpoint_it_saved(qtbot, panel, tmp_path):
    last = stopped_run(qtbot, panel, tmp_path / "run", REPORTED_AT + 5)
    saved = tmp_path / "run" / "checkpoints" / f"step-{last:06d}"
    assert last > REPORTED_AT and saved.is_dir()
    text = panel.status.status_label.text()
    assert text == f"Stopped after step {last}. Checkpoint: {saved}.", text
    assert f"step-{REPORTED_AT:06d}" not in text


@pytest.mark.slow
def test_the_inspector_line_goes_when_the_window_loads_another_model(qtbot, settings, panel, tiny_model,
                                                                      tokenizer, tmp_path):
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    window.add_tab(panel, "Train")
    stopped_run(qtbot, panel, tmp_path / "run", 3)
    chosen = panel.checkpoints.combo.currentData()
    with qtbot.waitSignal(window.modelChanged, timeout=RUN_TIMEOUT_MS):
        panel.checkpoints.use_button.click()
    assert panel.status.status_label.text() == f"The inspector now uses {chosen}."  # the model it sent: true
    window.set_model(tiny_model, tokenizer, "another model (untrained)")
    text = panel.status.status_label.text()
    assert "inspector now uses" not in text, text
    assert text.startswith("Stopped after step")


@pytest.mark.slow
def test_the_inspector_line_gives_way_to_the_windows_error_when_the_checkpoint_cannot_be_opened(
        qtbot, settings, panel, tmp_path):
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    window.add_tab(panel, "Train")
    stopped_run(qtbot, panel, tmp_path / "run", 3)
    chosen = Path(panel.checkpoints.combo.currentData())
    (chosen / "model.safetensors").write_bytes(b"not weights")  # e.g. a disk that lost it meanwhile
    with qtbot.waitSignal(window.modelLoadFailed, timeout=RUN_TIMEOUT_MS):
        panel.checkpoints.use_button.click()
    text = panel.status.status_label.text()
    assert "inspector now uses" not in text, text
    assert text.startswith(f"Could not open checkpoint {chosen}") and "c62828" in panel.status.status_label.styleSheet()
