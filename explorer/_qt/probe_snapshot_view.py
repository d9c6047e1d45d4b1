"""A small attention view of one probe snapshot: one head of the selected pair, plus its NSP / MLM read-out.

The Train tab's bottom right. It renders the `bertcore.inspection` result it is given; the TrainingPanel
decides which snapshot and pair that is. Token labels use the inspector's `TokenAxis`, which thins them
to every n-th one when they would overlap.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from explorer._qt.head_views import TokenAxis


class SnapshotView(QWidget):
    """One head of the selected probe pair at the selected snapshot, plus its NSP / MLM read-out."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("w")
        self.graphics.setMinimumSize(300, 260)
        self.left_axis = TokenAxis("left")  # queries, one per row; keys are the columns
        self.bottom_axis = TokenAxis("bottom")
        self.plot = self.graphics.addPlot(axisItems={"left": self.left_axis, "bottom": self.bottom_axis})
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.hideButtons()
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(pg.colormap.get("viridis").getLookupTable(nPts=256))
        # Fixed levels on √probability: heads and steps stay comparable, and near-uniform rows stay visible.
        self.image.setLevels((0.0, 1.0))
        self.plot.addItem(self.image)
        for side in ("left", "bottom"):
            self.plot.hideAxis(side)  # until there is a snapshot to label
        self.plot.setTitle("no probe snapshot yet", size="9pt")
        self.layer_spin = QSpinBox()
        self.layer_spin.setObjectName("probeLayerSpin")
        self.layer_spin.setPrefix("layer ")
        self.head_spin = QSpinBox()
        self.head_spin.setObjectName("probeHeadSpin")
        self.head_spin.setPrefix("head ")
        self.readout = QLabel("no probe snapshot yet")
        self.readout.setObjectName("probeReadout")
        self.readout.setWordWrap(True)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.controls = QWidget()
        column = QVBoxLayout(self.controls)
        column.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.layer_spin)
        row.addWidget(self.head_spin)
        row.addStretch(1)
        column.addLayout(row)
        column.addWidget(self.readout)
        column.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.graphics, 1)
        self._inspection = None
        self._labelled_tokens: list[str] = []
        self.layer_spin.valueChanged.connect(self._draw)
        self.head_spin.valueChanged.connect(self._draw)

    def show_inspection(self, inspection: Any, caption: str) -> None:
        if self._inspection is None:
            for side in ("left", "bottom"):
                self.plot.showAxis(side)
        self._inspection = inspection
        self.layer_spin.setRange(0, inspection.num_layers - 1)
        self.head_spin.setRange(0, inspection.num_heads - 1)
        self._draw()
        parts = [caption]
        if inspection.is_next_probability is not None:
            parts.append(f"P(B follows A) = {inspection.is_next_probability:.2f}")
        for prediction in inspection.predictions[:3]:
            guess = prediction.top_tokens[0] if prediction.top_tokens else "?"
            probability = float(prediction.top_probabilities[0]) if len(prediction.top_probabilities) else 0.0
            parts.append(f"{prediction.original_token} → {guess} ({probability:.2f})")
        self.readout.setText("  ·  ".join(parts))

    def _draw(self) -> None:
        inspection = self._inspection
        if inspection is None:
            return
        matrix = inspection.attentions[self.layer_spin.value(), self.head_spin.value()]  # (T, T) query × key
        self.image.setImage(np.sqrt(matrix), autoLevels=False)
        tokens = list(inspection.input_tokens)
        if tokens != self._labelled_tokens:
            # Every label when there is room, else every n-th one: they never overlap.
            self.left_axis.set_labels(tokens)
            self.bottom_axis.set_labels(tokens)
            self._labelled_tokens = tokens
        self.plot.setTitle(f"layer {self.layer_spin.value()} head {self.head_spin.value()} "
                           f"(colour: √attention)", size="9pt")

    def current_matrix(self) -> np.ndarray | None:
        """The attention probabilities drawn now (T, T), or None."""
        if self._inspection is None:
            return None
        return self._inspection.attentions[self.layer_spin.value(), self.head_spin.value()]

