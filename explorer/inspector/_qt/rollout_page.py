"""The attention panel's Rollout tab: the rollout view, the choice of the layer it runs through, and the rollout
(Abnar & Zuidema 2020) itself, computed once per head mask."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

import explorer.common.attention_math as attention_math
from explorer.common._qt.widget_names import named
from explorer.inspector._qt.token_heatmap import TokenHeatmap

ROLLOUT_CHOICES = ("through the current layer", "through the last layer")


class RolloutPage(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.view = named(TokenHeatmap("", "rollout"), "rolloutView", "attention rollout")
        self.combo = named(QComboBox(), "rolloutLayerCombo", "rollout through")
        self.combo.addItems(ROLLOUT_CHOICES)
        self.combo.setToolTip("Roll the attention out through the layer shown, or through every layer")
        self._rollout: np.ndarray | None = None  # (L, T, T), under the head mask self._rollout_mask
        self._rollout_mask: bytes = b""

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("Attention rollout (Abnar & Zuidema 2020), mean over the heads that are on,"))
        row.addWidget(self.combo)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)

    def through_layer(self, current_layer: int, num_layers: int) -> int:
        """The layer the rollout runs through: the panel's current one, or the last of `num_layers`."""
        return num_layers - 1 if self.combo.currentIndex() == 1 else current_layer

    def rollout(self, attentions: np.ndarray, head_mask: np.ndarray) -> np.ndarray:
        """(L, T, T) rollout of `attentions` (L, H, T, T) under `head_mask` (L, H); computed again only for another
        head mask (`forget` when the attentions change)."""
        key = head_mask.tobytes()
        if self._rollout is None or key != self._rollout_mask:
            self._rollout = attention_math.compute_rollout(attentions, head_mask)
            self._rollout_mask = key
        return self._rollout

    def cached_rollout(self, head_mask: np.ndarray) -> np.ndarray | None:
        """The rollout kept for `head_mask`, or None when there is none (it is not computed here)."""
        return self._rollout if self._rollout is not None and head_mask.tobytes() == self._rollout_mask else None

    def forget(self) -> None:
        """Drops the rollout kept for the previous attentions."""
        self._rollout, self._rollout_mask = None, b""

    def show_rollout(self, picture, view: attention_math.LayerView, layer: int, head_mask: np.ndarray,
                     highlighted: tuple[int, int]) -> None:
        """Shows `picture`, the rollout through `layer` drawn for `view`'s tokens, titled with the heads on."""
        num_layers, num_heads = head_mask.shape
        heads_on = int(head_mask[: layer + 1].sum())
        self.view.set_title(f"Rollout through layer {layer + 1} / {num_layers} "
                            f"({heads_on} of {(layer + 1) * num_heads} heads on)")
        self.view.show_picture(picture, view.tokens, view.positions, view.options.colour_scale,
                               piece_style=view.piece_style)
        self.view.highlight_position(*highlighted)
