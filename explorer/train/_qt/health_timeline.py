"""`healthTimeline`: signs of a collapsing representation over a run's steps, with a warning naming collapsed heads.

Top: anisotropy per layer (the mean cosine similarity of distinct token vectors; Ethayarajh 2019: near 1, every
token points the same way). Middle: effective rank per layer (RankMe: exp of the entropy of the normalised singular
values; falling, the vectors fill fewer directions). Bottom: every head's attention entropy in nats, one thin line a
head in its layer's colour, with the collapse threshold dashed (explorer.train.analysis_timeline.COLLAPSE_RULE). The
warning under the caption names the heads collapsed at the newest record and since when; the marker follows the step
slider and the caption says the record nearest to it.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import curve_pen, small_font
from explorer.train._qt.timeline_plots import (
    WARNING_STYLE,
    LayerCurves,
    TimelineView,
    layer_colours,
    legend,
    step_plot,
)
from explorer.train.analysis_timeline import COLLAPSE_RULE, AnalysisTimeline, head_name, layer_name

THRESHOLD_COLOUR = "#b34700"  # the collapse threshold, in the warning's colour
NAMED_HEADS = 8  # collapsed heads named in the warning; the rest are counted


class HealthTimeline(TimelineView):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("healthTimeline")
        self.setAccessibleName("Representation health over the run")
        self.caption.setObjectName("healthTimelineCaption")
        self.caption.setToolTip("Over the real tokens of the record's treebank sentences, pooled. " + COLLAPSE_RULE)
        self.collapsed = []  # the CollapsedHead list the warning names

    def _build(self) -> None:
        self.warning_label = plain_label(QLabel())
        self.warning_label.setObjectName("healthCollapseWarning")
        self.warning_label.setAccessibleName("Collapsed heads")
        self.warning_label.setWordWrap(True)
        self.warning_label.setToolTip(COLLAPSE_RULE)
        self.warning_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.warning_label.hide()
        self._layout.addWidget(self.warning_label)
        self.anisotropy_plot = step_plot(self.graphics, 0, "anisotropy")
        self.anisotropy_curves = LayerCurves(self.anisotropy_plot, legend(self.anisotropy_plot, columns=4))
        self.anisotropy_plot.setYRange(0.0, 1.0)
        self.rank_plot = step_plot(self.graphics, 1, "eff. rank")
        self.rank_curves = LayerCurves(self.rank_plot, None)
        self.entropy_plot = step_plot(self.graphics, 2, "entropy")
        self.entropy_curves: list[pg.PlotDataItem] = []
        self.threshold_curve = pg.PlotDataItem(pen=curve_pen(THRESHOLD_COLOUR, width=1.5, dashed=True))
        self.entropy_plot.addItem(self.threshold_curve)
        # the dashed line's name, above its newest end: unnamed, it read as one more head
        self.threshold_label = pg.TextItem("collapsed below", color=THRESHOLD_COLOUR, anchor=(1, 1))
        self.threshold_label.setFont(small_font())
        self.threshold_label.hide()
        self.entropy_plot.addItem(self.threshold_label, ignoreBounds=True)
        self.step_plots = [self.anisotropy_plot, self.rank_plot, self.entropy_plot]

    def _draw_records(self, timeline: AnalysisTimeline) -> None:
        steps = timeline.step_array()
        self.anisotropy_curves.show(steps, timeline.health("anisotropy"))
        rank = timeline.health("effective_rank")
        self.rank_curves.show(steps, rank)
        finite = rank[np.isfinite(rank)]
        if finite.size:
            self.rank_plot.setYRange(0.0, float(finite.max()) * 1.1, padding=0)
        self._draw_entropy(timeline, steps)
        self._draw_warning(timeline)

    def _draw_entropy(self, timeline: AnalysisTimeline, steps: np.ndarray) -> None:
        entropy = timeline.attention_entropy()  # (S, L, H)
        num_layers, num_heads = entropy.shape[1:] if entropy.ndim == 3 else (0, 0)
        if len(self.entropy_curves) != num_layers * num_heads:
            for curve in self.entropy_curves:
                self.entropy_plot.removeItem(curve)
            colours = layer_colours(num_layers + 1)[1:]  # the layer's colour in the plots with the embeddings first
            self.entropy_curves = []
            for layer in range(num_layers):
                for _head in range(num_heads):
                    curve = pg.PlotDataItem(pen=curve_pen(colours[layer], width=1.0))
                    self.entropy_plot.addItem(curve)
                    self.entropy_curves.append(curve)
        for number, curve in enumerate(self.entropy_curves):
            values = entropy[:, number // num_heads, number % num_heads]
            known = np.isfinite(values)
            curve.setData(steps[known], values[known])
        thresholds = timeline.collapse_thresholds()
        known = np.isfinite(thresholds)
        self.threshold_curve.setData(steps[known], thresholds[known])
        self.threshold_label.setVisible(bool(known.any()))
        if known.any():
            self.threshold_label.setPos(float(steps[known][-1]), float(thresholds[known][-1]))
        finite = entropy[np.isfinite(entropy)]
        self.entropy_plot.setYRange(0.0, max(1.0, float(finite.max()) * 1.05) if finite.size else 4.0, padding=0)

    def _draw_warning(self, timeline: AnalysisTimeline) -> None:
        self.collapsed = timeline.collapsed_heads()
        if not self.collapsed:
            self.warning_label.setStyleSheet("")
            self.warning_label.setText("No head has collapsed." if len(timeline) else "")
            self.warning_label.setVisible(len(timeline) > 0)
            return
        total = timeline.shape[0] * timeline.shape[1]
        named = ", ".join(f"{head.name} ({head.entropy:.3f} nats, since step {head.since_step:,})"
                          for head in self.collapsed[:NAMED_HEADS])
        more = len(self.collapsed) - NAMED_HEADS
        count = len(self.collapsed)
        self.warning_label.setStyleSheet(WARNING_STYLE)
        self.warning_label.setText(
            f"⚠ {count} of {total} heads {'has' if count == 1 else 'have'} collapsed (attention entropy under "
            f"{self.collapsed[0].threshold:.3f} nats: nearly all of each row on one key): {named}"
            + (f" and {more} more" if more > 0 else "") + ".")
        self.warning_label.setVisible(True)

    def _draw_step(self, timeline: AnalysisTimeline, index: int | None) -> None:
        if index is None:
            self.caption.setText(self.EMPTY_TEXT)
            return
        step = timeline.steps[index]
        where = f"Step {step:,}" if self.step in (None, step) else \
            f"Step {self.step:,} (record of step {step:,}, the nearest)"
        parts = []
        for key, name, digits in (("anisotropy", "anisotropy", 3), ("effective_rank", "effective rank", 1)):
            values = timeline.health(key)[index]
            if np.isfinite(values).any():
                parts.append(f"{name} {values[0]:.{digits}f} ({layer_name(0)}) … {values[-1]:.{digits}f} "
                             f"({layer_name(len(values) - 1)})")
        entropy = timeline.attention_entropy()[index]
        if np.isfinite(entropy).any():
            layer, head = np.unravel_index(int(np.nanargmin(entropy)), entropy.shape)
            parts.append(f"lowest attention entropy {head_name(layer, head)} {entropy[layer, head]:.3f} nats")
        tokens = (timeline.records[index].get("health") or {}).get("tokens")
        over = f" over {tokens:,} tokens" if isinstance(tokens, int) else ""
        self.caption.setText(f"{where}{over}: " + "; ".join(parts) + "." if parts else f"{where}: no health figures.")
