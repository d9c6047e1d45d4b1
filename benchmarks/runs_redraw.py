"""The Runs tab under load, measured in its real widgets (offscreen):

1. Redraw: --runs runs (default 50) of --points points each (default 100,000; a loss curve and an eval every 1,000
   steps) ticked together; the time of a redraw, paint included, after a smoothing change, a tick (one more run),
   a resize, and a log-y switch. Every point is smoothed and kept; only what is drawn is thinned (one min/max pair
   per pixel column). Target: ≤ 1 s each.
2. Live: --live runs (default 10) whose metrics.jsonl files grow by 20 records each every 0.2 s, followed by the
   tab's own follower thread, all ticked and drawn; the GUI thread's lag measured as
   benchmarks/gui_lag_training.py does (a 5 ms precise timer and how late each tick comes), with an idle baseline
   first. Target: p99 ≤ 10 ms.

    .venv/bin/python benchmarks/runs_redraw.py
    .venv/bin/python benchmarks/runs_redraw.py --runs 10 --points 20000 --live 4 --seconds 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from benchmarks.gui_lag_training import LagProbe, run_event_loop, summary


def synthetic_run(folder: Path, seed: int, points: int) -> None:
    """A bert-train run folder of `points` steps, written fast with numpy (the values matter, not the writer)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    (folder / "run_config.json").write_text(json.dumps({"training": {"steps": points, "lr": 1e-4 * (1 + seed)}}))
    steps = np.arange(1, points + 1)
    loss = 9 * np.exp(-steps / (points / 5)) + rng.random(points) * (0.5 + seed / 50)
    lines = [f'{{"kind": "step", "step": {step}, "loss": {value!r}, "tokens": 4096}}\n'
             for step, value in zip(steps.tolist(), loss.tolist(), strict=True)]
    for index in range(999, points, 1000):
        lines[index] += f'{{"kind": "eval", "step": {index + 1}, "loss": {loss[index] + 0.1!r}}}\n'
    (folder / "metrics.jsonl").write_text("".join(lines))
    (folder / "summary.json").write_text(json.dumps({"step": points}))


def timed_redraw(app: QApplication, tab) -> tuple[float, float]:
    """One full redraw pass of the plots in view and its paint, as the event loop does it (in slices, the event
    loop running between them), from its start (the coalescing timer's wait left out) to its last paint; and the
    longest slice of GUI thread it took (what a key press may have to wait)."""
    tab.plots.longest_slice_s = 0.0
    began = time.perf_counter()
    tab.plots.redraw()
    while tab.plots.busy():
        app.processEvents()
    tab.repaint()
    app.processEvents()
    return time.perf_counter() - began, tab.plots.longest_slice_s


def measure_redraw(app, args, folder: Path) -> None:
    from explorer.runs._qt.workbench.workbench_tab import RunsWorkbench

    root = folder / "many"
    began = time.perf_counter()
    for index in range(args.runs):
        synthetic_run(root / f"run-{index:02d}", index, args.points)
    print(f"wrote {args.runs} runs × {args.points:,} points in {time.perf_counter() - began:.1f} s")
    tab = RunsWorkbench(folders=[str(root)], settings=QSettings(str(folder / "a.ini"), QSettings.Format.IniFormat))
    tab.resize(1600, 1000)
    tab.show()
    began = time.perf_counter()
    while (len(tab.state.runs) < args.runs
           or any(entry.curves.get("loss") is None or entry.curves["loss"].size < args.points
                  for entry in tab.state.runs.values())):
        run_event_loop(0.1)
        if time.perf_counter() - began > 600:
            raise SystemExit("the runs were not all read in 10 minutes")
    print(f"read by the follower thread in {time.perf_counter() - began:.1f} s")
    tab.state.set_metric_filter("^loss$")
    ids = sorted(tab.state.runs)
    tab.state.set_ticked(ids[:-1], True)
    took, longest = timed_redraw(app, tab)
    print(f"first draw of {len(ids) - 1} runs: {took:.3f} s (longest slice of the GUI thread {1000 * longest:.1f} ms)")
    results = {}
    for what, change in (("smoothing 0.6 -> 0.95", lambda: tab.set_smoothing(0.95)),
                         ("smoothing 0.95 -> 0.3", lambda: tab.set_smoothing(0.3)),
                         ("tick one more run", lambda: tab.state.set_ticked(ids[-1:], True)),
                         ("resize", lambda: tab.resize(1300, 900)),
                         ("log y", lambda: tab.log_y_check.setChecked(True)),
                         ("tokens axis", lambda: tab.axis_box.setCurrentIndex(1))):
        change()
        app.processEvents()
        results[what], longest = timed_redraw(app, tab)
        print(f"  redraw after {what}: {results[what]:.3f} s (target ≤ 1 s; longest slice of the GUI thread "
              f"{1000 * longest:.1f} ms)")
    loss = tab.plots.plots["loss"]
    drawn = sum(len(item.getData()[0]) for items in loss.items.values() for item in (items.raw, items.smooth)
                if item is not None and item.getData()[0] is not None)
    print(f"  drawn points on the loss plot: {drawn:,} of {args.runs * args.points * 2:,} (raw and smoothed)")
    assert tab.shutdown(60_000)
    tab.close()


def measure_live(app, args, folder: Path) -> None:
    from explorer.runs._qt.workbench.workbench_tab import RunsWorkbench

    root = folder / "live"
    for index in range(args.live):
        synthetic_run(root / f"live-{index:02d}", index, args.live_points)
        (root / f"live-{index:02d}" / "summary.json").unlink()
    tab = RunsWorkbench(folders=[str(root)], interval_s=0.5,
                        settings=QSettings(str(folder / "b.ini"), QSettings.Format.IniFormat))
    tab.resize(1600, 1000)
    tab.show()
    while len(tab.state.runs) < args.live or any(not entry.curves for entry in tab.state.runs.values()):
        run_event_loop(0.1)
    tab.state.set_ticked(list(tab.state.runs), True)
    run_event_loop(1.0)
    baseline = LagProbe()
    baseline.start()
    run_event_loop(args.seconds / 2)
    baseline.stop()
    print(f"idle tab, {args.live} runs drawn: {summary(baseline.lateness)}")

    stop = threading.Event()
    steps = {index: args.live_points for index in range(args.live)}

    def write() -> None:
        while not stop.is_set():
            for index in range(args.live):
                with open(root / f"live-{index:02d}" / "metrics.jsonl", "a") as file:
                    for _ in range(20):
                        steps[index] += 1
                        value = 9 * math.exp(-steps[index] / 5000) + 0.3
                        file.write(f'{{"kind": "step", "step": {steps[index]}, "loss": {value!r}, '
                                   f'"tokens": 4096}}\n')
            stop.wait(0.2)

    writer = threading.Thread(target=write, daemon=True)
    probe = LagProbe()
    applied, redraws = tab.batches_applied, tab.plots.redraw_count
    tab.plots.longest_slice_s = 0.0
    writer.start()
    probe.start()
    run_event_loop(args.seconds)
    probe.stop()
    stop.set()
    writer.join()
    grown = sum(entry.curves["loss"].size for entry in tab.state.runs.values()) - args.live * args.live_points
    print(f"{args.live} live runs growing 100 steps/s each for {args.seconds:.0f} s ({grown:,} new points shown, "
          f"{tab.batches_applied - applied} batches, {tab.plots.redraw_count - redraws} redraws): "
          f"GUI lag {summary(probe.lateness)} (target p99 ≤ 10 ms); longest redraw slice "
          f"{1000 * tab.plots.longest_slice_s:.1f} ms")
    assert tab.shutdown(60_000)
    tab.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=10)
    parser.add_argument("--live-points", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--skip-redraw", action="store_true")
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    print(f"load average {' '.join(f'{value:.2f}' for value in os.getloadavg())}, {os.cpu_count()} CPU cores")
    folder = Path(tempfile.mkdtemp(prefix="runs-redraw-"))
    if not args.skip_redraw:
        measure_redraw(app, args, folder)
    if args.live:
        measure_live(app, args, folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
