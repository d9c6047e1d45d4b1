"""`bert-explorer [PATH]`: open the explorer window, on a checkpoint folder or on the best model available.

`--help` and `--version` answer without importing torch or Qt: only `main` imports the window.
"""

from __future__ import annotations

import argparse
import signal
import sys

from explorer import __version__
from explorer.startup import FALLBACK_PRESET


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
                             "or pytorch_model.bin, vocab.txt)")
    parser.add_argument("--device", default="cpu",
                        help="torch device for the model, e.g. cpu or cuda (default: cpu)")
    parser.add_argument("--no-training-tab", action="store_true",
                        help="open only the Inspect tab (no pretraining from the window)")
    parser.add_argument("--version", action="version", version=f"bert-explorer {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)

    # Qt is imported only now, so `--help` answers at once and never needs a display.
    from PySide6.QtWidgets import QApplication

    from explorer._qt.main_window import SETTINGS_APPLICATION, SETTINGS_ORGANISATION, MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName(SETTINGS_ORGANISATION)
    app.setApplicationName(SETTINGS_APPLICATION)
    app.setApplicationDisplayName("bert-explorer")
    window = MainWindow(device=args.device)
    if not args.no_training_tab:
        from explorer._qt.training_panel import TrainingPanel

        window.add_tab(TrainingPanel(), "Train")
    window.show()
    window.start_up(args.path)
    _close_on_signals(window)
    return app.exec()


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
