"""`bert-explorer [PATH | ORG/NAME]`: open the explorer window, on a checkpoint folder, a Hugging Face repo id found in
the local cache (never downloaded: Model ▸ Download from the Hub… does that), or on the best model available.

`--help` and `--version` answer without importing torch or Qt: only `main` imports the window.

Start-up, in order (see explorer/window/_qt/splash.py): a splash is painted at once (Qt only); torch and the model
code are imported in a background thread meanwhile; then the main window is built and shown and the model
loads in its loader thread; the Train and Fine-tune tabs are added once the window is up. BERT_EXPLORER_TIMING=1 prints
when each of these happened (benchmarks/startup_time.py).
"""

from __future__ import annotations

import argparse
import signal
import sys

from explorer import APP_NAME, __version__
from explorer.window.startup import FALLBACK_PRESET


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bert-explorer",
        description=(
            "See inside BERT: type a sentence pair and look at the input tables, BERT's masking, the "
            "masked-token and next-sentence predictions, and every attention head."
        ),
        epilog=(
            "Without PATH the window opens the checkpoint opened last time, else the trained default model "
            f"in assets/default-model, else a fresh, untrained '{FALLBACK_PRESET}' model."
        ),
    )
    parser.add_argument("path", nargs="?", metavar="PATH",
                        help="a checkpoint folder in the standard BERT layout (config.json, model.safetensors "
                             "or pytorch_model.bin, vocab.txt), or a Hugging Face repo id such as "
                             "google-bert/bert-base-uncased, opened from the local Hugging Face cache "
                             "(HF_HUB_CACHE or HF_HOME) without the network")
    parser.add_argument("--device", default="cpu",
                        help="torch device for the model, e.g. cpu or cuda (default: cpu)")
    parser.add_argument("--no-training-tab", action="store_true",
                        help="open without the Train and Fine-tune tabs (no training from the window)")
    parser.add_argument("--version", action="version", version=f"bert-explorer {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)

    # Qt is imported only now, so that `--help` answers at once and never needs a display; torch and the
    # window's modules are imported in the background from here on, while the splash paints: its first paint
    # (Qt's font set-up, ~1 s on a small machine) runs in C++ in the event loop, outside the interpreter's lock.
    from PySide6.QtWidgets import QApplication

    from explorer.common._qt.theme import use_light_palette
    from explorer.window._qt.splash import Splash, StartupClock, when_done
    from explorer.window.preload import Preloader

    app = QApplication.instance() or QApplication(sys.argv[:1])
    use_light_palette(app)  # before the splash: one light palette whatever the desktop's theme (see theme.py)
    app.setOrganizationName(APP_NAME)
    app.setApplicationName(APP_NAME)
    app.setApplicationDisplayName(APP_NAME)
    preloader = Preloader()
    clock = StartupClock(app)
    splash = Splash()
    windows = []  # the window, once built (kept referenced while the event loop runs)
    splash.say("Loading PyTorch and the model code…")  # before show(): drawn at the first paint (see Splash)
    clock.on_next_paint(splash, "first-paint")
    splash.show()

    def build() -> None:
        clock.report("preloaded")
        if preloader.error is not None:
            splash.close()
            from PySide6.QtWidgets import QMessageBox

            QMessageBox.critical(None, "bert-explorer cannot start",
                                 f"Importing PyTorch failed: {preloader.error}. Is torch installed in this "
                                 "environment? pip install -e . installs it.")
            app.quit()
            return
        windows.append(open_window(args, clock))
        splash.finish(windows[0])

    waiting = when_done(preloader, build)  # noqa: F841 (kept alive until the window is built)
    return app.exec()


def open_window(args: argparse.Namespace, clock=None):
    """Build and show the main window (torch is imported by now), then load the model in its loader thread."""
    from PySide6.QtCore import QTimer

    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(device=args.device)
    window.show()
    if clock is not None:
        clock.report("window-built")
        clock.on_next_paint(window, "window")
        heatmap = window.inspect_tab.attention_panel.head_grid.graphics.viewport()

        def first_inspection(_inspection) -> None:
            window.inspectionShown.disconnect(first_inspection)
            clock.on_next_paint(heatmap, "first-heatmap")

        window.inspectionShown.connect(first_inspection)
    window.start_up(args.path)
    if not args.no_training_tab:
        # After the first heatmap (or a moment, if the model fails): the window paints and fills in first.
        added = []

        def add_training_tab(*_args) -> None:
            if not added:
                added.append(True)
                QTimer.singleShot(100, window, lambda: _add_training_tab(window))

        window.inspectionShown.connect(add_training_tab)
        window.modelLoadFailed.connect(add_training_tab)
        QTimer.singleShot(8000, window, add_training_tab)
    _close_on_signals(window)
    return window


def _add_training_tab(window) -> None:
    from explorer.finetune._qt.finetune_panel import FinetunePanel
    from explorer.train._qt.training_panel import TrainingPanel

    window.add_tab(TrainingPanel(), "Train")
    window.add_tab(FinetunePanel(), "Fine-tune")


def _close_on_signals(window) -> None:
    """Ctrl+C or SIGTERM close the window as its close button would: workers stop, a training run saves."""
    from PySide6.QtCore import QTimer

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: window.close())
    # Python runs signal handlers only between bytecodes; an idle Qt event loop needs a tick to let it.
    ticker = QTimer(window)
    ticker.timeout.connect(lambda: None)
    ticker.start(200)


if __name__ == "__main__":
    raise SystemExit(main())
