"""A scripted typist in the real window: do the views follow, and does the window stay responsive?

A QTimer types one character every --key-ms (60 ms: a fast typist) at the end of sentence A, in an
offscreen MainWindow holding a preset (untrained: the same arithmetic as a trained one) or MiniLM, with
an input of about --tokens positions. Measured on the GUI thread:

- updates: inspections shown while the keys kept coming, and the longest gap between two of them
  (the goal at ~30 tokens on mini: an update at least every 300 ms);
- last key → final view: from the last key until the inspection of the final text has been shown;
- lag: how late a 5 ms timer fires (p50 / p99 / max), i.e. the longest stall of the event loop while
  typing, forward passes, drawing and painting go on (goal: no stall > 50 ms from inspection work);
- GUI work: the longest single event the GUI thread handled, in wall time and in the thread's own CPU
  time. On a loaded machine the wall time also holds the time the thread waited for a core; the CPU time
  is the app's own work (what an idle machine's wall time would be).

Runs on older checkouts too (their debounce instead of the throttle), so one sitting can compare them:
    .venv/bin/python benchmarks/typing_responsiveness.py --model mini --tokens 30
    .venv/bin/python benchmarks/typing_responsiveness.py --model minilm --tokens 512
    cd old-checkout && python /path/to/this/script ...   (the script imports the code beside it)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
from PySide6.QtCore import QEventLoop, QSettings, Qt, QTimer
from PySide6.QtWidgets import QApplication

TYPED = " and the people cheer for the new king of the land"


class TimedApplication(QApplication):
    """Times every event the GUI thread handles at the top level (wall and thread CPU time)."""

    def __init__(self, argv):
        super().__init__(argv)
        self.depth = 0
        self.events: list[tuple[float, float, float]] = []  # (start, wall ms, cpu ms)
        self.recording = False

    def notify(self, receiver, event) -> bool:
        if not self.recording or self.depth:
            self.depth += 1
            try:
                return super().notify(receiver, event)
            finally:
                self.depth -= 1
        self.depth += 1
        started, started_cpu = time.perf_counter(), time.thread_time()
        try:
            return super().notify(receiver, event)
        finally:
            self.depth -= 1
            self.events.append((started, (time.perf_counter() - started) * 1e3,
                                (time.thread_time() - started_cpu) * 1e3))


def spin(milliseconds: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(milliseconds, loop.quit)
    loop.exec()


def load(name: str):
    import explorer.window.startup as startup

    return startup.load_minilm() if name == "minilm" else startup.new_untrained_model(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mini", help="a preset name, or minilm")
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--key-ms", type=int, default=60)
    parser.add_argument("--keys", type=int, default=40, help="characters typed (from a fixed sentence)")
    parser.add_argument("--no-event-times", action="store_true",
                        help="a plain QApplication: timing every event costs the interpreter's lock per event")
    parser.add_argument("--baseline", action="store_true", help="measure the lag with nothing typed first")
    parser.add_argument("--spikes", action="store_true", help="list the events inside every stall > 40 ms")
    parser.add_argument("--tab", type=int, default=0, help="attention tab shown: 0 heads, 1 all layers, 2 rollout")
    args = parser.parse_args(argv)
    app = QApplication.instance() or (QApplication([]) if args.no_event_times else TimedApplication([]))
    from benchmarks.keystroke_latency import pair_of_length
    from explorer.window._qt.main_window import MainWindow

    loaded = load(args.model)
    window = MainWindow(QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.IniFormat))
    window.resize(1600, 1000)
    window.show()
    window.set_model(loaded.model, loaded.tokenizer, args.model)
    text_a, text_b = pair_of_length(loaded.tokenizer, args.tokens)
    tab = window.inspect_tab
    form = tab.input_form
    form.sentence_b_edit.setText(text_b)
    form.sentence_a_edit.setText(text_a)
    tab.flush_input()
    tab.attention_panel.tabs.setCurrentIndex(args.tab)
    deadline = time.perf_counter() + 120
    while tab.state.inspection is None and time.perf_counter() < deadline:
        spin(50)
    spin(1500)  # settle: the first inspection shown and painted
    positions = len(tab.state.encoding)

    typed = (TYPED * 10)[: args.keys]
    if args.tokens >= 512:  # a full input: type over its start, where the typing is not truncated away
        form.sentence_a_edit.setCursorPosition(0)
    shown: list[float] = []
    window.inspectionShown.connect(lambda _inspection: shown.append(time.perf_counter()))
    lateness: list[float] = []
    spikes: list[tuple[float, float]] = []  # (when, ms late) for ticks more than 40 ms late
    last_tick = [0.0]

    def tick() -> None:
        now = time.perf_counter()
        if last_tick[0]:
            lateness.append(max(0.0, (now - last_tick[0]) * 1e3 - 5))
            if lateness[-1] > 40:
                spikes.append((now, lateness[-1]))
        last_tick[0] = now

    probe = QTimer()
    probe.setTimerType(Qt.TimerType.PreciseTimer)
    probe.setInterval(5)
    probe.timeout.connect(tick)
    keys: list[float] = []
    typist = QTimer()
    typist.setTimerType(Qt.TimerType.PreciseTimer)
    typist.setInterval(args.key_ms)

    def type_one() -> None:
        if len(keys) == len(typed):
            typist.stop()
            return
        form.sentence_a_edit.insert(typed[len(keys)])
        keys.append(time.perf_counter())

    typist.timeout.connect(type_one)
    if args.baseline:  # the same timer with nothing happening: the floor of the lag on this machine now
        idle: list[float] = []
        previous = [0.0]

        def idle_tick() -> None:
            now = time.perf_counter()
            if previous[0]:
                idle.append(max(0.0, (now - previous[0]) * 1e3 - 5))
            previous[0] = now

        probe.timeout.disconnect(tick)
        probe.timeout.connect(idle_tick)
        probe.start()
        spin(round(args.key_ms * args.keys))
        probe.stop()
        probe.timeout.disconnect(idle_tick)
        probe.timeout.connect(tick)
        floor = np.asarray(idle)
        print(f"idle baseline, nothing typed: lag p50 {np.percentile(floor, 50):.1f} ms, p99 "
              f"{np.percentile(floor, 99):.1f} ms, max {floor.max():.1f} ms; stalls > 50 ms: {(floor > 50).sum()}")
    load_before = os.getloadavg()[0]
    timed = isinstance(app, TimedApplication)
    app.recording = timed
    probe.start()
    typist.start()
    while typist.isActive():
        spin(20)
    final = form.sentence_a_edit.text()
    deadline = time.perf_counter() + 120
    while (tab.state.inspection is None or tab.state.text_a != final or
           not shown or shown[-1] < keys[-1]) and time.perf_counter() < deadline:
        spin(20)
    spin(200)
    probe.stop()
    app.recording = False  # (an attribute only, on a plain QApplication)

    during = [t for t in shown if keys[0] <= t <= keys[-1]]
    gaps = np.diff([keys[0], *during, keys[-1]]) * 1e3
    lag = np.asarray(lateness)
    print(f"{args.model}, {positions} positions, a key every {args.key_ms} ms, {len(keys)} keys over "
          f"{(keys[-1] - keys[0]):.1f} s; load average {load_before:.2f} → {os.getloadavg()[0]:.2f}")
    print(f"  updates while typing: {len(during)} (longest wait for one: {gaps.max():.0f} ms)")
    print(f"  last key → final text shown: {(shown[-1] - keys[-1]) * 1e3:.0f} ms")
    print(f"  GUI lag (5 ms timer): p50 {np.percentile(lag, 50):.1f} ms, p99 {np.percentile(lag, 99):.1f} ms, "
          f"max {lag.max():.1f} ms; stalls > 50 ms: {(lag > 50).sum()}")
    if timed and app.events:
        walls = np.array([wall for _, wall, _ in app.events])
        cpus = np.array([cpu for _, _, cpu in app.events])
        busy = cpus.sum() / ((keys[-1] - keys[0]) * 1e3 + 1e-9)
        print(f"  GUI events: longest {walls.max():.1f} ms wall / {cpus.max():.1f} ms CPU, p99 "
              f"{np.percentile(walls, 99):.1f} / {np.percentile(cpus, 99):.1f} ms; GUI thread busy "
              f"{100 * busy:.0f}% of the typing time")
        if args.spikes:
            for at, late in spikes:
                inside = [(round((start - at) * 1e3), round(wall, 1), round(cpu, 1)) for start, wall, cpu in app.events
                          if at - (late + 5) / 1e3 <= start <= at and wall > 1]
                print(f"    {late:.0f} ms late at {at - keys[0]:.2f} s; events in it (start ms, wall, cpu): {inside}")
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
