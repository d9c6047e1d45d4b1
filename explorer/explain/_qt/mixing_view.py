"""Context mixing beside raw attention (objectName `mixingView`): four query × key maps of one layer, one scale.

Top row: the chosen measure (value norms, GlobEnc or ALTI) at the layer, and rolled out through the layers below
it; bottom row: raw attention (mean of the heads) and attention rollout (Abnar & Zuidema 2020). Every row of every
map is shown as shares summing to 1 (`explorer.explain.state.mixing_share`), and the four share one colour scale,
so a cell that is brighter in the mixing map than in the attention map really carries more of the row. The scale is
a square root up to the 99th percentile of the four maps' cells (named on the bar; above it the colour saturates):
at 500 tokens most shares are tiny, and a linear map up to the largest one shows only a few cells. The layer spin
box (layers 1..L, as the Inspect tab counts them; `layerChosen` carries the 0-based index) and the method combo ask
the tab (`layerChosen`, `methodChosen`); the hover line names the cell.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from explorer.common._qt.heatmap_style import colour_lookup, make_scale_bar, show_scale
from explorer.common._qt.line_label import ElidedLabel
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import CAPTION_STYLE, let_title_overflow, show_title, style_canvas, style_plot
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.token_axis import TokenAxis
from explorer.common._qt.widget_names import named
from explorer.common.attention_math import colour_gamma

MIXING_NAMES = {"value_norm": "value norms (Kobayashi et al. 2020)", "globenc": "GlobEnc (Modarressi et al. 2022)",
                "alti": "ALTI (Ferrando et al. 2022)", "attention": "raw attention only"}
SLOTS = 4
TOP_PERCENTILE = 99.0  # the house "p99" scale: attention sinks ([CLS], [SEP]) fill whole columns


class MixingView(QWidget):
    layerChosen = Signal(int)
    methodChosen = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("mixingView")
        self.setAccessibleName("Context mixing and attention")
        self.method_combo = named(QComboBox(), "mixingMethodCombo", "context mixing measure")
        for key, text in MIXING_NAMES.items():
            self.method_combo.addItem(text, key)
        self.layer_spin = named(QSpinBox(), "mixingLayerSpin", "layer", "The layer the four maps show")
        self.layer_spin.setPrefix("layer ")
        self.method_combo.currentIndexChanged.connect(
            lambda _: self.methodChosen.emit(self.method_combo.currentData()))
        self.layer_spin.valueChanged.connect(lambda shown: self.layerChosen.emit(shown - 1))
        self.canvas = pg.GraphicsLayoutWidget()
        style_canvas(self.canvas)
        self.plots: list[pg.PlotItem] = []
        self.images: list[pg.ImageItem] = []
        self.axes: list[tuple[TokenAxis, TokenAxis]] = []
        for slot in range(SLOTS):
            left, bottom = TokenAxis("left"), TokenAxis("bottom")
            plot = self.canvas.addPlot(row=slot // 2, col=slot % 2, axisItems={"left": left, "bottom": bottom})
            style_plot(plot, mouse=True)
            let_title_overflow(plot)  # four titles wider than their maps kept the colour bar out of sight
            plot.invertY(True)
            plot.setAspectLocked(True)
            image = pg.ImageItem(axisOrder="row-major")
            image.setLookupTable(colour_lookup())
            plot.addItem(image)
            self.plots.append(plot)
            self.images.append(image)
            self.axes.append((left, bottom))
        self.bar = make_scale_bar()
        self.canvas.addItem(self.bar, row=0, col=2, rowspan=2)
        self.hover_label = named(ElidedLabel(" "), "mixingHover", "the cell under the mouse")  # never wider
        self.note = plain_label(named(QLabel(), "mixingNote", "what the maps show"))
        self.note.setWordWrap(True)
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Measure:"))
        controls.addWidget(self.method_combo)
        controls.addWidget(self.layer_spin)
        controls.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(controls)
        layout.addWidget(self.canvas, 1)
        layout.addWidget(self.hover_label)
        layout.addWidget(self.note)
        self.tokens: list[str] = []
        self.maps: list[tuple[str, str, np.ndarray]] = []
        self.levels = (0.0, 1.0)
        self.canvas.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.show_maps([], [], 0, 1, "No context mixing yet: click an output in the Inspect tab.")

    def set_choices(self, method: str, layer: int, num_layers: int) -> None:
        """The combo and the spin box as the state has them (without asking the tab back). `layer` is 0-based;
        the spin box shows layers 1..L, as the Inspect tab counts them."""
        with blocked(self.method_combo, self.layer_spin):
            self.method_combo.setCurrentIndex(max(0, self.method_combo.findData(method)))
            self.layer_spin.setRange(1, max(1, num_layers))
            self.layer_spin.setValue(layer + 1)

    def show_maps(self, tokens: list[str], maps: list[tuple[str, str, np.ndarray]], layer: int, num_layers: int,
                  note: str = "") -> None:
        """`maps` from `explorer.explain.state.mixing_maps`; the levels are 0 … the 99th percentile of the four."""
        self.tokens, self.maps = list(tokens), list(maps)
        top = max((float(np.percentile(matrix, TOP_PERCENTILE)) for _, _, matrix in maps if matrix.size), default=1.0)
        self.levels = (0.0, top if top > 0 else 1.0)
        for slot, (plot, image) in enumerate(zip(self.plots, self.images, strict=True)):
            left, bottom = self.axes[slot]
            if slot < len(maps):
                _, title, matrix = maps[slot]
                fractions = np.clip(matrix / self.levels[1], 0.0, 1.0)
                image.setImage(fractions ** colour_gamma("sqrt"), levels=(0, 1), autoLevels=False)
                image.setVisible(True)
                show_title(plot, title)
                left.set_labels(self.tokens)
                bottom.set_labels(self.tokens)
                plot.setRange(xRange=(0, len(tokens)), yRange=(0, len(tokens)), padding=0)
            else:
                image.setVisible(False)
                show_title(plot, "")
        show_scale(self.bar, "sqrt", self.levels)
        self.bar.getAxis("left").setLabel(f"√ scale, 0 … {self.levels[1]:.3g} (99th pct)",
                                          **CAPTION_STYLE)
        self.note.setText(note or ("Each row is a query position at this layer, each column a key it mixes in, as a "
                                   "share of the row; the four maps share one colour scale. Rollout multiplies "
                                   "the layers up with the residual, so it says where a position's representation "
                                   "came from in the input."))

    def _on_mouse_moved(self, point) -> None:
        for slot, plot in enumerate(self.plots):
            if slot >= len(self.maps) or not plot.sceneBoundingRect().contains(point):
                continue
            where = plot.vb.mapSceneToView(point)
            row, column = int(np.floor(where.y())), int(np.floor(where.x()))
            matrix = self.maps[slot][2]
            if 0 <= row < matrix.shape[0] and 0 <= column < matrix.shape[1]:
                self.hover_label.setText(
                    f"{self.maps[slot][1]}: query {row} {self.tokens[row]!r} ← key {column} "
                    f"{self.tokens[column]!r}: {float(matrix[row, column]):.4f} of the row")
            return

    def image_data(self, slot: int) -> np.ndarray | None:
        """The matrix a map shows (tests)."""
        image = self.images[slot]
        if not image.isVisible():
            return None
        return self.levels[1] * image.image ** (1 / colour_gamma("sqrt"))
