"""GUI event-loop lag while the attention panel's Export ▸ Attention arrays as NPZ writes its file.

The attention panel shows an inspection of MiniLM's shape (6 layers × 12 heads) at --tokens positions; its NPZ is
exported from the menu (the save dialog answered) and the 5 ms timer of gui_lag_training.py records how late the GUI
thread is until the file is written. The reference, in the same process: the same arrays written by one
np.savez_compressed call, the time the menu used to hold the GUI thread (the window froze that long).

    .venv/bin/python benchmarks/gui_lag_npz_export.py --tokens 512
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
from PySide6.QtWidgets import QApplication, QFileDialog

from benchmarks._common import load_average
from benchmarks.gui_lag_training import LagProbe, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=512)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])

    from explorer.common._qt.background_write import BackgroundWrite
    from explorer.common._qt.gui_gc import collect_garbage_in_gui_thread
    from explorer.common.attention_math import compute_rollout
    from explorer.inspector._qt.attention_panel import AttentionPanel
    from explorer.inspector.demo_inspection import demo_inspection

    collect_garbage_in_gui_thread()  # as in the window, where worker threads exist from the start
    inspection = demo_inspection(num_tokens=args.tokens, num_layers=6, num_heads=12, seed=3)
    panel = AttentionPanel()
    panel.resize(1000, 640)
    panel.show()
    panel.set_inspection(inspection)
    app.processEvents()
    print(f"load average before: {load_average()}")
    folder = Path(tempfile.mkdtemp())

    started = time.perf_counter()
    mask = np.ones(inspection.attentions.shape[:2], np.float32)
    with open(folder / "reference.npz", "wb") as handle:
        np.savez_compressed(handle, attentions=inspection.attentions, tokens=np.array(inspection.encoding.tokens),
                            head_mask=mask, rollout=compute_rollout(inspection.attentions, mask))
    reference = time.perf_counter() - started
    print(f"reference: rollout + one np.savez_compressed call on the GUI thread: {reference:.2f} s "
          "(what the menu used to freeze the window for)")

    QFileDialog.getSaveFileName = lambda *_args: (str(folder / "attention.npz"), "NumPy arrays (*.npz)")
    action = next(action for action in panel.export_menu.actions() if action.text().endswith("as NPZ…"))
    probe = LagProbe()
    probe.start()
    started = time.perf_counter()
    action.trigger()
    returned = time.perf_counter() - started
    while BackgroundWrite.running:
        app.processEvents()
        time.sleep(0.001)
    written = time.perf_counter() - started
    probe.stop()
    size = (folder / "attention.npz").stat().st_size / 1e6
    print(f"background: the menu returned in {returned * 1e3:.0f} ms; the file ({size:.1f} MB) was written in "
          f"{written:.2f} s ({written / reference:.2f}x the reference); GUI lateness meanwhile: "
          f"{summary(probe.lateness)}")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
