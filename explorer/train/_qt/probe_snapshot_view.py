"""A small attention view of one probe snapshot: one head of the selected pair, plus its NSP / MLM read-out.

The Train tab's bottom right. It renders the `bertcore.analysis.inspection` result it is given; the TrainingPanel
decides which snapshot and pair that is. The head is the inspector's `TokenHeatmap` (thinned token labels,
the hovered token named, a colour bar) with the inspector's default colour scale, so a long probe pair
shows its structure too (a fixed 0 … 1 scale painted a 512-token pair one dark level); the colour bar
gives each snapshot's top value. Layers and heads are numbered from 1, as in the Inspect tab.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from explorer.common._qt.plain_text import plain_label
from explorer.common.attention_math import DEFAULT_COLOUR_SCALE, colour_levels
from explorer.inspector._qt.token_heatmap import TokenHeatmap

NO_SNAPSHOT = "no probe snapshot yet"


class SnapshotView(QWidget):
    """One head of the selected probe pair at the selected snapshot, plus its NSP / MLM read-out."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.heatmap = TokenHeatmap(NO_SNAPSHOT, "attention")
        self.heatmap.setObjectName("probeHeatmap")
        self.heatmap.setMinimumSize(300, 260)
        self.layer_spin = QSpinBox()
        self.layer_spin.setObjectName("probeLayerSpin")
        self.layer_spin.setPrefix("layer ")
        self.layer_spin.setRange(1, 1)
        self.layer_spin.setToolTip("The layer of the head shown (1 = the first)")
        self.head_spin = QSpinBox()
        self.head_spin.setObjectName("probeHeadSpin")
        self.head_spin.setPrefix("head ")
        self.head_spin.setRange(1, 1)
        self.head_spin.setToolTip("The head shown (1 = the first)")
        self.readout = plain_label(QLabel(NO_SNAPSHOT))
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
        layout.addWidget(self.heatmap, 1)
        self._inspection = None
        self.layer_spin.valueChanged.connect(self._draw)
        self.head_spin.valueChanged.connect(self._draw)

    @property
    def graphics(self):
        return self.heatmap.graphics

    def show_inspection(self, inspection: Any, caption: str) -> None:
        self._inspection = inspection
        self.layer_spin.setRange(1, inspection.num_layers)
        self.head_spin.setRange(1, inspection.num_heads)
        self._draw()
        parts = [caption]
        if inspection.is_next_probability is not None and 1 in inspection.encoding.sequence_ids:
            parts.append(f"P(B follows A) = {inspection.is_next_probability:.2f}")
        for prediction in inspection.predictions[:3]:
            guess = prediction.top_tokens[0] if prediction.top_tokens else "?"
            probability = float(prediction.top_probabilities[0]) if len(prediction.top_probabilities) else 0.0
            parts.append(f"{prediction.original_token} → {guess} ({probability:.2f})")
        self.readout.setText("  ·  ".join(parts))

    def clear(self, title: str, note: str | None = None) -> None:
        """Show no snapshot, only a short `title` over the empty heatmap and `note` (default: the title) below it
        (a new run, a pair not probed yet): nothing of another run or pair stays."""
        self._inspection = None
        self.heatmap.clear()
        self.heatmap.set_title(title)
        self.readout.setText(note or title)

    def _draw(self) -> None:
        inspection = self._inspection
        if inspection is None:
            return
        layer, head = self.layer_spin.value() - 1, self.head_spin.value() - 1
        matrix = inspection.attentions[layer, head]  # (T, T) query × key
        tokens = list(inspection.input_tokens)
        levels = colour_levels(matrix, DEFAULT_COLOUR_SCALE)
        self.heatmap.set_matrix(matrix, tokens, np.arange(len(tokens)), levels, DEFAULT_COLOUR_SCALE)
        self.heatmap.set_title(f"Layer {layer + 1} · head {head + 1}")

    def current_matrix(self) -> np.ndarray | None:
        """The attention probabilities drawn now (T, T), or None."""
        if self._inspection is None:
            return None
        return self._inspection.attentions[self.layer_spin.value() - 1, self.head_spin.value() - 1]
