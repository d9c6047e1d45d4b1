"""The head lab in the real main window: importance of the current input, a corpus run, a 2,000-point projection.

1. Importance of the input on screen: the pair is edited --edits times (one [MASK] by hand, heads shown by
   importance), and for each edit the head-lab worker's importance time (one forward + one backward to the
   head gates) is read, beside the inspection worker's time for the same input as a load-independent ratio.
   Target: <= 50 ms for mini at ~30 tokens on this project's 2-core CPU.
2. A corpus run: importance and roles over --pairs held-out pairs at --seq-len tokens, started as the Head lab
   tab's Run button starts it (one fewer torch thread than cores, niced), while a 5 ms timer on the GUI thread
   records how late each tick fires. Target: GUI lag p99 <= 10 ms while it runs. --baseline first measures the
   same timer with nothing running: the floor the numbers should be read against on a shared machine.
3. The Embeddings tab's projection of --points tokens: the time from request to points drawn, then --pans pans
   of the scatter, each painted synchronously (`repaint`), and a hover look-up.

With --screenshots DIR, it saves what it shows: the heads by importance and by role, the overview, the logit
lens, the Head lab tab with the pruning curve (computed after the run), and the Embeddings tab.

    .venv/bin/python benchmarks/gui_lag_head_lab.py --model mini --baseline 5
    .venv/bin/python benchmarks/gui_lag_head_lab.py --model assets/default-model --screenshots /tmp/lab-shots
    .venv/bin/python benchmarks/gui_lag_head_lab.py --model minilm --pairs 64 --screenshots /tmp/lab-shots
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from PySide6.QtCore import QEventLoop, QPointF, QSettings
from PySide6.QtWidgets import QApplication

from benchmarks.gui_lag_training import LagProbe, measure_baseline, run_event_loop, summary

SENTENCE_A = "the king is dead, long live the king; my lord, the queen is come"
SENTENCE_B = "his son shall take the crown tomorrow and rule the land"
MASKED = [2, 12, 20, 24]  # king, lord, son, crown


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def wait_until(condition, seconds: float = 60.0) -> bool:
    deadline = time.perf_counter() + seconds
    while not condition():
        if time.perf_counter() > deadline:
            return False
        run_event_loop(0.01)
    return True


def open_model(window, which: str) -> str:
    import explorer.window.startup as startup

    if which == "minilm":
        loaded = startup.load_minilm()
    elif which in ("mini", "tiny", "base"):
        loaded = startup.new_untrained_model(which)
    else:
        loaded = startup.load_checkpoint(which)
    window._install(loaded)
    return loaded.info.label


def analysed(tab, lab) -> bool:
    """The input and masking in the state are inspected, and the head lab has analysed that inspection."""
    state = tab.state
    shown = state.inspection
    return (shown is not None and shown.encoding is state.encoding and shown.masking is state.masking
            and lab.input_analysis_current and lab.last_analysis.scores.roles is not None)


def tab_named(window, name: str):
    return next(widget for widget in map(window.tabs.widget, range(window.tabs.count())) if widget.objectName() == name)


def save(widget, folder: Path | None, name: str) -> None:
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        widget.grab().save(str(folder / f"{name}.png"))
        print(f"   saved {folder / name}.png")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="mini", help="mini / tiny / base (untrained), minilm, or a folder")
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--points", type=int, default=2000)
    parser.add_argument("--pans", type=int, default=60)
    parser.add_argument("--baseline", type=float, default=0.0, help="seconds of idle lag measured first")
    parser.add_argument("--curve", action="store_true", help="also time the pruning curve after the run")
    parser.add_argument("--screenshots", type=Path, default=None)
    parser.add_argument("--prefix", default="", help="file name prefix of the screenshots")
    args = parser.parse_args()
    shots = args.screenshots

    _app = QApplication.instance() or QApplication([])
    from explorer.head_lab.corpus_run import CorpusSettings
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.IniFormat), throttle_ms=0)
    window.resize(1600, 1000)
    window.show()
    label = open_model(window, args.model)
    tab, lab = window.inspect_tab, window.head_lab
    form = tab.input_form
    form.sentence_a_edit.setText(SENTENCE_A)
    form.sentence_b_edit.setText(SENTENCE_B)
    tab.flush_input()
    wait_until(lambda: tab.state.inspection is not None)
    print(f"{label}; {os.cpu_count()} CPU cores; {load()}")
    if args.baseline:
        measure_baseline(args.baseline)

    # 1. this input
    lab.marks.set_mode("importance")
    tokens = len(tab.state.encoding)
    words = SENTENCE_A.split()
    importance_ms, job_ms, inspect_ms = [], [], []
    before = load()
    for edit in range(args.edits):
        form.sentence_a_edit.setText(" ".join(words[: len(words) - edit % 3]))
        tab.flush_input()
        tab.clear_masks()
        tab.toggle_mask(3)  # one [MASK] by hand: the MLM loss has a position
        wait_until(lambda: analysed(tab, lab))
        analysis = lab.last_analysis
        if analysis.scores.importance is not None:
            importance_ms.append(analysis.importance_ms)
        job_ms.append(1e3 * lab.input_worker.compute_seconds[-1])
        inspect_ms.append(1e3 * tab.inspect_worker.compute_seconds[-1])
    if importance_ms:
        print(f"1. importance of the input on screen, ~{tokens} tokens, {len(importance_ms)} edits: median "
              f"{statistics.median(importance_ms):.1f} ms, p90 {np.percentile(importance_ms, 90):.1f} ms; the "
              f"whole head-lab job (importance, roles, logit lens) median {statistics.median(job_ms):.1f} ms; the "
              f"inspection of the same input {statistics.median(inspect_ms):.1f} ms, ratio "
              f"{statistics.median(importance_ms) / statistics.median(inspect_ms):.2f}   ({before})")
    else:
        print(f"1. no importance: {lab.last_analysis.scores.importance_note}; head-lab job (roles, lens) median "
              f"{statistics.median(job_ms):.1f} ms   ({before})")
    form.sentence_a_edit.setText(SENTENCE_A)
    tab.flush_input()
    tab.clear_masks()
    for position in MASKED:
        tab.toggle_mask(position)
    wait_until(lambda: analysed(tab, lab))
    run_event_loop(0.3)
    save(window, shots, f"{args.prefix}inspect-importance")
    tab.attention_panel.tabs.setCurrentIndex(1)
    run_event_loop(0.3)
    save(window, shots, f"{args.prefix}overview-importance")
    lab.marks.set_mode("roles")
    run_event_loop(0.3)
    save(window, shots, f"{args.prefix}overview-roles")
    tab.attention_panel.tabs.setCurrentIndex(0)
    run_event_loop(0.3)
    save(window, shots, f"{args.prefix}grid-roles")
    save(tab.logit_lens, shots, f"{args.prefix}logit-lens")

    # 2. the corpus sample
    lab_tab = tab_named(window, "headLabTab")
    window.tabs.setCurrentWidget(lab_tab)
    run_event_loop(0.3)
    settings = CorpusSettings(num_pairs=args.pairs, seq_len=args.seq_len, objective=lab.objective or "mlm")
    ended: list[tuple[str, str]] = []
    lab.corpusEnded.connect(lambda outcome, text: ended.append((outcome, text)))
    batch_times: list[float] = []
    stage_seconds: dict[str, float] = {}
    last = [time.perf_counter()]

    def on_progress(progress) -> None:
        now = time.perf_counter()
        if progress.stage in ("importance", "roles"):
            batch_times.append(now - last[0])
        if progress.done:
            stage_seconds[progress.stage] = stage_seconds.get(progress.stage, 0.0) + now - last[0]
        last[0] = now

    lab.corpusProgress.connect(on_progress)
    probe = LagProbe()
    before = load()
    probe.start()
    started = time.perf_counter()
    lab_tab.start_run(settings=settings)
    loop = QEventLoop()
    lab.corpusEnded.connect(loop.quit)
    loop.exec()
    seconds = time.perf_counter() - started
    probe.stop()
    print(f"2. corpus run, {args.pairs} pairs at {args.seq_len} tokens (importance, then roles), "
          f"{lab.corpus_threads} torch thread(s), niced: {ended[-1][0]} in {seconds:.1f} s: reading and "
          f"tokenizing the corpus {stage_seconds.get('preparing', 0):.1f} s (once per model), importance "
          f"{stage_seconds.get('importance', 0):.1f} s, roles {stage_seconds.get('roles', 0):.1f} s; longest batch "
          f"{max(batch_times):.2f} s (the cancel latency)   ({before})")
    print(f"   GUI lag while it ran: {summary(probe.lateness)}")
    if args.curve or shots is not None:
        if lab.has_pretraining_heads:
            started = time.perf_counter()
            probe = LagProbe()
            probe.start()
            lab_tab.start_run(pruning=True, settings=CorpusSettings(
                num_pairs=args.pairs, seq_len=args.seq_len, objective=settings.objective, pruning=True))
            loop = QEventLoop()
            lab.corpusEnded.connect(loop.quit)
            loop.exec()
            probe.stop()
            print(f"   pruning curve ({args.pairs} more pairs, {lab.curve.num_steps} steps x 2 orders): "
                  f"{time.perf_counter() - started:.1f} s; GUI lag {summary(probe.lateness)}")
        lab_tab.count_spin.setValue(max(1, lab_tab.count_spin.maximum() // 4))
        run_event_loop(0.3)
        save(window, shots, f"{args.prefix}head-lab")
        window.tabs.setCurrentIndex(0)
        lab.marks.set_mode("importance")
        run_event_loop(0.5)
        save(window, shots, f"{args.prefix}inspect-importance-corpus")

    # 3. the projection
    embeddings = tab_named(window, "embeddingView")
    embeddings.points_spin.setValue(args.points)
    before = load()
    started = time.perf_counter()
    window.tabs.setCurrentWidget(embeddings)
    wait_until(lambda: embeddings.result is not None
               and embeddings.result.projection.sample.num_points == args.points, 120)
    run_event_loop(0.05)
    drawn = time.perf_counter() - started
    view = embeddings.projection_pane.scatter_plot
    view_box = view.getPlotItem().vb
    view.viewport().repaint()
    x_range = np.diff(view_box.viewRange()[0])[0]

    def pan_paints() -> list[float]:
        paints = []
        for pan in range(args.pans):
            view_box.translateBy(x=x_range * (0.01 if pan % 20 < 10 else -0.01))
            began = time.perf_counter()
            view.viewport().repaint()
            paints.append(1e3 * (time.perf_counter() - began))
        return paints

    paints = pan_paints()
    embeddings.projection_pane.scatter.setVisible(False)  # the same pans without the points: axes, labels, the frame
    bare = pan_paints()
    embeddings.projection_pane.scatter.setVisible(True)
    centre = view_box.mapViewToScene(view_box.viewRect().center())
    began = time.perf_counter()
    for _ in range(100):
        embeddings.projection_pane.point_at(centre)
    hover_ms = 10 * (time.perf_counter() - began)
    print(f"3. projection of {embeddings.result.projection.sample.num_points:,} points: on screen "
          f"{drawn:.2f} s after the tab opened (hidden states of every layer + PCA); a pan repainted in median "
          f"{statistics.median(paints):.1f} ms, max {max(paints):.1f} ms over {args.pans} pans (without the points: "
          f"median {statistics.median(bare):.1f} ms); a hover look-up {hover_ms:.2f} ms   ({before})")
    embeddings.neighbour_edit.setText("king")
    embeddings.request()
    wait_until(lambda: embeddings.result is not None and embeddings.result.neighbours is not None, 10)
    view_box.autoRange(padding=0.04)
    run_event_loop(0.1)
    point = embeddings.result.projection.points[40]  # hovered, as the mouse would: its sentence shows below
    embeddings._on_scatter_moved(view_box.mapViewToScene(QPointF(float(point[0]), float(point[1]))))
    run_event_loop(0.3)
    save(window, shots, f"{args.prefix}embeddings")
    window.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
