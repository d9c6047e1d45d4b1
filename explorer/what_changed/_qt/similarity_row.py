"""`layerSimilarityRow`: how alike A's and B's representations are, layer by layer (linear CKA).

One row of cells, the embeddings first, then each layer: Kornblith et al.'s (2019) linear CKA between the two
checkpoints' word vectors at that layer (bertcore.representation_similarity, over the words of the shipped treebank's
first sentences, each word the mean of its pieces). 1 = the same representation up to a rotation and a scale;
lower = the layer changed. The value is written in each cell, on a fixed 0–1 scale so that two comparisons read
alike; the line beside it says what it was computed on, or why there is none (models with different numbers of
layers).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from explorer.common._qt.cell_numbers import CellNumbers
from explorer.common._qt.heatmap_style import colour_lookup
from explorer.common._qt.picture_item import PictureItem
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import style_canvas, style_plot
from explorer.common.attention_math import to_rgba

LEVELS = (0.0, 1.0)
BRIGHT_FRACTION = 0.62  # above this fraction of the scale the colour map is light: dark ink
MISSING_RGBA = (225, 225, 225, 255)  # a layer without a CKA (no variance on one side)
ROW_HEIGHT = 64  # pixels: the row's canvas, ticks included
TIP = ("Linear CKA (Kornblith et al. 2019) between A's and B's word vectors at each layer, over the words of the "
       "shipped treebank's first sentences (each word the mean of its pieces): 1 = the same representation up to a "
       "rotation and a scale; lower = the layer changed.")


class LayerSimilarityRow(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("layerSimilarityRow")
        self.setAccessibleName("representation similarity per layer")
        self.setToolTip(TIP)
        self.values = np.zeros(0)
        self.title = plain_label(QLabel("Representation similarity per layer, A vs B: linear CKA (1 = alike)"))
        self.note = plain_label(QLabel(" "))
        self.note.setObjectName("layerSimilarityNote")
        self.note.setWordWrap(True)
        self.note.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.graphics = pg.GraphicsLayoutWidget()
        style_canvas(self.graphics)
        self.graphics.setFixedHeight(ROW_HEIGHT)
        self.graphics.ci.setContentsMargins(2, 2, 2, 2)
        self.plot = style_plot(self.graphics.addPlot(), mouse=False)
        self.plot.hideAxis("left")
        self.picture = PictureItem()
        self.plot.addItem(self.picture)
        self.numbers = CellNumbers()
        self.numbers.setZValue(5)
        self.plot.addItem(self.numbers, ignoreBounds=True)
        heading = QHBoxLayout()
        heading.addWidget(self.title)
        heading.addWidget(self.note, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(heading)
        layout.addWidget(self.graphics)
        self.clear()

    def show_similarity(self, similarity, note: str = "") -> None:
        """A `bertcore.analysis.similarity.RepresentationSimilarity`, or None with the reason there is none."""
        if similarity is None:
            self.clear(f"None: {note}" if note else " ")
            return
        values = np.asarray(similarity.cka, np.float64)
        self.values = values
        known = np.isfinite(values)
        picture = to_rgba(np.nan_to_num(values, nan=0.0)[None, :], LEVELS, colour_lookup())
        picture[0, ~known] = MISSING_RGBA
        self.picture.set_picture(picture, QRectF(0, 0, len(values), 1))
        # three decimals, or five when every layer is that close to 1 (a nudge of the attention alone): "1.000"
        # everywhere would hide which layer moved
        decimals = 3 if not known.any() or np.nanmin(values) < 0.999 else 5
        texts = [[f"{value:.{decimals}f}" if np.isfinite(value) else "—" for value in values]]
        self.numbers.set_cells(texts, (np.nan_to_num(values) > BRIGHT_FRACTION)[None, :] | ~known[None, :])
        names = ["emb"] + [str(layer) for layer in range(1, len(values))]
        self.plot.getAxis("bottom").setTicks([[(index + 0.5, name) for index, name in enumerate(names)]])
        self.plot.vb.setRange(xRange=(0, len(values)), yRange=(0, 1), padding=0)
        lowest = int(np.nanargmin(values)) if known.any() else None
        where = (f"; least alike: {'the embeddings' if lowest == 0 else f'layer {lowest}'} "
                 f"({values[lowest]:.{decimals}f})"
                 if lowest is not None else "")
        self.note.setText(f"over {similarity.num_words:,} words of {similarity.num_sentences:,} treebank "
                          f"sentences{where}")

    def clear(self, note: str = " ") -> None:
        self.values = np.zeros(0)
        self.picture.clear()
        self.numbers.set_cells([], np.zeros((0, 0), bool))
        self.plot.getAxis("bottom").setTicks([[]])
        self.note.setText(note)

    def cell_text(self, layer: int) -> str:
        """The number written in cell `layer` (0: the embeddings), for tests."""
        return self.numbers.text(0, layer)

