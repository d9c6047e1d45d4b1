"""GUI event-loop lag while the Explain tab works, and screenshots of what it shows.

The real main window loads a model, the Inspect tab shows a pair, an output is clicked (`MainWindow.explain_output`,
as the predictions view's click calls it), and the Explain tab computes its attributions, faithfulness curves and
context mixing; then the corrupted copy is edited and residual and head patching run. The 5 ms timer of
gui_lag_training.py records how late the GUI thread is meanwhile (p99 ≤ 10 ms is the target), for the patching
alone and for the whole explanation.

    .venv/bin/python benchmarks/gui_lag_explain.py --baseline 5                       # default model
    .venv/bin/python benchmarks/gui_lag_explain.py --minilm --tokens 500 --screenshots /tmp/shots
    .venv/bin/python benchmarks/gui_lag_explain.py --checkpoint RUN/checkpoints/final --screenshots /tmp/shots

--target: "mlm" (mask the middle word of A, explain its top guess), "nsp", "class"; the default picks what the
model has. A model with no head to explain (MiniLM) gets its context mixing only (no attribution, no patching).
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

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from benchmarks.gui_lag_training import LagProbe, run_event_loop, summary

SENTENCE_A = "the old king walked slowly into the great hall and sat on his golden throne"
SENTENCE_B = "his son stood beside him and looked at the crowd"
CORRUPTED_A = "the old queen walked slowly into the great hall and sat on his golden throne"


def wait_until(condition, timeout_s: float, what: str) -> float:
    """Run the event loop (not a sleep between processEvents calls, which would delay the lag timer's ticks
    itself) until `condition()` holds."""
    began = time.perf_counter()
    while not condition():
        if time.perf_counter() - began > timeout_s:
            raise TimeoutError(f"waited {timeout_s:.0f} s for {what}")
        run_event_loop(0.02)
    return time.perf_counter() - began


def long_text(tokenizer, tokens: int) -> str:
    """Sentences of the default corpus until the pair is about `tokens` long."""
    from bertcore.files.resources import default_corpus_path

    words = []
    with open(default_corpus_path(), encoding="utf-8") as handle:
        for line in handle:
            words.extend(line.split())
            if len(tokenizer.encode(" ".join(words)).tokens) >= tokens:
                break
    while len(tokenizer.encode(" ".join(words)).tokens) > tokens:
        words.pop()
    return " ".join(words)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None, help="a checkpoint folder (default: the shipped default model)")
    parser.add_argument("--minilm", action="store_true", help="open all-MiniLM-L6-v2 instead")
    parser.add_argument("--tokens", type=int, default=0, help="make sentence A about this many tokens long")
    parser.add_argument("--target", default=None, choices=("mlm", "nsp", "class"))
    parser.add_argument("--methods", default="integrated_gradients,gradient_x_input,gradient_norm,"
                                             "grad_attention_rollout")
    parser.add_argument("--mixing", default="value_norm")
    parser.add_argument("--baseline", type=float, default=0, help="seconds of idle lag measured first")
    parser.add_argument("--screenshots", type=Path, default=None)
    parser.add_argument("--name", default=None, help="screenshot file prefix (default: the model's name)")
    parser.add_argument("--repeat", type=int, default=1, help="run the patching this many times (steadier figures)")
    parser.add_argument("--niceness", type=int, default=None, help="the explain thread's added nice value")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval in ms: how long a thread holding the GIL keeps it from another")
    args = parser.parse_args()

    import explorer.explain._qt.job_runner as job_runner
    from bertcore.explain.targets import available_targets

    if args.niceness is not None:
        job_runner.EXPLAIN_NICENESS = args.niceness
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval / 1000)
    from explorer.window._qt.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)  # noqa: F841 (kept alive for the run)
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "explorer.ini"), QSettings.IniFormat)
    window = MainWindow(settings, throttle_ms=30)
    window.resize(1600, 1000)
    window.show()
    if args.baseline:
        probe = LagProbe()
        probe.start()
        run_event_loop(args.baseline)
        probe.stop()
        print(f"idle baseline ({args.baseline:.0f} s): {summary(probe.lateness)}")
    state, tab = window.inspect_tab.state, window.explain_tab
    if args.minilm:
        window.open_minilm()
    else:
        window.load_checkpoint(args.checkpoint or str(Path(__file__).resolve().parent.parent / "assets" /
                                                      "default-model"))
    wait_until(lambda: state.model is not None and not window.is_loading(), 300, "the model")
    model = state.model
    text_a, text_b = SENTENCE_A, SENTENCE_B
    if args.tokens:
        text_a, text_b = long_text(state.tokenizer, args.tokens - 1), ""
    window.inspect_pair(text_a, text_b)
    wait_until(lambda: state.inspection is not None and state.inspection.encoding.tokens == state.encoding.tokens,
               300, "the inspection")
    kinds = available_targets(model)
    kind = args.target or next((kind for kind in ("mlm", "class", "nsp") if kind in kinds), None)
    tab.state.set_methods(args.methods.split(","))
    tab.state.set_mixing_method(args.mixing)
    print(f"{type(model).__name__}, {len(state.encoding)} tokens, target kind {kind}; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    probe = LagProbe()
    probe.start()
    began = time.perf_counter()
    if kind == "mlm":
        middle = len(SENTENCE_A.split()) // 2 + 1
        state.toggle_mask(middle)
        wait_until(lambda: state.inspection is not None and state.inspection.predictions, 300, "the predictions")
        prediction = state.inspection.predictions[0]
        window.explain_output(("mlm", prediction.position, prediction.top_ids[0]))
    elif kind == "class":
        output = state.inspection.task_output
        window.explain_output(("class", int(output.probabilities.argmax())))
    elif kind == "nsp":
        window.explain_output(("nsp", 0))
    else:
        window.tabs.setCurrentWidget(tab)
        tab.on_inspection_shown(state.inspection)
        tab.mix_inspected_input()
    wait_until(lambda: not tab.busy, 900, "the explanation")
    probe.stop()
    print(f"explanation ({time.perf_counter() - began:.1f} s: {tab.state.target_text or 'mixing only'}): "
          f"{summary(probe.lateness)}")
    if tab.state.message:
        print(f"  the tab says: {tab.state.message}")
    name = args.name or ("minilm" if args.minilm else Path(args.checkpoint or "default-model").name)
    if args.screenshots is not None:
        args.screenshots.mkdir(parents=True, exist_ok=True)
        tab.pages.setCurrentIndex(0)
        run_event_loop(0.3)
        window.grab().save(str(args.screenshots / f"{name}-attribution-mixing.png"))
    if kind is not None and tab.state.target is not None:
        corrupted_a = CORRUPTED_A if not args.tokens else text_a.replace(" the ", " a ", 1)
        tab.state.set_corrupted(corrupted_a, text_b)
        if tab.state.corrupted is None:
            print(f"  corrupted input refused: {tab.state.corrupted_problem}")
            return 1
        tab.pages.setCurrentIndex(1)
        probe = LagProbe()
        probe.start()
        began = time.perf_counter()
        for _ in range(args.repeat):
            tab.run_patching()
            wait_until(lambda: not tab.busy, 900, "the patching")
        probe.stop()
        print(f"patching × {args.repeat}, residual then heads ({(time.perf_counter() - began) / args.repeat:.2f} s "
              f"each; {tab.state.num_layers} layers × {len(tab.state.encoding)} positions): "
              f"{summary(probe.lateness)}; load {os.getloadavg()[0]:.2f}")
        residual = tab.state.patching.get("residual")
        if residual is not None:
            layer = int(abs(residual.scores).max(axis=1).argmax())
            tab.state.select_patch_layer(min(layer, tab.state.num_layers - 1))
        if args.screenshots is not None:
            run_event_loop(0.3)
            window.grab().save(str(args.screenshots / f"{name}-patching.png"))
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
