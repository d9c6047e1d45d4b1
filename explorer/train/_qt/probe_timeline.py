"""`probeTimeline`: what each layer knows over a run's steps, and how the model scores minimal pairs.

Top: the linear probe's test accuracy per layer (embeddings first; Tenney et al. 2019: each layer holds its own
kind of information), with the majority-class baseline dashed. Middle: its selectivity per layer, accuracy minus
the accuracy of the same probe on Hewitt & Liang's (2019) control task, where each word type gets a fixed random
label: a probe that only memorises words scores as well on the control, so only selectivity above 0 says the layer
holds the tags. Bottom: BLiMP accuracy (the share of minimal pairs whose grammatical sentence has the higher
pseudo-log-likelihood) on the records that scored it: a run scores it on every few records, and a model without a
masked-LM head cannot (the reason is shown). The marker follows the step slider; the caption says the record
nearest to it.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import curve_pen
from explorer.train._qt.timeline_plots import (
    BASELINE_COLOUR,
    WARNING_STYLE,
    LayerCurves,
    TimelineView,
    legend,
    step_plot,
)
from explorer.train.analysis_timeline import AnalysisTimeline, layer_name

TASK_NAMES = {"upos": "POS", "xpos": "PTB tag", "deprel": "relation"}  # the probe's task, as a caption names it
BLIMP_COLOUR = "#9467bd"
NO_BLIMP_TEXT = "no record of this run scored BLiMP yet (a run scores it on every 10th record)"


class ProbeTimeline(TimelineView):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("probeTimeline")
        self.setAccessibleName("Probes and BLiMP over the run")
        self.caption.setObjectName("probeTimelineCaption")
        self.caption.setToolTip("A linear probe per layer predicts each word's tag from its vector (the mean of its "
                                "pieces), trained on the record's treebank sentences and tested on others; "
                                "selectivity = accuracy − the control task's accuracy (Hewitt & Liang 2019).")

    def _build(self) -> None:
        self.accuracy_plot = step_plot(self.graphics, 0, "accuracy")
        self.accuracy_legend = legend(self.accuracy_plot, columns=4, left=True)  # accuracy rises: room on the left
        self.accuracy_curves = LayerCurves(self.accuracy_plot, self.accuracy_legend)
        self.majority_curve = pg.PlotDataItem(pen=curve_pen(BASELINE_COLOUR, dashed=True))
        self.accuracy_plot.addItem(self.majority_curve)
        self.accuracy_plot.setYRange(0.0, 1.0)
        self.selectivity_plot = step_plot(self.graphics, 1, "selectivity")
        self.selectivity_curves = LayerCurves(self.selectivity_plot, None)
        zero = pg.InfiniteLine(pos=0, angle=0, movable=False, pen=curve_pen(BASELINE_COLOUR, dotted=True))
        self.selectivity_plot.addItem(zero, ignoreBounds=True)
        self.blimp_plot = step_plot(self.graphics, 2, "BLiMP")
        self.blimp_curve = pg.PlotDataItem(pen=curve_pen(BLIMP_COLOUR, width=1.5), symbol="s", symbolSize=6,
                                           symbolBrush=BLIMP_COLOUR, symbolPen=None)
        self.blimp_plot.addItem(self.blimp_curve)
        chance = pg.InfiniteLine(pos=0.5, angle=0, movable=False, pen=curve_pen(BASELINE_COLOUR, dashed=True),
                                 label="chance", labelOpts={"position": 0.99, "color": BASELINE_COLOUR,
                                                             "anchors": [(1, 0), (1, 0)]})
        self.blimp_plot.addItem(chance, ignoreBounds=True)
        self.blimp_plot.setYRange(0.3, 1.0)
        self.step_plots = [self.accuracy_plot, self.selectivity_plot, self.blimp_plot]
        self.blimp_note = plain_label(QLabel())
        self.blimp_note.setObjectName("probeTimelineBlimpNote")
        self.blimp_note.setWordWrap(True)
        self.blimp_note.setStyleSheet(WARNING_STYLE)
        self.blimp_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.blimp_note.hide()
        self._layout.addWidget(self.blimp_note)

    def _draw_records(self, timeline: AnalysisTimeline) -> None:
        steps = timeline.step_array()
        task = TASK_NAMES.get(timeline.probe_task() or "upos", timeline.probe_task())
        self.accuracy_plot.setLabel("left", f"{task} probe")
        self.accuracy_curves.show(steps, timeline.probe("accuracy"))
        majority = timeline.probe_majority()
        known = np.isfinite(majority)
        self.majority_curve.setData(steps[known], majority[known])
        selectivity = timeline.probe("selectivity")
        self.selectivity_curves.show(steps, selectivity)
        finite = selectivity[np.isfinite(selectivity)]
        low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.5)
        self.selectivity_plot.setYRange(min(0.0, low), max(0.1, high), padding=0.05)
        blimp_steps, blimp = timeline.blimp()
        self.blimp_curve.setData(blimp_steps, blimp)
        reason = timeline.blimp_unavailable()
        if reason:
            self.blimp_note.setText(f"BLiMP: not scored: {reason}.")
        elif len(timeline) and not len(blimp_steps):
            self.blimp_note.setText(f"BLiMP: {NO_BLIMP_TEXT}.")
        self.blimp_note.setVisible(bool(reason) or (len(timeline) > 0 and not len(blimp_steps)))

    def _draw_step(self, timeline: AnalysisTimeline, index: int | None) -> None:
        if index is None:
            self.caption.setText(self.EMPTY_TEXT)
            return
        record, step = timeline.records[index], timeline.steps[index]
        probe = record.get("probe") or {}
        accuracy = timeline.probe("accuracy")[index]
        control = timeline.probe("control_accuracy")[index]
        selectivity = timeline.probe("selectivity")[index]
        where = f"Step {step:,}" if self.step in (None, step) else \
            f"Step {self.step:,} (record of step {step:,}, the nearest)"
        task = TASK_NAMES.get(probe.get("task", "upos"), probe.get("task"))
        if np.isfinite(accuracy).any():
            best = int(np.nanargmax(accuracy))
            majority = probe.get("majority_baseline")
            text = (f"{where}: the {task} probe is best at {layer_name(best)}: accuracy {accuracy[best]:.3f}, control "
                    f"{control[best]:.3f}, selectivity {selectivity[best]:.3f}"
                    + (f" (majority class {majority:.3f})" if isinstance(majority, (int, float)) else "")
                    + f"; {probe.get('test_words', 0):,} test words")
        else:
            text = f"{where}: no probe figures in this record"
        blimp_steps, blimp = timeline.blimp()
        if len(blimp_steps):
            nearest = int(np.argmin(np.abs(blimp_steps - step)))
            text += f" · BLiMP {blimp[nearest]:.3f} (record of step {int(blimp_steps[nearest]):,})"
        self.caption.setText(text + ".")
