"""The "Embeddings" tab: what the embeddings learned (objectName `embeddingView`).

- Learned positions: the cosine similarity of the first P position embeddings, a P × P image (Devlin et al.
  learn them; a trained BERT shows a bright band around the diagonal).
- The two segment embeddings compared, in words and numbers.
- A 2-D PCA of every token's hidden state after the chosen layer, for ~2,000 tokens of corpus sentence pairs:
  one `ScatterPlotItem` fed with `setData` and per-point brushes, so it pans without stutter; hover names the
  token and shows its sentence with the token marked; a click sends that pair to the Inspect tab
  (`WindowTab.inspectPair`). Colour by segment, token kind or task label (when the sample has labels).
- Token neighbours: the k nearest tokens to a token by cosine of the input embeddings.

Everything is computed in one newest-wins worker (`explorer.embeddings.requests.EmbeddingRunner`), only while the tab
is shown, from one request that holds the state of every control.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from explorer.common._qt.exporting import export_button, export_png, export_svg
from explorer.common._qt.plot_style import curve_pen, style_canvas, style_plot
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.common._qt.window_tab import WindowTab
from explorer.common._qt.workers import LatestJobWorker
from explorer.common.export_data import _replace_atomically
from explorer.embeddings.requests import (
    COLOUR_BY,
    DEFAULT_POINTS,
    EmbeddingRequest,
    EmbeddingResult,
    EmbeddingRunner,
    describe_segments,
    marked_sentence,
)

CATEGORY_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                    "#bcbd22", "#17becf")
KIND_COLOURS = {"special": "#7f7f7f", "word": "#1f77b4", "subword": "#2ca02c", "punctuation": "#d62728"}
SEGMENT_NAMES = {0: "sentence A", 1: "sentence B"}
POINT_SIZE = 6
HOVER_RADIUS_PX = 8
DEFAULT_POSITIONS = 128
WORKER_NICENESS = 5


class EmbeddingView(WindowTab):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("embeddingView")
        self.setAccessibleName("Embeddings")
        self.model = None
        self.tokenizer = None
        self.result: EmbeddingResult | None = None
        self.colours: list[str] = []  # (N,) the colour of each point, as drawn
        self.hovered_index = -1
        self._request_id = 0
        self._dirty = True  # the model or a control changed while the tab was hidden
        self.worker = LatestJobWorker(EmbeddingRunner(), name="embeddingThread", torch_threads=1,
                                      niceness=WORKER_NICENESS, drop_superseded=True)
        self.worker.done.connect(self._on_computed)
        self.worker.failed.connect(self._on_failed)

        # controls
        self.layer_combo = named(QComboBox(), "embeddingLayerCombo", "layer",
                                  "The hidden states projected: the embeddings output, or after a layer")
        self.colour_combo = named(QComboBox(), "embeddingColourCombo", "colour points by")
        for key, text in COLOUR_BY.items():
            self.colour_combo.addItem(text, key)
        self.points_spin = named(QSpinBox(), "embeddingPointsSpin", "points",
                                  "Token positions projected (sentence pairs of the built-in corpus, in order)")
        self.points_spin.setRange(100, 20_000)
        self.points_spin.setSingleStep(500)
        self.points_spin.setValue(DEFAULT_POINTS)
        self.points_spin.setSuffix(" points")
        self.special_check = named(QCheckBox("[CLS] / [SEP]"), "embeddingSpecialCheck", "include special tokens",
                                    "Include [CLS] and [SEP]: their vectors often stand far from the rest")
        self.special_check.setChecked(True)
        self.export_button = export_button(self, "embeddingExportButton", [
            ("Projection as PNG…", "projection.png", lambda path: export_png(self.scatter_plot, path)),
            ("Projection as SVG…", "projection.svg",
             lambda path: export_svg(self.scatter_plot, path, title="bert-explorer projection")),
            ("Position similarity as PNG…", "position-similarity.png",
             lambda path: export_png(self.positions_plot, path)),
            ("Projection points as CSV…", "projection.csv", self.write_csv),
            ("Arrays as NPZ…", "embeddings.npz", self.write_npz)])
        self.status_label = named(QLabel("Open a model to see its embeddings."), "embeddingStatus",
                                   "embeddings status")
        self.status_label.setWordWrap(True)

        # positions
        self.positions_spin = named(QSpinBox(), "positionCountSpin", "positions shown",
                                     "The first n learned position embeddings")
        self.positions_spin.setRange(2, 512)
        self.positions_spin.setValue(DEFAULT_POSITIONS)
        self.positions_plot = pg.PlotWidget()
        self.positions_plot.setObjectName("positionSimilarityPlot")
        style_canvas(self.positions_plot)
        style_plot(self.positions_plot.getPlotItem(), x_label="position", y_label="position", auto_range_button=True)
        self.positions_plot.setAspectLocked(True)
        self.positions_plot.invertY(True)
        self.positions_image = pg.ImageItem(axisOrder="row-major")
        diverging = pg.colormap.get("CET-D1")
        self.positions_image.setColorMap(diverging)
        self.positions_plot.addItem(self.positions_image)
        self.positions_bar = pg.ColorBarItem(values=(-1, 1), colorMap=diverging, interactive=False, width=12,
                                             label="cosine")
        self.positions_bar.setImageItem(self.positions_image, insert_in=self.positions_plot.getPlotItem())
        self.positions_hover = QLabel(" ")
        self.positions_hover.setObjectName("positionHoverLabel")
        self.segments_label = named(QLabel(" "), "segmentComparisonLabel", "segment embeddings compared")
        self.segments_label.setWordWrap(True)

        # neighbours
        self.neighbour_edit = named(QLineEdit(), "neighbourTokenEdit", "token",
                                     "A token of the vocabulary (e.g. king, ##ing, [SEP])")
        self.neighbour_edit.setPlaceholderText("a token, e.g. king")
        self.neighbour_count = named(QSpinBox(), "neighbourCountSpin", "neighbours")
        self.neighbour_count.setRange(1, 100)
        self.neighbour_count.setValue(10)
        self.neighbour_button = named(QPushButton("Nearest"), "neighbourButton", "find nearest tokens")
        self.neighbour_list = named(QListWidget(), "neighbourList", "nearest tokens")

        # projection
        self.scatter_plot = pg.PlotWidget()
        self.scatter_plot.setObjectName("projectionPlot")
        style_canvas(self.scatter_plot)
        style_plot(self.scatter_plot.getPlotItem(), auto_range_button=True)
        self.scatter = pg.ScatterPlotItem(size=POINT_SIZE, pen=None, pxMode=True)
        self.scatter_plot.addItem(self.scatter)
        self.hover_marker = pg.ScatterPlotItem(size=POINT_SIZE + 8, pen=curve_pen("k", width=2), brush=None)
        self.hover_marker.setZValue(10)
        self.scatter_plot.addItem(self.hover_marker, ignoreBounds=True)
        self.legend_label = named(QLabel(" "), "projectionLegend", "projection legend")
        self.projection_hover = named(QLabel(" "), "projectionHoverLabel", "point under the mouse")
        self.projection_hover.setWordWrap(True)
        self.projection_hover.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.projection_hover.setMinimumHeight(2 * self.fontMetrics().height() + 6)

        # layout
        top = QHBoxLayout()
        for widget in (QLabel("Project"), self.layer_combo, QLabel("colour by"), self.colour_combo, self.points_spin,
                       self.special_check):
            top.addWidget(widget)
        top.addStretch(1)
        top.addWidget(self.export_button)
        positions_box = QGroupBox("Learned position embeddings: cosine similarity")
        positions_layout = QVBoxLayout(positions_box)
        positions_row = QHBoxLayout()
        positions_row.addWidget(QLabel("first"))
        positions_row.addWidget(self.positions_spin)
        positions_row.addWidget(QLabel("positions"))
        positions_row.addStretch(1)
        positions_layout.addLayout(positions_row)
        positions_layout.addWidget(self.positions_plot, 1)
        positions_layout.addWidget(self.positions_hover)
        segments_box = QGroupBox("Segment embeddings A and B")
        QVBoxLayout(segments_box).addWidget(self.segments_label)
        neighbours_box = QGroupBox("Token neighbours (input embeddings, cosine)")
        neighbours_layout = QVBoxLayout(neighbours_box)
        neighbour_row = QFormLayout()
        row = QHBoxLayout()
        row.addWidget(self.neighbour_edit, 1)
        row.addWidget(self.neighbour_count)
        row.addWidget(self.neighbour_button)
        neighbour_row.addRow(row)
        neighbours_layout.addLayout(neighbour_row)
        neighbours_layout.addWidget(self.neighbour_list, 1)
        left = QSplitter(Qt.Orientation.Vertical)
        left.addWidget(positions_box)
        left.addWidget(segments_box)
        left.addWidget(neighbours_box)
        left.setSizes([460, 110, 260])
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.legend_label)
        right_layout.addWidget(self.scatter_plot, 1)
        right_layout.addWidget(self.projection_hover)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 2)
        self.splitter.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.status_label)
        layout.addWidget(self.splitter, 1)

        # wiring
        for spin in (self.points_spin, self.positions_spin):
            spin.setKeyboardTracking(False)  # typed digits ask once, on Enter; the arrows ask at each step
        for signal in (self.layer_combo.currentIndexChanged, self.points_spin.valueChanged,
                       self.special_check.toggled, self.positions_spin.valueChanged,
                       self.neighbour_button.clicked, self.neighbour_edit.returnPressed,
                       self.neighbour_count.valueChanged):
            signal.connect(lambda *_: self.request())
        self.colour_combo.currentIndexChanged.connect(lambda _: self._draw_points(keep_range=True))
        self.scatter_plot.scene().sigMouseMoved.connect(self._on_scatter_moved)
        self.scatter_plot.scene().sigMouseClicked.connect(self._on_scatter_clicked)
        self.positions_plot.scene().sigMouseMoved.connect(self._on_positions_moved)
        self.neighbour_list.itemActivated.connect(lambda item: self._look_up(item.data(Qt.ItemDataRole.UserRole)))

    # ---- WindowTab ----
    def on_model_changed(self, loaded: Any) -> None:
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        config = self.model.config
        with blocked(self.layer_combo, self.positions_spin):
            previous = self.layer_combo.currentIndex()
            self.layer_combo.clear()
            self.layer_combo.addItem("embeddings output", 0)
            for layer in range(1, config.num_hidden_layers + 1):
                self.layer_combo.addItem(f"after layer {layer}", layer)
            self.layer_combo.setCurrentIndex(previous if 0 <= previous < self.layer_combo.count()
                                             else config.num_hidden_layers)
            self.positions_spin.setMaximum(config.max_position_embeddings)
        self.result = None
        self._dirty = True
        self.status_label.setText(f"{loaded.info.label}: computing when this tab is shown…")
        if self.isVisible():
            self.request()

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        return self.worker.shutdown(timeout_ms)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._dirty and self.model is not None:
            self.request()

    # ---- requests ----
    def current_request(self) -> EmbeddingRequest | None:
        if self.model is None:
            return None
        return EmbeddingRequest(
            request_id=self._request_id, model=self.model, tokenizer=self.tokenizer,
            num_positions=self.positions_spin.value(), layer=int(self.layer_combo.currentData() or 0),
            num_points=self.points_spin.value(), include_special=self.special_check.isChecked(),
            neighbour_token=self.neighbour_edit.text(), num_neighbours=self.neighbour_count.value())

    def request(self) -> None:
        """Ask the worker for what the controls say now (the newest request wins)."""
        if self.model is None:
            return
        self._request_id += 1
        self._dirty = False
        self.status_label.setText("Computing…" if self.result is None else self.status_label.text())
        self.worker.submit(self._request_id, self.current_request())

    def _on_computed(self, request_id: int, result: EmbeddingResult) -> None:
        if request_id != self._request_id:
            return
        previous = self.result
        self.result = result
        self._show_positions(result.position_similarity)
        self.segments_label.setText(describe_segments(result.segments) or result.segment_note)
        self._show_neighbours(result)
        same_points = previous is not None and previous.projection.sample is result.projection.sample \
            and previous.projection.layer == result.projection.layer
        if not same_points:
            self._draw_points(keep_range=False)
        projection = result.projection
        ratio = projection.explained_variance_ratio
        self.status_label.setText(
            f"PCA of {projection.sample.num_points:,} token vectors from {len(set(projection.sample.sentence_index))}"
            f" sentence pairs, {self.layer_combo.currentText()}: the two axes hold {ratio[0]:.0%} and "
            f"{ratio[1]:.0%} of the variance. Hover a point to see its sentence; click it to inspect the pair.")

    def _on_failed(self, request_id: int, failure: Any) -> None:
        if request_id == self._request_id:
            self.status_label.setText(f"Could not compute the embedding views: {failure.text}")

    # ---- positions, segments, neighbours ----
    def _show_positions(self, similarity: np.ndarray) -> None:
        self.positions_image.setImage(similarity, autoLevels=False, levels=(-1.0, 1.0))
        size = similarity.shape[0]
        self.positions_plot.getPlotItem().vb.setRange(xRange=(0, size), yRange=(0, size), padding=0)

    def _on_positions_moved(self, scene_pos: QPointF) -> None:
        if self.result is None:
            return
        view = self.positions_plot.getPlotItem().vb
        point = view.mapSceneToView(scene_pos)
        row, column = int(np.floor(point.y())), int(np.floor(point.x()))
        size = self.result.position_similarity.shape[0]
        if view.sceneBoundingRect().contains(scene_pos) and 0 <= row < size and 0 <= column < size:
            self.positions_hover.setText(f"position {row} · position {column}: cosine "
                                         f"{self.result.position_similarity[row, column]:.3f}")
        else:
            self.positions_hover.setText(" ")

    def _show_neighbours(self, result: EmbeddingResult) -> None:
        self.neighbour_list.clear()
        if result.neighbours is None:
            if result.neighbour_note:
                self.neighbour_list.addItem(result.neighbour_note)
            return
        neighbours = result.neighbours
        for token, similarity in zip(neighbours.tokens, neighbours.similarities, strict=True):
            self.neighbour_list.addItem(f"{token}    {float(similarity):.3f}")
            self.neighbour_list.item(self.neighbour_list.count() - 1).setData(Qt.ItemDataRole.UserRole, token)

    def _look_up(self, token: str | None) -> None:
        if token:
            self.neighbour_edit.setText(token)
            self.request()

    # ---- the projection ----
    def point_colours(self) -> list[str]:
        """(N,) the colour of each point under the current "colour by"."""
        sample = self.result.projection.sample
        key = self.colour_combo.currentData()
        if key == "label" and sample.labels is None:
            key = "segment"
        if key == "segment":
            values, palette = sample.segment, {0: CATEGORY_COLOURS[0], 1: CATEGORY_COLOURS[1]}
        elif key == "kind":
            values, palette = sample.kind, KIND_COLOURS
        else:
            values = sample.labels
            palette = {label: CATEGORY_COLOURS[i % len(CATEGORY_COLOURS)]
                       for i, label in enumerate(sorted(set(values.tolist()), key=str))}
        return [palette.get(value.item() if hasattr(value, "item") else value, "#333333") for value in values]

    def _draw_points(self, keep_range: bool = True) -> None:
        if self.result is None:
            return
        sample = self.result.projection.sample
        label_item = self.colour_combo.model().item(self.colour_combo.findData("label"))
        label_item.setEnabled(sample.labels is not None)
        label_item.setToolTip("" if sample.labels is not None else
                              "The sample is unlabelled corpus text: no task labels to colour by")
        self.colours = self.point_colours()
        brushes = {colour: pg.mkBrush(QColor(colour)) for colour in set(self.colours)}  # one brush per colour
        points = self.result.projection.points
        self.scatter.setData(pos=points, brush=[brushes[colour] for colour in self.colours], size=POINT_SIZE,
                             pen=None)
        self._show_legend()
        self.hover_marker.setData([], [])
        if not keep_range:
            self.scatter_plot.getPlotItem().vb.autoRange(padding=0.04)
        ratio = self.result.projection.explained_variance_ratio
        self.scatter_plot.setLabel("bottom", f"PC 1 ({ratio[0]:.0%} of the variance)")  # in style_plot's ink
        self.scatter_plot.setLabel("left", f"PC 2 ({ratio[1]:.0%})")

    def _show_legend(self) -> None:
        key = self.colour_combo.currentData()
        sample = self.result.projection.sample
        if key == "kind":
            entries = [(KIND_COLOURS[kind], kind) for kind in KIND_COLOURS if kind in set(sample.kind.tolist())]
        elif key == "label" and sample.labels is not None:
            labels = sorted(set(sample.labels.tolist()), key=str)
            entries = [(CATEGORY_COLOURS[i % len(CATEGORY_COLOURS)], str(label)) for i, label in enumerate(labels)]
        else:
            entries = [(CATEGORY_COLOURS[segment], name) for segment, name in SEGMENT_NAMES.items()]
        self.legend_label.setText("  ".join(f"<span style='color:{colour}; font-size:14pt'>●</span> {name}"
                                            for colour, name in entries))

    def point_at(self, scene_pos: QPointF) -> int:
        """Index of the point within HOVER_RADIUS_PX of a scene position (the nearest), else -1."""
        if self.result is None:
            return -1
        view = self.scatter_plot.getPlotItem().vb
        if not view.sceneBoundingRect().contains(scene_pos):
            return -1
        point = view.mapSceneToView(scene_pos)
        width, height = view.viewPixelSize()  # data units per pixel
        points = self.result.projection.points
        distances = ((points[:, 0] - point.x()) / width) ** 2 + ((points[:, 1] - point.y()) / height) ** 2
        nearest = int(np.argmin(distances))
        return nearest if distances[nearest] <= HOVER_RADIUS_PX**2 else -1

    def _on_scatter_moved(self, scene_pos: QPointF) -> None:
        index = self.point_at(scene_pos)
        if index == self.hovered_index:
            return
        self.hovered_index = index
        if index < 0:
            self.hover_marker.setData([], [])
            self.projection_hover.setText(" ")
            return
        projection = self.result.projection
        self.hover_marker.setData(pos=projection.points[index : index + 1])
        first_line = projection.describe(index).split("\n")[0]
        self.projection_hover.setText(f"{first_line} — click to inspect\n{marked_sentence(projection.sample, index)}")

    def _on_scatter_clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        index = self.point_at(event.scenePos())
        if index >= 0:
            self.inspect_point(index)

    def inspect_point(self, index: int) -> None:
        """Send the pair point `index` came from to the Inspect tab."""
        sentence = int(self.result.projection.sample.sentence_index[index])
        text_a, text_b = self.result.pairs[sentence]
        self.inspectPair.emit(text_a, text_b)

    # ---- export ----
    def write_csv(self, path) -> Path:
        from explorer.inspector._qt.token_table import write_rows_csv

        if self.result is None:
            raise ValueError("there is no projection to export yet")
        projection = self.result.projection
        sample = projection.sample
        rows = [["x", "y", "token", "kind", "segment", "position", "sentence", "text"]]
        for index in range(sample.num_points):
            sentence = int(sample.sentence_index[index])
            rows.append([f"{projection.points[index, 0]:.6g}", f"{projection.points[index, 1]:.6g}",
                         str(sample.tokens[index]), str(sample.kind[index]), "AB"[int(sample.segment[index])],
                         str(int(sample.position[index])), str(sentence), sample.texts[sentence]])
        return write_rows_csv(path, rows)

    def write_npz(self, path) -> Path:
        if self.result is None:
            raise ValueError("there is nothing to export yet")
        projection = self.result.projection
        arrays = {"position_similarity": self.result.position_similarity, "points": projection.points,
                  "explained_variance_ratio": projection.explained_variance_ratio,
                  "layer": np.asarray(projection.layer), "tokens": np.asarray(projection.sample.tokens, str),
                  "segment": projection.sample.segment, "kind": np.asarray(projection.sample.kind, str),
                  "sentence_index": projection.sample.sentence_index, "position": projection.sample.position}

        def write(target: Path) -> None:
            with open(target, "wb") as handle:
                np.savez_compressed(handle, **arrays)

        return _replace_atomically(Path(path), write)
