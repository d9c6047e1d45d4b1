"""GUI event-loop lag while the training tab trains at full speed with probe re-inspection on.

A 5 ms QTimer on the GUI thread records how late each tick fires; a responsive window keeps p99 under 10 ms
and the worst tick under 50 ms. The run is the panel's own (default corpus, tiny preset, batch 16 × 64 tokens,
300 steps unless told otherwise), started as the Start button starts it; the probe pairs are re-inspected
every --probe-every steps in the probe thread. With --window the panel sits in the real main window, so each
probe snapshot is also drawn by the inspector (show_external_inspection).

Analysis records (issue 36: syntax in the heads, the layer probes, BLiMP, representation health) are measured as
the tab measures them, every --analysis-every steps (default: the tab's, 100; 0 = off) on a CPU copy of the weights
in a background thread, and drawn by the Train tab's timelines; --timeline shows the Syntax tab instead of the
probe pairs. Run it with and without (--analysis-every 0), interleaved, to read what the analysis adds.

The machine is shared: --baseline first measures the same timer with nothing running, which is the floor the
numbers above it should be read against. --long N measures the plots alone holding N steps while 100 new steps
a second arrive (what a long GPU run looks like).

--finetune DEMO measures the Fine-tune tab instead, fine-tuning the shipped default model on a demo task (its
measured settings; --steps, --batch-size and --seq-len only when given); with --window the inspector holds the
default model, and the screenshots end with the run's final model in the Inspect tab.

    .venv/bin/python benchmarks/gui_lag_training.py --baseline 10            # panel alone, idle floor first
    .venv/bin/python benchmarks/gui_lag_training.py --analysis-every 0        # the same run without analysis
    .venv/bin/python benchmarks/gui_lag_training.py --analysis-every 25 --timeline   # records often, drawn
    .venv/bin/python benchmarks/gui_lag_training.py --window --screenshots /tmp/shots
    .venv/bin/python benchmarks/gui_lag_training.py --long 100000 --steps 0
    .venv/bin/python benchmarks/gui_lag_training.py --finetune mood --window --screenshots /tmp/finetune-shots
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from PySide6.QtCore import QEventLoop, Qt, QTimer
from PySide6.QtWidgets import QApplication

TICK_MS = 5


class LagProbe:
    """A 5 ms precise timer on the GUI thread; `lateness` holds how late each tick came, in ms."""

    def __init__(self):
        self.lateness: list[float] = []
        self.spikes: list[tuple[float, float]] = []  # (seconds since start, ms) for ticks later than 30 ms
        self.started = time.perf_counter()
        self._last = 0.0
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self._tick)

    def start(self) -> None:
        self.started = time.perf_counter()
        self._last = 0.0
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        if self._last:
            late = max(0.0, (now - self._last) * 1000.0 - TICK_MS)
            self.lateness.append(late)
            if late > 30:
                self.spikes.append((now - self.started, late))
        self._last = now


def summary(lateness: list[float]) -> str:
    if not lateness:
        return "no ticks"
    values = np.asarray(lateness)
    return (f"p50 {np.percentile(values, 50):5.2f} ms   p99 {np.percentile(values, 99):6.2f} ms   "
            f"max {values.max():6.2f} ms   ({len(values)} ticks)")


def run_event_loop(seconds: float) -> None:
    loop = QEventLoop()
    QTimer.singleShot(round(seconds * 1000), loop.quit)
    loop.exec()


def measure_baseline(seconds: float) -> None:
    probe = LagProbe()
    probe.start()
    run_event_loop(seconds)
    probe.stop()
    print(f"idle baseline ({seconds:.0f} s, nothing running): {summary(probe.lateness)}")


def measure_long_plots(panel, steps: int) -> None:
    """The plots holding `steps` points while 100 steps a second keep arriving for 5 s."""
    rng = np.random.default_rng(0)

    from bertcore.training.pretraining import StepStats

    def record(step: int) -> StepStats:
        return StepStats(step=step, total_steps=steps + 1000, loss=9 * np.exp(-step / 2e4) + rng.random(),
                         mlm_loss=8 * np.exp(-step / 2e4), nsp_loss=0.69 - 0.1 * rng.random(),
                         mlm_accuracy=rng.random() * 0.5, nsp_accuracy=0.5 + 0.1 * rng.random(),
                         learning_rate=1e-3 * min(1.0, step / 1000), grad_norm=1.0, tokens=1000,
                         tokens_per_second=1e4, elapsed_seconds=step / 100)

    began = time.perf_counter()
    panel.plots.clear()
    panel.plots.add_all(record(step) for step in range(1, steps + 1))
    panel.plots.flush()
    filled = time.perf_counter() - began
    next_step = [steps + 1]

    def arrive() -> None:
        panel.plots.add(record(next_step[0]))
        next_step[0] += 1

    feeder = QTimer()
    feeder.setInterval(10)
    feeder.timeout.connect(arrive)
    probe = LagProbe()
    redraws_before = panel.plots.redraw_count
    probe.start()
    feeder.start()
    run_event_loop(5.0)
    feeder.stop()
    probe.stop()
    print(f"plots with {steps:,} steps (filled in {filled:.1f} s), 100 new steps/s for 5 s, "
          f"{panel.plots.redraw_count - redraws_before} redraws: {summary(probe.lateness)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=None, help="training steps (0: no run; default 300, or the "
                                                                    "demo's)")
    parser.add_argument("--batch-size", type=int, default=None, help="default 16, or the demo's")
    parser.add_argument("--seq-len", type=int, default=None, help="default 64, or the demo's")
    parser.add_argument("--finetune", metavar="DEMO", default=None,
                        help="measure the Fine-tune tab on this demo task (mood, next-line, names, who-says)")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--probe-every", type=int, default=10)
    parser.add_argument("--analysis-every", type=int, default=None,
                        help="analysis records every N steps (default: the Train tab's; 0 = off)")
    parser.add_argument("--timeline", action="store_true", help="show the Syntax timeline instead of the probe pairs")
    parser.add_argument("--torch-threads", type=int, default=None, help="training thread's intra-op threads")
    parser.add_argument("--niceness", type=int, default=5, help="added to the worker threads' nice value")
    parser.add_argument("--window", action="store_true", help="put the panel in the real main window")
    parser.add_argument("--baseline", type=float, default=0, help="seconds of idle lag measured first")
    parser.add_argument("--long", type=int, default=0, help="also measure the plots holding this many steps")
    parser.add_argument("--spikes", action="store_true", help="list every tick later than 30 ms")
    parser.add_argument("--screenshots", type=Path, default=None, help="save start/middle/end PNGs here")
    args = parser.parse_args()

    _app = QApplication.instance() or QApplication([])  # kept referenced for the whole run
    from bertcore.training.pretraining import warm_up
    from explorer.finetune._qt.finetune_panel import FinetunePanel
    from explorer.finetune.finetune_run import FinetuneSettings
    from explorer.runs.training_run import TrainingSettings
    from explorer.train._qt.training_panel import TrainingPanel

    warm_seconds = warm_up()  # the app does this before its window shows
    out_dir = tempfile.mkdtemp(prefix="gui-lag-run-")
    if args.finetune:
        given = {name: value for name, value in (("steps", args.steps), ("batch_size", args.batch_size),
                                                 ("seq_len", args.seq_len)) if value is not None}
        settings = FinetuneSettings.for_demo(args.finetune, out_dir=out_dir, **given)
        make_panel, title, shot = FinetunePanel, "Fine-tune", "finetune"
    else:
        analysis = {} if args.analysis_every is None else {"analysis_every": args.analysis_every}
        steps = 300 if args.steps is None else args.steps  # 0: no run (the settings still need a valid count)
        settings = TrainingSettings(preset=args.preset, steps=max(steps, 1),
                                    batch_size=args.batch_size or 16, seq_len=args.seq_len or 64,
                                    probe_every=args.probe_every, out_dir=out_dir, checkpoint_every=100,
                                    eval_every=50, **analysis)
        make_panel, title, shot = TrainingPanel, "Train", "train"
    args.steps = settings.steps if args.finetune else steps
    args.probe_every = 0 if args.finetune else args.probe_every
    if args.window:
        from PySide6.QtCore import QSettings

        from explorer.window._qt.main_window import MainWindow

        window = MainWindow(QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.IniFormat))
        if args.finetune:
            from bertcore.files.resources import default_checkpoint_dir

            window.load_checkpoint(str(default_checkpoint_dir()))
            window.inspect_tab.input_form.sentence_a_edit.setText("what say you to this, my lord")
            window.inspect_tab.input_form.sentence_b_edit.setText("")  # the mood of one sentence
        else:
            window.new_untrained_model("tiny")
            window.inspect_tab.input_form.sentence_a_edit.setText("the king is dead. long live the king.")
            window.inspect_tab.input_form.sentence_b_edit.setText("my lord, the queen is come.")
        panel = window.add_tab(make_panel(torch_threads=args.torch_threads, niceness=args.niceness), title)
        window.tabs.setCurrentWidget(panel)
        shown = window
    else:
        panel = make_panel(torch_threads=args.torch_threads, niceness=args.niceness)
        shown = panel
    if args.timeline and not args.finetune:
        panel.view_tabs.setCurrentWidget(panel.syntax_timeline)
    shown.resize(1400, 900)
    shown.show()
    run_event_loop(1.0)  # let the window settle (and the inspector load its model)
    print(f"{'main window' if args.window else 'panel alone'}, {os.cpu_count()} CPU cores, load average "
          f"{os.getloadavg()[0]:.1f}; warm_up {warm_seconds:.2f} s")
    if args.baseline:
        measure_baseline(args.baseline)
    if args.long:
        measure_long_plots(panel, args.long)
    if args.steps <= 0:
        return 0

    probe = LagProbe()
    first_step_tick = [None]  # index into probe.lateness where training (not set-up) begins
    first_step_at = [None]
    shots: set[str] = set()

    def on_step(step: int) -> None:
        if first_step_tick[0] is None:
            first_step_tick[0], first_step_at[0] = len(probe.lateness), time.perf_counter()
        if args.screenshots is not None:
            for label, at in (("start", max(2, args.probe_every + 1)), ("middle", args.steps // 2)):
                if step >= at and label not in shots:
                    shots.add(label)
                    args.screenshots.mkdir(parents=True, exist_ok=True)
                    shown.grab().save(str(args.screenshots / f"{shot}-{label}.png"))

    probe_landed: list[float] = []
    panel.stepCompleted.connect(on_step)
    records_landed: list[float] = []
    if not args.finetune:
        panel.probed.connect(lambda step: probe_landed.append(time.perf_counter() - probe.started))
        panel.analysis.changed.connect(lambda _timeline, what: what == "records" and records_landed.append(
            time.perf_counter() - probe.started))
    loop = QEventLoop()
    panel.runEnded.connect(loop.quit)
    redraws_before = panel.plots.redraw_count
    probe.start()
    assert panel.start_run(settings), panel.status.status_label.text()
    loop.exec()
    probe.stop()
    run_seconds = time.perf_counter() - probe.started
    train_seconds = time.perf_counter() - (first_step_at[0] or probe.started)
    training = probe.lateness[first_step_tick[0] or 0 :]

    deadline = time.perf_counter() + 10  # let the last probe land, then draw the end state
    while args.probe_every and panel.probes.history.steps()[-1:] != [args.steps] and time.perf_counter() < deadline:
        run_event_loop(0.05)
    if args.screenshots is not None:
        panel.plots.flush()
        run_event_loop(0.2)
        shown.grab().save(str(args.screenshots / f"{shot}-end.png"))
        if args.window:
            if args.finetune:  # the fine-tuned model, in the inspector
                inspected = QEventLoop()
                window.inspectionShown.connect(inspected.quit)
                QTimer.singleShot(20_000, inspected.quit)
                panel.use_selected_checkpoint()
                inspected.exec()
            window.tabs.setCurrentIndex(0)
            run_event_loop(0.5)
            shown.grab().save(str(args.screenshots / f"{shot}-end-inspector.png"))

    steps_done = panel.plots.point_count()
    print(f"run ended: {panel.status.status_label.text()}")
    last = panel.lifecycle.shown.last_record
    print(f"{steps_done} steps in {train_seconds:.1f} s of training ({run_seconds:.1f} s with set-up), "
          f"{steps_done / train_seconds:.1f} steps/s; last step {last.tokens_per_second:,.0f}"
          f" tokens/s, loss {last.loss:.3f}")
    if panel.runner.probe_worker is not None and panel.runner.probe_worker.compute_seconds:
        probe_ms = np.asarray(panel.runner.probe_worker.compute_seconds) * 1000.0
        print(f"probes: {probe_ms.size} snapshots in the probe thread, median {np.median(probe_ms):.1f} ms, "
              f"max {probe_ms.max():.1f} ms; dropped as stale: {panel.runner.probe_worker.dropped}")
    if not args.finetune:
        records = panel.analysis.records
        skipped = sum(len(record.get("skipped_steps", [])) for record in records)
        seconds = [record["seconds"]["total"] for record in records if isinstance(record.get("seconds"), dict)]
        print(f"analysis every {settings.analysis_every} steps: {len(records)} records at steps {panel.analysis.steps}"
              + (f", each {np.median(seconds):.2f} s (median) in its thread" if seconds else "")
              + (f"; {skipped} due steps passed over while one was measured" if skipped else "")
              + f"; timelines redrawn {sum(view.redraw_count for view in panel.timelines)} times")
    redraws = panel.plots.redraw_count - redraws_before
    print(f"plot redraws during the run: {redraws} ({redraws / run_seconds:.1f}/s, at most 30/s)")
    print(f"GUI lag while training (first step to end): {summary(training)}")
    print(f"GUI lag over the whole run (corpus and model set-up included): {summary(probe.lateness)}")
    if args.spikes:
        print("probes landed at " + ", ".join(f"{t:.2f}" for t in probe_landed[:6]) + " s …")
        if records_landed:
            print("analysis records reached the timelines at " + ", ".join(f"{t:.2f}" for t in records_landed) + " s")
        for at, late in probe.spikes:
            print(f"  tick {late:6.1f} ms late at {at:6.2f} s")
    panel.shutdown()
    if args.window:
        window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
