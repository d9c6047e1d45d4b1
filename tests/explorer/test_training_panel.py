"""The training tab driven through qtbot: real tiny runs of the bertcore engine on a corpus made here.

Every wait is a qtbot wait on a signal or a condition with a timeout; no fixed sleeps.
"""

import errno
import json
import math
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt, QThread

from bertcore.training.pretraining import (
    EvalStats,
    NonFiniteLossError,
    OutOfMemoryTrainingError,
    StepStats,
    TrainingError,
)
from explorer.common._qt.workers.generator import GeneratorWorker
from explorer.common._qt.workers.latest_job import LatestJobWorker
from explorer.inspector.model_info import LoadedModel, describe_model
from explorer.runs.training_run import CONTINUE_LOADED, EngineRun, TrainingSettings
from explorer.train._qt.training_panel import TrainingPanel

RUN_TIMEOUT_MS = 90_000
WORDS = ("king queen lord lady sword crown horse field river tower night day speak hear love hate "
         "fight sleep dream go come stay good bad old young fair dark bright cold").split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """40 small documents of short sentences: enough for pairs at 32 tokens, tiny to read and tokenize."""
    rng = random.Random(0)
    documents = []
    for _ in range(40):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))).capitalize() + "."
                     for _ in range(6)]
        documents.append(" ".join(sentences))
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return str(path)


def tiny(corpus, out_dir, **changes) -> TrainingSettings:
    values = dict(corpus=corpus, preset="tiny", steps=12, batch_size=4, seq_len=32, learning_rate=2e-3,
                  device="cpu", seed=0, probe_every=4, eval_every=6, checkpoint_every=0, out_dir=str(out_dir))
    values.update(changes)
    return TrainingSettings(**values)


class Inspector:
    """Stands in for the Inspect tab: tells the tab its pair, records what the tab asks of it (its signals)."""

    def __init__(self, panel, pair=("the king speaks.", "the queen hears.")):
        self.shown, self.loaded = [], []
        panel.showInspection.connect(lambda inspection, caption: self.shown.append((inspection, caption)))
        panel.openCheckpoint.connect(self.loaded.append)
        panel.on_pair_changed(*pair)


@pytest.fixture
def panel(qtbot):
    panel = TrainingPanel()
    qtbot.addWidget(panel)
    yield panel
    panel.shutdown()


@pytest.fixture
def inspector(panel):
    return Inspector(panel)


def stats(step, total=0, **values) -> StepStats:
    """A step record; the statistics not given are NaN, as in a metrics file that lacks them."""
    fields = ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy", "learning_rate", "grad_norm",
              "tokens_per_second", "elapsed_seconds")
    return StepStats(step=step, total_steps=total, tokens=0, **{name: values.get(name, math.nan) for name in fields})


def held_out(step, **values) -> EvalStats:
    fields = ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy")
    return EvalStats(step=step, num_examples=0, **{name: values.get(name, math.nan) for name in fields})


def run_to_end(qtbot, panel, settings):
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        assert panel.start_run(settings), panel.status.status_label.text()
    return ended.args[0]


# ---------------------------------------------------------------- the worker on its own
def counting(n, fail_at=None):
    for step in range(1, n + 1):
        time.sleep(0.001)  # a step takes time; a generator that never pauses floods the GUI thread's queue
        if step == fail_at:
            raise FloatingPointError(f"the loss became nan at step {step}")
        yield {"step": step, "values": np.arange(3.0)}
    return "done"


def test_worker_signals_in_order_and_plain_values(qtbot):
    worker = GeneratorWorker(lambda: counting(5))
    values = []
    worker.yielded.connect(values.append)
    with qtbot.waitSignals([worker.started, worker.returned, worker.finished], order="strict", timeout=10_000):
        worker.start()
    qtbot.waitUntil(lambda: len(values) == 5, timeout=5_000)
    assert [v["step"] for v in values] == [1, 2, 3, 4, 5]
    assert isinstance(values[0]["values"], np.ndarray)
    assert worker.wait(5_000)


def test_worker_reports_errors_and_stops_on_request(qtbot):
    failing = GeneratorWorker(lambda: counting(10, fail_at=3))
    errors = []
    failing.errored.connect(lambda failure, last: errors.append((failure, last)))
    with qtbot.waitSignals([failing.errored, failing.finished], order="strict", timeout=10_000):
        failing.start()
    qtbot.waitUntil(lambda: len(errors) == 1, timeout=5_000)
    failure, last = errors[0]
    assert "nan at step 3" in failure.message and failure.is_a("ArithmeticError") and last["step"] == 2
    endless = GeneratorWorker(lambda: counting(10**9))
    with qtbot.waitSignal(endless.yielded, timeout=10_000):
        endless.start()
    with qtbot.waitSignals([endless.stopped, endless.finished], order="strict", timeout=10_000):
        endless.request_stop()
    assert endless.wait(5_000) and failing.wait(5_000)


def test_a_run_that_ends_before_start_returns_is_reported_cleanly(qtbot, monkeypatch):
    """A run failing at once can end before `start()` returns (CI saw it under load); hold start() to make sure."""
    started_thread = QThread.start

    def start_and_wait_for_the_end(thread, *args):
        started_thread(thread, *args)
        assert thread.wait(10_000)

    monkeypatch.setattr(QThread, "start", start_and_wait_for_the_end)
    worker = GeneratorWorker(lambda: counting(10, fail_at=1))
    errors = []
    worker.errored.connect(lambda failure, last: errors.append(failure))
    worker.start()
    monkeypatch.undo()
    qtbot.waitUntil(lambda: len(errors) == 1, timeout=5_000)  # queued from the ended thread; no AttributeError
    assert "nan at step 1" in errors[0].message and not worker.is_running


def test_probe_worker_drops_stale_snapshots(qtbot):
    seen = []
    probe = LatestJobWorker(lambda job: sum(range(200_000)))
    probe.done.connect(lambda step, result: seen.append(step))
    for step in range(20):
        probe.submit(step, None)
    assert probe.wait_idle(10.0)
    qtbot.waitUntil(lambda: bool(seen) and seen[-1] == 19, timeout=5_000)
    assert len(seen) + probe.dropped == 20
    assert probe.shutdown()


# ---------------------------------------------------------------- real runs from the panel
@pytest.mark.slow
def test_tiny_run_plots_every_step_and_ends_with_a_checkpoint(qtbot, panel, inspector, corpus, tmp_path):
    assert run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run")) == "finished"
    steps, losses = panel.plots.series("loss")
    assert steps.tolist() == list(range(1, 13))  # one point per step
    assert np.isfinite(losses).all()
    assert panel.plots.eval_point_count() == 2  # held-out at steps 6 and 12
    assert (tmp_path / "run" / "checkpoints" / "step-000012" / "model.safetensors").is_file()
    assert (tmp_path / "run" / "final" / "config.json").is_file()
    assert "step 12 / 12" in panel.progress.format()
    assert panel.buttons.start_button.isEnabled() and not panel.buttons.stop_button.isEnabled()
    # The trained model goes to the inspector in one click.
    panel.checkpoints.use_button.click()
    assert inspector.loaded and inspector.loaded[-1].endswith(("final", "step-000012"))
    # A second run into the same folder would mix two runs: the engine refuses, the panel says so.
    assert run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run")) == "failed"
    assert panel.status.status_label.text().startswith("The run could not start")
    assert (tmp_path / "run" / "checkpoints" / "step-000012" / "model.safetensors").is_file()


@pytest.mark.slow
def test_probe_attention_after_training_differs_from_before(qtbot, panel, inspector, corpus, tmp_path):
    probes = panel.probes
    assert not probes.to_inspector_check.isChecked()  # the inspector stays on the live model unless asked
    probes.to_inspector_check.setChecked(True)
    pinned = probes.pin_pair("the old king speaks to the young queen.", "she hears him.")
    run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run", steps=16, probe_every=8, learning_rate=5e-3))
    qtbot.waitUntil(lambda: probes.history.steps()[-1:] == [16], timeout=30_000)
    assert probes.history.steps() == [0, 8, 16]
    for pair in probes.pairs:
        before, after = probes.history.get(0, pair), probes.history.get(16, pair)
        assert before.attentions.shape == after.attentions.shape
        assert not np.allclose(before.attentions, after.attentions, atol=1e-4)
    assert pinned in probes.pairs
    assert inspector.shown, "the newest snapshot goes to the inspector"
    # The slider walks the snapshots; the loss plot's marker follows.
    assert probes.show_snapshot(1) == 0
    assert panel.plots.markers[0].value() == 0 and panel.plots.markers[0].isVisible()
    assert "step 0" in inspector.shown[-1][1]
    probes.step_slider.setValue(probes.step_slider.maximum())
    assert panel.plots.markers[0].value() == 16
    shown = probes.history.get(16, probes.selected_pair())
    assert np.array_equal(probes.snapshot_view.current_matrix(), shown.attentions[0, 0])
    probes.to_inspector_check.setChecked(False)  # the user keeps the inspector on the live model
    sent = len(inspector.shown)
    probes.show_snapshot(8)
    assert len(inspector.shown) == sent and "step 8" in probes.step_label.text()


@pytest.mark.slow
def test_stop_ends_the_run_within_one_step_and_keeps_a_checkpoint(qtbot, panel, corpus, tmp_path):
    assert panel.start_run(tiny(corpus, tmp_path / "run", steps=100_000, probe_every=0))
    qtbot.waitUntil(lambda: panel.steps_received >= 3, timeout=RUN_TIMEOUT_MS)
    done_when_asked = panel.runner.worker.steps_done
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        panel.buttons.stop_button.click()
    assert ended.args == ["stopped"]
    assert panel.runner.worker.steps_done <= done_when_asked + 1
    last = panel.plots.last_step()
    assert (tmp_path / "run" / "checkpoints" / f"step-{last:06d}" / "model.safetensors").is_file()
    assert "Stopped after step" in panel.status.status_label.text()
    assert panel.buttons.start_button.isEnabled()


@pytest.mark.slow
def test_pause_and_resume_continue_the_same_run(qtbot, panel, corpus, tmp_path):
    assert panel.start_run(tiny(corpus, tmp_path / "run", steps=30, probe_every=0))
    qtbot.waitUntil(lambda: panel.steps_received >= 2, timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(panel.runner.worker.paused, timeout=RUN_TIMEOUT_MS):
        panel.buttons.pause_button.click()
    assert panel.buttons.resume_button.isEnabled() and not panel.buttons.pause_button.isEnabled()
    held_at = panel.runner.worker.steps_done
    with qtbot.assertNotEmitted(panel.stepCompleted, wait=300):
        pass
    assert panel.runner.worker.steps_done == held_at
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        panel.buttons.resume_button.click()
    assert ended.args == ["finished"]
    steps, _ = panel.plots.series("loss")
    assert steps.tolist() == list(range(1, 31))  # one run, no gap, no repeat
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    logged = [json.loads(line)["step"] for line in lines if json.loads(line)["kind"] == "step"]
    assert logged == list(range(1, 31))


@pytest.mark.slow
def test_closing_the_window_mid_run_stops_saves_and_joins(qtbot, settings, corpus, tmp_path):
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings)
    qtbot.addWidget(window)
    panel = window.add_tab(TrainingPanel(), "Train")
    assert window.tabs.tabText(window.tabs.indexOf(panel)) == "Train"
    window.show()
    assert panel.start_run(tiny(corpus, tmp_path / "run", steps=100_000, probe_every=2))
    qtbot.waitUntil(lambda: panel.steps_received >= 3, timeout=RUN_TIMEOUT_MS)
    window.close()  # closing -> panel.shutdown(): stop, checkpoint, join
    assert not panel.runner.worker.is_running
    assert panel.runner.worker._thread.isFinished() and panel.runner.probe_worker._thread.isFinished()
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))
    assert checkpoints and (checkpoints[-1] / "model.safetensors").is_file()


@pytest.mark.slow
def test_watching_a_metrics_file_another_process_appends_to(qtbot, panel, tmp_path):
    run = tmp_path / "headless"
    run.mkdir()
    (run / "run_config.json").write_text(json.dumps({"training": {"steps": 40}}))
    assert panel.watch_run_folder(run)
    writer = (
        "import json, sys, time\n"
        "with open(sys.argv[1], 'a') as f:\n"
        "    for s in range(1, 41):\n"
        "        f.write(json.dumps({'kind': 'step', 'step': s, 'total_steps': 40, 'loss': 9 - s / 10,\n"
        "                            'mlm_loss': 8 - s / 10, 'nsp_loss': 0.7, 'mlm_accuracy': s / 100,\n"
        "                            'nsp_accuracy': 0.5, 'learning_rate': 1e-3, 'tokens_per_second': 5e3,\n"
        "                            'elapsed_seconds': s / 10}) + '\\n')\n"
        "        if s % 10 == 0:\n"
        "            f.write(json.dumps({'kind': 'eval', 'step': s, 'loss': 9 - s / 10}) + '\\n')\n"
        "            f.write(json.dumps({'kind': 'checkpoint', 'step': s, 'path': 'x'}) + '\\n')\n"
        "        f.flush(); time.sleep(0.005)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", writer, str(run / "metrics.jsonl")])
    try:
        qtbot.waitUntil(lambda: panel.plots.point_count() >= 1, timeout=20_000)
        qtbot.waitUntil(lambda: panel.plots.point_count() == 40, timeout=20_000)
    finally:
        process.wait(20)
    assert panel.plots.eval_point_count() == 4
    assert "step 40 / 40" in panel.progress.format()
    panel.plots.flush()
    assert panel.plots.redraw_count >= 1


# ---------------------------------------------------------------- faults end in a message, the window usable
def test_unreadable_corpus_is_a_clear_message(qtbot, panel, tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9 au lait. encore un caf\xe9.\n".encode("latin-1"))
    assert run_to_end(qtbot, panel, tiny(str(bad), tmp_path / "run")) == "failed"
    message = panel.status.status_label.text()
    assert "corpus" in message.lower() and "latin1.txt" in message
    assert panel.buttons.start_button.isEnabled()


class ScriptedRun(EngineRun):
    """An engine stand-in that fails the way the real one does, to check the panel's messages."""

    def __init__(self, settings, error):
        self.run_dir = Path(settings.out_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.model_config = self.tokenizer = None
        self.steps = self._steps(error)

    def _steps(self, error):
        for step in (1, 2):
            yield stats(step, total=10, loss=5.0)
        raise error

    def request_stop(self):
        pass

    def snapshot(self):
        return {}


class LossExplodedError(TrainingError):
    """A kind of TrainingError the app has never heard of (the engine may add more)."""


FAULTS = {  # the error a step raises, and what the status must say
    "nan": (NonFiniteLossError("the loss became nan at step 3; the last good checkpoint is none", 3, None),
            "diverged"),
    "oom": (OutOfMemoryTrainingError("cuda:0 ran out of memory at step 3"), "Out of memory"),
    "disk full": (OSError(errno.ENOSPC, "No space left on device", "run/checkpoints/.step-000003.tmp"),
                  "The disk is full"),
    "write error": (PermissionError(errno.EACCES, "Permission denied", "run/metrics.jsonl"),
                    "could not write to its folder"),
    "training error": (LossExplodedError("the smoothed loss is 40x its starting value at step 3; lower the "
                                         "learning rate (now 30) and resume from the last checkpoint"),
                       "The run stopped: the smoothed loss is 40x its starting value at step 3"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(FAULTS))
def test_a_run_that_fails_ends_in_a_message_with_its_curves_and_the_form_unlocked(qtbot, tmp_path, kind):
    error, expected = FAULTS[kind]
    panel = TrainingPanel(engine_factory=lambda settings, init: ScriptedRun(settings, error))
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        panel.start_run(TrainingSettings(out_dir=str(tmp_path / "run"), probe_every=0))
    assert ended.args == ["failed"]
    message = panel.status.status_label.text()
    assert expected in message and "Traceback" not in message and "failed after step" not in message
    assert panel.plots.point_count() == 2  # the curves stay
    assert panel.buttons.start_button.isEnabled() and panel.form.steps_spin.isEnabled()  # the form unlocks
    assert not panel.buttons.stop_button.isEnabled() and not panel.is_running
    assert panel.shutdown()


@pytest.mark.slow
def test_continue_the_loaded_model(qtbot, corpus, tmp_path):
    from bertcore.models.checkpoint import load_pretrained

    panel = TrainingPanel()
    qtbot.addWidget(panel)
    with pytest.raises(ValueError, match="no model loaded"):
        panel._initial_model(tiny(corpus, tmp_path / "none", preset=CONTINUE_LOADED))
    run_to_end(qtbot, panel, tiny(corpus, tmp_path / "first", steps=4, probe_every=0))
    panel.shutdown()
    model, tokenizer = load_pretrained(tmp_path / "first" / "final")
    weights_before = model.bert.embeddings.word_embeddings.weight.detach().clone()
    panel = TrainingPanel()
    qtbot.addWidget(panel)
    panel.on_model_changed(LoadedModel(model, tokenizer, describe_model(model, "first")))
    settings = tiny(corpus, tmp_path / "second", steps=3, probe_every=0, preset=CONTINUE_LOADED)
    assert run_to_end(qtbot, panel, settings) == "finished"
    assert (tmp_path / "second" / "init" / "config.json").is_file()
    assert panel.plots.point_count() == 3
    # The run trained its own copy: the inspector's model is untouched.
    assert torch.equal(model.bert.embeddings.word_embeddings.weight, weights_before)
    panel.shutdown()


# ---------------------------------------------------------------- in the real main window
@pytest.mark.slow
def test_in_the_main_window(qtbot, settings, tiny_model, tokenizer, corpus, tmp_path):
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.inspectionShown, timeout=RUN_TIMEOUT_MS):
        window.set_model(tiny_model, tokenizer, "tiny test (untrained)")
    panel = window.add_tab(TrainingPanel(), "Train")
    assert window.tabs.tabText(window.tabs.indexOf(panel)) == "Train"
    assert panel.probes.pairs[0].text_a == window.current_pair()[0]  # told the pair and the model when added
    continue_loaded = tiny(corpus, tmp_path / "unused", preset=CONTINUE_LOADED)
    assert panel._initial_model(continue_loaded) == (tiny_model, tokenizer)
    window.pairChanged.emit("the old king speaks.", "")  # what the window does once an edit settles
    assert panel.probes.pairs[0].text_a == "the old king speaks." and panel.probes.pairs[0].text_b is None

    panel.probes.to_inspector_check.setChecked(True)  # the user asks to see the snapshots in the inspector
    run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run", steps=8, probe_every=4))
    qtbot.waitUntil(lambda: panel.probes.history.steps()[-1:] == [8], timeout=30_000)
    qtbot.waitUntil(lambda: "training step 8" in window.inspect_tab.caption_label.text(), timeout=10_000)
    with qtbot.waitSignal(window.modelChanged, timeout=RUN_TIMEOUT_MS):
        panel.checkpoints.use_button.click()
    model, _ = window.model_and_tokenizer()
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 128  # the trained tiny preset
    assert panel._initial_model(continue_loaded)[0] is model  # told the new model

    assert panel.start_run(tiny(corpus, tmp_path / "second", steps=100_000, probe_every=0))
    qtbot.waitUntil(lambda: panel.steps_received >= 2, timeout=RUN_TIMEOUT_MS)
    window.close()
    assert not panel.runner.worker.is_running and panel.runner.worker._thread.isFinished()
    assert sorted((tmp_path / "second" / "checkpoints").glob("step-*"))


# ---------------------------------------------------------------- long runs stay cheap to draw
def test_a_redraw_sets_only_the_curves_whose_data_changed(qtbot):
    from explorer.runs._qt.loss_plots import LossPlots

    plots = LossPlots()
    qtbot.addWidget(plots)
    for step in range(1, 11):
        plots.add(stats(step, total=100, loss=5.0 - step / 10, learning_rate=1e-3))
    plots.add(held_out(10, loss=4.5))
    plots.flush()
    assert plots.legend_names() == ["total", "learning rate"]  # only the curves with values are named
    items = {("raw", key): item for key, item in plots._raw_items.items()}
    items |= {("smooth", key): item for key, item in plots._smooth_items.items()}
    items |= {("eval", key): item for key, item in plots._eval_items.items()}
    calls = []

    def counted(name, set_data):
        def set_data_and_count(*args, **kwargs):
            calls.append(name)
            return set_data(*args, **kwargs)

        return set_data_and_count

    for name, item in items.items():
        item.setData = counted(name, item.setData)

    def redraw_after(*records):
        calls.clear()
        plots.add_all(records)
        plots.flush()
        return sorted(calls)

    assert redraw_after(stats(11, loss=3.9)) == [("raw", "loss"), ("smooth", "loss")]
    assert redraw_after(held_out(11, loss=4.0)) == [("eval", "loss")]
    assert redraw_after() == []
    calls.clear()
    plots.set_smoothing_enabled(False)  # the smoothed curves show the raw values, the light raw ones go
    assert len(calls) == 2 * len(set(plots._series) & set(plots._smooth_items))  # the curves with values
    hidden_x, _ = plots._raw_items["loss"].getData()
    assert plots._smooth_items["loss"].getData()[1][-1] == 3.9 and (hidden_x is None or len(hidden_x) == 0)


def test_peak_pyramid_keeps_every_spike_and_matches_a_brute_force_min_max(qtbot):
    from explorer.runs._qt.loss_plots import LossPlots
    from explorer.runs.curve_series import PeakPyramid

    rng = np.random.default_rng(0)
    x = np.arange(1, 10_001, dtype=float)
    y = rng.normal(size=x.size)
    y[7_777] = 50.0  # a spike must survive any zoom level
    pyramid = PeakPyramid()
    pyramid.update(y[:3_000])  # built in two goes, as during a run
    pyramid.update(y)
    for lo, hi, budget in ((0, 10_000, 300), (1_234, 9_876, 500), (7_000, 8_000, 100), (10, 60, 100)):
        xs, ys = pyramid.view(x, y, lo, hi, budget)
        block = 2 ** max(1, int(np.ceil(np.log2(2 * (hi - lo) / budget))))  # the block size the pyramid picks
        assert len(xs) == len(ys) <= 2 * budget + block
        assert ys.max() == y[lo:hi].max()  # every peak in range is drawn
        assert ys.min() >= y[max(0, lo - block) : hi].min()  # nothing from outside the range is made up
        assert x[lo] - block <= xs[0] <= x[lo] and x[hi - 1] - block <= xs[-1] <= x[hi - 1]
        assert np.all(np.diff(xs) >= 0)
    plots = LossPlots()
    qtbot.addWidget(plots)
    for step in range(1, 20_001):
        plots.add(stats(step, total=20_000, loss=10.0 / step, learning_rate=1e-3))
    plots.flush()
    drawn_x, _ = plots._smooth_items["loss"].getData()
    assert plots.point_count() == 20_000 and len(drawn_x) < 5_000  # reduced to the pixels, not all points


@pytest.mark.slow
def test_stop_at_any_moment_during_set_up_or_a_pause(qtbot, panel, corpus, tmp_path):
    assert panel.start_run(tiny(corpus, tmp_path / "early", steps=100_000))
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        panel.stop()  # while the corpus and the model are still being prepared
    assert ended.args == ["stopped"] and panel.buttons.start_button.isEnabled()
    assert panel.start_run(tiny(corpus, tmp_path / "paused", steps=100_000, probe_every=0))
    qtbot.waitUntil(lambda: panel.steps_received >= 1, timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(panel.runner.worker.paused, timeout=RUN_TIMEOUT_MS):
        panel.pause()
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        panel.stop()
    assert ended.args == ["stopped"]
    last = panel.plots.last_step()
    assert (tmp_path / "paused" / "checkpoints" / f"step-{last:06d}" / "model.safetensors").is_file()


@pytest.mark.slow
def test_watching_a_run_folder_probes_its_checkpoints(qtbot, panel, corpus, tmp_path):
    run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run", steps=8, checkpoint_every=4, probe_every=0))
    watcher = TrainingPanel()
    qtbot.addWidget(watcher)
    pair = watcher.probes.pin_pair("the old king speaks.", "the queen hears.")
    assert watcher.watch_run_folder(tmp_path / "run")
    status = watcher.status.status_label.text()
    assert "tiny preset" in status and "8 steps of 4 × 32" in status
    qtbot.waitUntil(lambda: watcher.probes.history.steps() == [4, 8], timeout=30_000)
    assert watcher.plots.point_count() == 8
    before, after = watcher.probes.history.get(4, pair), watcher.probes.history.get(8, pair)
    assert not np.allclose(before.attentions, after.attentions)
    assert watcher.checkpoints.combo.count() >= 2
    assert watcher.shutdown()


# ---------------------------------------------------------------- a run is never lost
@pytest.mark.slow
def test_a_failed_start_keeps_the_previous_runs_curves_probes_and_checkpoints(qtbot, panel, inspector, corpus,
                                                                              tmp_path):
    assert run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run", checkpoint_every=6)) == "finished"
    qtbot.waitUntil(lambda: panel.probes.history.steps()[-1:] == [12], timeout=30_000)
    probed, checkpoints = panel.probes.history.steps(), panel.checkpoints.combo.count()
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9 au lait.\n".encode("latin-1"))
    assert run_to_end(qtbot, panel, tiny(str(bad), tmp_path / "second")) == "failed"
    status = panel.status.status_label.text()
    assert "corpus" in status.lower() and str(tmp_path / "run") in status
    steps, _ = panel.plots.series("loss")
    assert steps.tolist() == list(range(1, 13))  # the first run's curve is still there
    assert panel.probes.history.steps() == probed and panel.checkpoints.combo.count() == checkpoints
    assert panel.run_dir == tmp_path / "run" and "step 12 / 12" in panel.progress.format()


def test_settings_out_of_range_say_why_as_they_are_typed(qtbot):
    panel = TrainingPanel(torch_threads=1)
    qtbot.addWidget(panel)
    panel.show()
    form = panel.form
    form.lr_edit.clear()
    qtbot.keyClicks(form.lr_edit, "-1000")
    assert form.lr_edit.text() == "-1000"  # taken as typed, not clamped
    assert form.problem_label.isVisible()
    assert "Learning rate must be a positive number, got -1000.0" in form.problem_label.text()  # TrainingConfig's
    assert "c62828" in form.lr_edit.styleSheet()
    assert "Learning rate must be a positive number, got -1000.0" in panel.buttons.start_button.toolTip()
    form.steps_spin.setValue(0)
    assert "Steps must be a positive integer, got 0" in form.problem_label.text()
    qtbot.mouseClick(panel.buttons.start_button, Qt.MouseButton.LeftButton)
    assert "Cannot start: Steps must be a positive integer, got 0" in panel.status.status_label.text()
    assert panel.runner.worker is None
    form.lr_edit.setText("3e-4")
    form.steps_spin.setValue(20)
    assert not form.problem_label.isVisible() and form.lr_edit.styleSheet() == ""
    assert form.settings().learning_rate == 3e-4


def stop_after(qtbot, panel, settings, steps: int) -> int:
    """Start a run, stop it once it has done `steps` steps; the step it stopped at."""
    assert panel.start_run(settings)
    qtbot.waitUntil(lambda: panel.steps_received >= steps, timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS):
        panel.stop()
    return panel.plots.last_step()


@pytest.mark.slow
def test_resuming_a_stopped_run_continues_its_step_count_and_curve(qtbot, panel, corpus, tmp_path):
    stopped_at = stop_after(qtbot, panel, tiny(corpus, tmp_path / "run", steps=30, probe_every=0,
                                               checkpoint_every=0), 4)
    assert stopped_at < 30 and panel.buttons.resume_button.isEnabled()
    assert "bert-train --resume" in panel.buttons.resume_button.toolTip()
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        qtbot.mouseClick(panel.buttons.resume_button, Qt.MouseButton.LeftButton)
        assert f"from step {stopped_at}" in panel.status.status_label.text()
        qtbot.waitUntil(lambda: panel.steps_received >= 1, timeout=RUN_TIMEOUT_MS)
        assert f"resumed at step {stopped_at}" in panel.status.status_label.text()
    assert ended.args == ["finished"]
    steps, losses = panel.plots.series("loss")
    assert steps.tolist() == list(range(1, 31)) and np.isfinite(losses).all()  # one curve, no gap, no repeat
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    logged = [json.loads(line)["step"] for line in lines if json.loads(line)["kind"] == "step"]
    assert logged == list(range(1, 31))
    assert "Finished at step 30" in panel.status.status_label.text() and not panel.buttons.resume_button.isEnabled()


@pytest.mark.slow
def test_a_stopped_run_folder_opened_later_is_resumed_from_the_window(qtbot, panel, corpus, tmp_path):
    stopped_at = stop_after(qtbot, panel, tiny(corpus, tmp_path / "run", steps=20, probe_every=0,
                                               checkpoint_every=0), 3)
    later = TrainingPanel(torch_threads=1)  # another session of the app, as after a restart
    qtbot.addWidget(later)
    try:
        assert later.watch_run_folder(tmp_path / "run")
        qtbot.waitUntil(lambda: later.watcher.ended_as == "stopped", timeout=10_000)
        assert f"stopped after step {stopped_at}" in later.status.status_label.text()
        assert later.plots.point_count() == stopped_at and later.buttons.resume_button.isEnabled()
        with qtbot.waitSignal(later.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
            later.buttons.resume_button.click()
        assert ended.args == ["finished"]
        assert later.plots.series("loss")[0].tolist() == list(range(1, 21))
    finally:
        assert later.shutdown()


@pytest.mark.slow
def test_a_watched_run_that_finished_says_so(qtbot, panel, corpus, tmp_path):
    run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run", steps=6, probe_every=0))
    watcher = TrainingPanel(torch_threads=1)
    qtbot.addWidget(watcher)
    assert watcher.watch_run_folder(tmp_path / "run")
    qtbot.waitUntil(lambda: watcher.watcher.ended_as == "finished", timeout=10_000)
    assert "finished at step 6" in watcher.status.status_label.text() and "finished" in watcher.progress.format()
    assert not watcher.buttons.resume_button.isEnabled()  # every step done: nothing to resume
    assert watcher.shutdown()


def test_a_loss_that_rises_far_above_its_start_warns_in_the_window(qtbot, tmp_path):
    import dataclasses

    warned = dataclasses.make_dataclass("Warned", [("warning", "str | None", None)], bases=(StepStats,), frozen=True)

    class RisingRun(ScriptedRun):
        def _steps(self, error):
            yield stats(1, total=3, loss=5.0)
            yield warned(**{**dataclasses.asdict(stats(2, total=3, loss=40.0)),
                            "warning": "the smoothed loss is 8x its starting value; lower the learning rate"})
            yield stats(3, total=3, loss=41.0)

    panel = TrainingPanel(engine_factory=lambda settings, init: RisingRun(settings, None))
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS):
        panel.start_run(TrainingSettings(out_dir=str(tmp_path / "run"), probe_every=0))
    label = panel.status.warning_label
    assert not label.isHidden() and "Step 2: the smoothed loss is 8x its starting value" in label.text()
    assert panel.shutdown()


@pytest.mark.slow
def test_the_probe_slider_walks_the_selected_pairs_snapshots(qtbot, tiny_model, tokenizer):
    from bertcore.analysis.inspection import inspect
    from explorer.runs.probe_history import ProbePair
    from explorer.train._qt.probe_box import ProbeBox

    box = ProbeBox(ProbePair("the king speaks.", None))
    qtbot.addWidget(box)
    first, second = ProbePair("the king speaks.", None), ProbePair("the queen hears.", None)

    def snapshot(pair):
        return {pair: inspect(tiny_model, tokenizer, pair.text_a, pair.text_b)}

    for step in (0, 4):
        box.add_snapshot(step, snapshot(first))
    box.set_current_pair(second.text_a, None)  # the inspector's pair changed mid-run
    for step in (8, 12, 16):
        box.add_snapshot(step, snapshot(second))
    assert box.selected_pair() == second and box.selected_snapshot_step() == 16
    box.probe_list.setCurrentRow([box.probe_list.item(i).data(Qt.ItemDataRole.UserRole)
                                  for i in range(box.probe_list.count())].index(first))
    assert box.step_slider.maximum() == 1  # the first pair has two snapshots: its right end is step 4
    box.step_slider.setValue(box.step_slider.maximum())
    assert box.selected_snapshot_step() == 4 and "step 4" in box.step_label.text()
    view = box.snapshot_view
    assert view.layer_spin.minimum() == 1 and view.head_spin.minimum() == 1  # numbered from 1, as the inspector
    assert "Layer 1 · head 1" in view.heatmap.plot.titleLabel.text


def test_every_control_of_the_train_tab_says_what_it_does(qtbot):
    from PySide6.QtWidgets import (
        QAbstractButton,
        QAbstractSlider,
        QAbstractSpinBox,
        QComboBox,
        QLineEdit,
        QListWidget,
        QScrollBar,
    )

    panel = TrainingPanel(torch_threads=1)
    qtbot.addWidget(panel)
    missing = [widget.objectName() or f"{type(widget).__name__} {getattr(widget, 'text', lambda: '')()}"
               for kind in (QAbstractButton, QComboBox, QAbstractSpinBox, QLineEdit, QAbstractSlider, QListWidget)
               for widget in panel.findChildren(kind)
               if not widget.toolTip() and not isinstance(widget, QScrollBar)
               and not isinstance(widget.parent(), (QAbstractSpinBox, QComboBox))]
    assert missing == []
    assert panel.shutdown()


# ---------------------------------------------------------------- what the model learns: analysis records
@pytest.mark.slow
def test_a_run_with_analysis_draws_its_records_live_on_the_timelines(qtbot, panel, corpus, tmp_path):
    """The records the training loop measures off its thread reach the timelines on the step records the worker
    receives, as the run goes, each equal to what the metrics file holds: step 0's and the last step's always, and
    those due between (every 4 steps) unless a record was still being measured then (the steps passed over are
    listed in the next record)."""
    live = []
    panel.analysis.changed.connect(lambda timeline, what: what == "records" and live.append(list(timeline.steps)))
    panel.resize(1400, 950)
    panel.show()  # a timeline draws while it is on screen
    qtbot.waitExposed(panel)
    panel.view_tabs.setCurrentWidget(panel.syntax_timeline)
    assert run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run", steps=12, analysis_every=4,
                                         probe_every=4)) == "finished"
    written = [record for record in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())
               if record["kind"] == "analysis"]
    steps = [record["step"] for record in written]
    skipped = [step for record in written for step in record.get("skipped_steps", [])]
    assert steps[0] == 0 and steps[-1] == 12 and sorted(steps + skipped) == [0, 4, 8, 12]
    assert panel.analysis.steps == steps
    live = [seen for seen in live if seen]  # (the first is the clearing of the run shown before)
    assert live[0] == [0] and len(live) == len(steps)  # one by one, while the run went
    for shown, record in zip(panel.analysis.records, written, strict=True):
        assert shown["uas"] == record["uas"] and shown["best_head"] == record["best_head"]
    drawn_steps, drawn_best = panel.syntax_timeline.best_curve.getData()
    assert drawn_steps.tolist() == steps
    assert drawn_best.tolist() == [record["best_head"]["uas"] for record in written]
    # the slider walks the probe snapshots (steps 0, 4, 8, 12); the timelines follow it to the record nearest to it
    panel.probes.show_snapshot(12)
    assert panel.analysis.step == 12 and panel.syntax_timeline.markers[0].value() == 12
    assert panel.syntax_timeline.caption.text().splitlines()[1].startswith("Step 12: best head")
    panel.probes.show_snapshot(0)
    panel.view_tabs.setCurrentWidget(panel.health_timeline)
    assert panel.analysis.step == 0 and panel.health_timeline.caption.text().startswith("Step 0 over")
    # finished: its checkpoints without a record may be analysed afterwards
    assert panel.analysis_bar.analyse_button.isEnabled()


@pytest.mark.slow
def test_a_run_without_records_is_analysed_over_its_checkpoints_with_progress_and_cancel(qtbot, panel, corpus,
                                                                                        tmp_path):
    from bertcore.files.run_folder import list_checkpoints

    assert run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run", steps=12, checkpoint_every=3, analysis_every=0,
                                         probe_every=0)) == "finished"
    bar = panel.analysis_bar
    assert len(panel.analysis) == 0 and bar.analyse_button.isEnabled() and not bar.cancel_button.isEnabled()
    assert "No analysis records in this run yet" in bar.status_label.text()
    # Cancel after the first record: the records appended so far stay, each whole
    bar.recordAnalysed.connect(lambda _record: bar.cancel())
    with qtbot.waitSignal(bar.recordAnalysed, timeout=RUN_TIMEOUT_MS):
        assert bar.start()
        assert not bar.progress.isHidden() and bar.cancel_button.isEnabled()
    assert "Cancelled" in bar.status_label.text()
    qtbot.waitUntil(lambda: all(not worker.is_running for worker in bar._retired), timeout=RUN_TIMEOUT_MS)
    kept = [step for step, _ in list_checkpoints(tmp_path / "run")]  # the newest checkpoints (final/ is step 12's)
    written = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    analysed = [record for record in written if record["kind"] == "analysis"]
    assert len(kept) >= 2 and 1 <= len(analysed) < len(kept) and all(record["post_hoc"] for record in analysed)
    assert panel.analysis.steps[0] == kept[0] == analysed[0]["step"]
    # again: the checkpoints left are analysed, every one once
    bar.recordAnalysed.disconnect()
    bar.recordAnalysed.connect(panel.analysis.add)
    with qtbot.waitSignal(bar.analysisEnded, timeout=RUN_TIMEOUT_MS) as ended:
        assert bar.start()
    assert ended.args == ["finished"]
    assert panel.analysis.steps == kept
    assert f"{len(kept)} analysis records, step {kept[0]} to 12 ({len(kept)} analysed afterwards)" in \
        bar.status_label.text()
    written = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert sorted(record["step"] for record in written if record["kind"] == "analysis") == kept


@pytest.mark.slow
def test_analysing_a_folder_a_live_run_holds_is_refused_in_words(qtbot, panel, corpus, tmp_path):
    from bertcore.files.run_folder import RunFolder

    assert run_to_end(qtbot, panel, tiny(corpus, tmp_path / "run", steps=4, checkpoint_every=2, analysis_every=0,
                                         probe_every=0)) == "finished"
    with RunFolder(tmp_path / "run").lock():  # another process trains in it now
        with qtbot.waitSignal(panel.analysis_bar.analysisEnded, timeout=RUN_TIMEOUT_MS) as ended:
            assert panel.analysis_bar.start()
    assert ended.args == ["failed"]
    text = panel.analysis_bar.status_label.text()
    assert "Cannot analyse the checkpoints: " in text and "is in use by a training run" in text
    assert "Traceback" not in text and panel.analysis_bar.analyse_button.isEnabled()
