"""`syntaxTimeline`: heads tracking dependency syntax over a run's steps, under the loss curves on their step axis.

Top: the best head's UAS at each analysis record (Clark et al. 2019's score, as Chen et al. 2024 track it: the share
of words whose gold head the head's strongest attention finds, in the better of its two directions), the best of
Clark's offset baselines as a dashed line (a head must beat "the next word is the head" to track syntax rather than
position), and the structure onset marked (the rule: explorer.train.analysis_timeline.ONSET_RULE, in the caption's
tooltip). Below: every head's UAS over the steps, heads grouped by layer (layer 1 at the top), one column per record
reaching halfway to its neighbours, on one colour scale from 0 to the run's highest UAS. The marker follows the step
slider; the caption says the record nearest to it.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy

from explorer.common._qt.heatmap_style import color_map, colour_lookup
from explorer.common._qt.picture_item import PictureItem
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import CAPTION_STYLE, curve_pen, small_font
from explorer.common.attention_math import to_rgba
from explorer.train._qt.timeline_plots import (
    BASELINE_COLOUR,
    ONSET_COLOUR,
    TimelineView,
    legend,
    step_plot,
)
from explorer.train.analysis_timeline import ONSET_RULE, AnalysisTimeline, head_name

# bertcore.analysis.syntax.OFFSET_NAMES, by the record's keys
OFFSET_WORDS = {"-3": "three words back", "-2": "two words back", "-1": "the previous word", "+1": "the next word",
                "+2": "two words on", "+3": "three words on"}
DIRECTION_WORDS = ("dependent → head", "head → dependent")  # bertcore.analysis.syntax.DIRECTIONS, short
MAX_COLUMNS = 2048  # the heatmap's picture: columns of equal width, each showing the record whose span it is in
MISSING_RGBA = (225, 225, 225, 255)  # a head a record did not score
SCALE_BAR_WIDTH = 260  # pixels


class SyntaxTimeline(TimelineView):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("syntaxTimeline")
        self.setAccessibleName("Syntax in the heads over the run")
        self.caption.setObjectName("syntaxTimelineCaption")
        self.caption.setToolTip(ONSET_RULE)
        self.onset = None  # the StructureOnset drawn
        self.heatmap_values = np.zeros((0, 0))  # (L × H, S) what the heatmap shows: UAS, rows layer-major
        self.levels = (0.0, 1.0)

    def _build(self) -> None:
        self.uas_plot = step_plot(self.graphics, 0, "best head UAS")
        self.uas_plot.setYRange(0.0, 0.5)
        self.uas_legend = legend(self.uas_plot, columns=3)
        self.best_curve = pg.PlotDataItem(pen=curve_pen("#1f77b4", width=2), symbol="o", symbolSize=5,
                                          symbolBrush="#1f77b4", symbolPen=None, name="best head")
        self.uas_plot.addItem(self.best_curve)
        self.baseline_curve = pg.PlotDataItem(pen=curve_pen(BASELINE_COLOUR, dashed=True), name="offset baseline")
        self.uas_plot.addItem(self.baseline_curve)
        self.onset_line = pg.InfiniteLine(angle=90, movable=False, pen=curve_pen(ONSET_COLOUR, width=2, dashed=True),
                                          label="onset", labelOpts={"position": 0.9, "color": ONSET_COLOUR,
                                                                    "anchors": [(0, 0), (0, 0)]})
        self.onset_line.setVisible(False)
        self.uas_plot.addItem(self.onset_line, ignoreBounds=True)
        self.chosen_dot = pg.ScatterPlotItem(size=10, brush=None, pen=pg.mkPen("#d62728", width=2))
        self.chosen_dot.setZValue(15)
        self.uas_plot.addItem(self.chosen_dot, ignoreBounds=True)

        self.heat_plot = step_plot(self.graphics, 1, "heads by layer")
        self.heat_plot.invertY(True)
        self.heat_plot.getAxis("left").setStyle(tickLength=0)
        self.picture = PictureItem()
        self.heat_plot.addItem(self.picture)
        self.layer_lines: list[pg.InfiniteLine] = []
        # Below the grid and right-aligned, not beside it: a column beside it would narrow the step axis, which must
        # stand where the loss plots' does.
        self.scale_bar = pg.ColorBarItem(values=(0, 1), colorMap=color_map(), interactive=False, width=10,
                                         orientation="horizontal")
        self.scale_bar.axis.setStyle(tickFont=small_font())
        self.scale_bar.getAxis("top").setLabel("UAS (colour)", **CAPTION_STYLE)
        self.scale_bar.setFixedWidth(SCALE_BAR_WIDTH)
        self.graphics.addItem(self.scale_bar, row=2, col=0)
        self.graphics.ci.layout.setAlignment(self.scale_bar, Qt.AlignmentFlag.AlignRight)
        self.graphics.ci.layout.setRowStretchFactor(0, 2)
        self.graphics.ci.layout.setRowStretchFactor(1, 3)
        self.step_plots = [self.uas_plot, self.heat_plot]

        self.hover_label = plain_label(QLabel(" "))
        self.hover_label.setObjectName("syntaxTimelineHover")
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.graphics.scene().sigMouseMoved.connect(self._on_hover)
        self._layout.addWidget(self.hover_label)

    # ---- the records ----
    def _draw_records(self, timeline: AnalysisTimeline) -> None:
        steps = timeline.step_array()
        best = timeline.best_uas()
        known = np.isfinite(best)
        self.best_curve.setData(steps[known], best[known])
        baseline = timeline.offset_baseline()
        if baseline is not None and len(steps):
            name, value = baseline
            ends = [steps[0], steps[-1]] if steps[-1] > steps[0] else [steps[0] - 0.5, steps[0] + 0.5]
            self.baseline_curve.setData(ends, [value, value])
            self.uas_legend.items[-1][1].setText(f"{name}: {OFFSET_WORDS.get(name, name)} ({value:.3f})")
        else:
            self.baseline_curve.setData([], [])
        top = max([0.1, *(best[known].tolist()), *([baseline[1]] if baseline else [])])
        self.uas_plot.setYRange(0.0, min(1.0, top * 1.4), padding=0)  # the top fifth: room for the key
        self.onset = timeline.onset()
        onset_step = self.onset.step if self.onset is not None else None
        self.onset_line.setVisible(onset_step is not None)
        if onset_step is not None:
            self.onset_line.setValue(onset_step)
        self._draw_heatmap(timeline, steps)

    def _draw_heatmap(self, timeline: AnalysisTimeline, steps: np.ndarray) -> None:
        uas = timeline.uas()  # (S, L, H)
        if not len(steps):
            self.heatmap_values = np.zeros((0, 0))
            self.picture.clear()
            self._set_layer_ticks(0, 0)
            return
        num_layers, num_heads = uas.shape[1:]
        self.heatmap_values = uas.reshape(len(steps), num_layers * num_heads).T  # (L × H, S) layer-major rows
        top = np.nanmax(self.heatmap_values) if np.isfinite(self.heatmap_values).any() else 1.0
        self.levels = (0.0, float(max(top, 0.05)))
        edges = _column_edges(steps)
        columns = _columns_of(edges)
        picture = to_rgba(np.nan_to_num(self.heatmap_values[:, columns], nan=0.0), self.levels, colour_lookup())
        picture[~np.isfinite(self.heatmap_values[:, columns])] = MISSING_RGBA
        self.picture.set_picture(picture, QRectF(edges[0], 0, edges[-1] - edges[0], num_layers * num_heads))
        self.scale_bar.setLevels(self.levels)
        self.heat_plot.setYRange(0, num_layers * num_heads, padding=0)
        self._set_layer_ticks(num_layers, num_heads)

    def _set_layer_ticks(self, num_layers: int, num_heads: int) -> None:
        self.heat_plot.getAxis("left").setTicks([[(layer * num_heads + num_heads / 2, f"L{layer + 1}")
                                                  for layer in range(num_layers)]])
        for line in self.layer_lines:
            self.heat_plot.removeItem(line)
        self.layer_lines = []
        for layer in range(1, num_layers):
            line = pg.InfiniteLine(pos=layer * num_heads, angle=0, movable=False, pen=pg.mkPen("w", width=1))
            self.heat_plot.addItem(line, ignoreBounds=True)
            self.layer_lines.append(line)

    # ---- the chosen step ----
    def _draw_step(self, timeline: AnalysisTimeline, index: int | None) -> None:
        if not len(timeline):
            self.caption.setText(self.EMPTY_TEXT)
            self.chosen_dot.setData([], [])
            return
        onset = self.onset.text if self.onset is not None else "one record: no structure onset to mark yet"
        record = timeline.records[index]
        step = timeline.steps[index]
        best = record.get("best_head") or {}
        lines = [onset[0].upper() + onset[1:] + "."]
        if isinstance(best.get("uas"), (int, float)):
            direction = DIRECTION_WORDS[best["direction"]] if best.get("direction") in (0, 1) else ""
            where = self._where(step)
            lines.append(f"{where}: best head {head_name(best['layer'], best['head'])} UAS {best['uas']:.3f}"
                         f"{f' ({direction})' if direction else ''} over {record.get('words', 0):,} words of "
                         f"{record.get('sentences', 0) - (record.get('skipped_sentences') or 0):,} sentences"
                         f"{' · analysed afterwards' if record.get('post_hoc') else ''}.")
            self.chosen_dot.setData([step], [best["uas"]])
        else:
            self.chosen_dot.setData([], [])
        self.caption.setText("\n".join(lines))

    def _where(self, record_step: int) -> str:
        if self.step is None or self.step == record_step:
            return f"Step {record_step:,}"
        return f"Step {self.step:,} (record of step {record_step:,}, the nearest)"

    # ---- hover ----
    def _on_hover(self, scene_pos: QPointF) -> None:
        text = " "
        timeline = self.timeline
        if timeline is not None and len(timeline) and self.heat_plot.vb.sceneBoundingRect().contains(scene_pos):
            point = self.heat_plot.vb.mapSceneToView(scene_pos)
            row, index = math.floor(point.y()), timeline.nearest(round(point.x()))
            rows = self.heatmap_values.shape[0]
            if 0 <= row < rows and index is not None:
                num_heads = timeline.shape[1]
                value = self.heatmap_values[row, index]
                shown = f"UAS {value:.3f}" if math.isfinite(value) else "not scored"
                text = f"{head_name(row // num_heads, row % num_heads)} at step {timeline.steps[index]:,}: {shown}"
        self.hover_label.setText(text)


def _column_edges(steps: np.ndarray) -> np.ndarray:
    """(S + 1,) where each record's column begins and ends on the step axis: halfway to its neighbours, the first
    and last reaching as far out as in."""
    if len(steps) == 1:
        return np.array([steps[0] - 0.5, steps[0] + 0.5])
    middles = (steps[1:] + steps[:-1]) / 2
    return np.concatenate([[steps[0] - (middles[0] - steps[0])], middles, [steps[-1] + (steps[-1] - middles[-1])]])


def _columns_of(edges: np.ndarray) -> np.ndarray:
    """For equal columns across [edges[0], edges[-1]], the record each shows: records of uneven spans drawn as one
    picture. Columns are fine enough that the narrowest record gets at least two."""
    span = edges[-1] - edges[0]
    narrowest = float(np.diff(edges).min())
    count = int(min(MAX_COLUMNS, max(len(edges) - 1, math.ceil(2 * span / max(narrowest, 1e-9)))))
    centres = edges[0] + (np.arange(count) + 0.5) * span / count
    return np.clip(np.searchsorted(edges, centres, side="right") - 1, 0, len(edges) - 2)
