"""Times the attention views at bertviz-breaking sizes: the all-layers overview at 512 tokens x 144 heads
(numpy assembly, then setImage + an offscreen paint) and one head-grid layer update at 30 and 512 tokens.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/overview_render.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtWidgets import QApplication

import explorer.common.attention_math as attention_math
from explorer.inspector._qt.attention_panel import AttentionPanel
from explorer.inspector.demo_inspection import demo_inspection


def median_ms(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    args = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    panel = AttentionPanel()
    panel.resize(1400, 820)
    panel.show()

    for num_tokens in (30, 512):
        inspection = demo_inspection(num_tokens, args.layers, args.heads, seed=1)
        attentions = inspection.attentions
        panel.set_inspection(inspection)
        app.processEvents()
        for hide in (False, True):
            panel.set_options(hide_special=hide, renormalise=hide)
            positions = panel.visible_positions()

            def build_image(attentions=attentions, positions=positions, hide=hide):
                attention_math.overview_image(attentions, positions, renormalise=hide)

            build = median_ms(build_image, args.repeats)

            def step_layer(panel=panel):
                panel.set_layer((panel.current_layer() + 1) % panel.num_layers)

            grid = median_ms(step_layer, args.repeats * 2)

            def overview_render(panel=panel):
                panel._pictures.forget("overview")  # drawn afresh, as for a new inspection
                panel._refresh_overview()  # assemble, colour, setImage
                panel.overview.graphics.grab()  # paint it offscreen, as a frame

            panel.tabs.setCurrentIndex(1)
            render = median_ms(overview_render, args.repeats)
            panel.tabs.setCurrentIndex(0)
            app.processEvents()
            grid_paint = median_ms(lambda panel=panel: (step_layer(), panel.head_grid.graphics.grab()),
                                   args.repeats)
            def rollout_render(panel=panel):
                panel.rollout_page.forget()  # recompute: a new inspection or head mask
                panel._pictures.forget("rollout")
                panel._refresh_rollout()
                panel.rollout_view.graphics.grab()

            panel.tabs.setCurrentIndex(2)
            rollout = median_ms(rollout_render, args.repeats)
            panel.tabs.setCurrentIndex(0)
            label = "hide specials + renormalise" if hide else "all tokens"
            print(f"T={num_tokens:4d} L={args.layers} H={args.heads} ({label}):")
            print(f"  overview image build (numpy)         {build:8.1f} ms  -> "
                  f"{args.layers * args.heads} cells of {attention_math.overview_cell_size(len(positions))} px")
            print(f"  overview build + setImage + paint    {render:8.1f} ms")
            print(f"  layer step: grid + detail setImage   {grid:8.1f} ms")
            print(f"  layer step + grid paint              {grid_paint:8.1f} ms")
            print(f"  rollout (all layers) + paint         {rollout:8.1f} ms")
    panel.close()
    panel.deleteLater()
    app.processEvents()


if __name__ == "__main__":
    main()
