"""The "Embeddings" tab: what the embeddings learned (objectName `embeddingView`).

- Learned positions: the cosine similarity of the first P position embeddings, a P × P image (Devlin et al.
  learn them; a trained BERT shows a bright band around the diagonal).
- The two segment embeddings compared, in words and numbers.
- A 2-D PCA of every token's hidden state after the chosen layer, for ~2,000 tokens of corpus sentence pairs
  (`explorer.embeddings._qt.projection_pane`); a click on a point sends its pair to the Inspect tab
  (`WindowTab.inspectPair`).
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

from explorer.common._qt.exporting import CopyPicture, export_button, export_png, export_svg, render_picture
from explorer.common._qt.line_label import ElidedLabel
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import style_canvas, style_plot
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.common._qt.window_tab import WindowTab
from explorer.common._qt.workers.latest_job import LatestJobWorker
from explorer.common.export_data import _replace_atomically
from explorer.common.message_text import sentence_case
from explorer.embeddings._qt.projection_pane import ProjectionPane
from explorer.embeddings.requests import (
    COLOUR_BY,
    DEFAULT_POINTS,
    EmbeddingRequest,
    EmbeddingResult,
    EmbeddingRunner,
    describe_segments,
)

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
        self.projection_pane = ProjectionPane()
        self.export_button = export_button(self, "embeddingExportButton", [
            ("Copy picture", "", CopyPicture(lambda: render_picture(self.projection_pane.scatter_plot))),
            ("Projection as PNG…", "projection.png", lambda path: export_png(self.projection_pane.scatter_plot, path)),
            ("Projection as SVG…", "projection.svg",
             lambda path: export_svg(self.projection_pane.scatter_plot, path, title="bert-explorer projection")),
            ("Position similarity as PNG…", "position-similarity.png",
             lambda path: export_png(self.positions_plot, path)),
            ("Projection points as CSV…", "projection.csv", self.projection_pane.write_csv),
            ("Arrays as NPZ…", "embeddings.npz", self.write_npz)])
        self.status_label = plain_label(named(QLabel("Open a model to see its embeddings."), "embeddingStatus",
                                   "embeddings status"))
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
        self.positions_hover = ElidedLabel(" ")  # a hover readout never widens the window
        self.positions_hover.setObjectName("positionHoverLabel")
        self.segments_label = plain_label(named(QLabel(" "), "segmentComparisonLabel", "segment embeddings compared"))
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
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(left)
        self.splitter.addWidget(self.projection_pane)
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
        self.colour_combo.currentIndexChanged.connect(
            lambda _: self.projection_pane.set_colour_by(self.colour_combo.currentData()))
        self.projection_pane.set_colour_by(self.colour_combo.currentData())
        self.projection_pane.inspectPair.connect(self.inspectPair)
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
        self._show_positions(result.position_similarity, result.position_note)
        self.segments_label.setText(describe_segments(result.segments) or result.segment_note)
        self._show_neighbours(result)
        same_points = previous is not None and previous.projection.sample is result.projection.sample \
            and previous.projection.layer == result.projection.layer
        if not same_points:
            self._offer_labels(result.projection.sample.labels is not None)
            self.projection_pane.show_projection(result.projection, result.pairs)
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
    def _show_positions(self, similarity: np.ndarray | None, note: str = "") -> None:
        """The position similarity image, or (a model without learned positions) none, and the note why."""
        if similarity is None:
            self.positions_image.clear()
            self.positions_hover.setText(sentence_case(note) + ("" if note.endswith(".") else "."))
            return
        self.positions_image.setImage(similarity, autoLevels=False, levels=(-1.0, 1.0))
        size = similarity.shape[0]
        self.positions_plot.getPlotItem().vb.setRange(xRange=(0, size), yRange=(0, size), padding=0)
        self.positions_hover.setText(" ")

    def _on_positions_moved(self, scene_pos: QPointF) -> None:
        if self.result is None or self.result.position_similarity is None:
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
    def _offer_labels(self, labelled: bool) -> None:
        """Offer "colour by task label" only for a sample with labels."""
        label_item = self.colour_combo.model().item(self.colour_combo.findData("label"))
        label_item.setEnabled(labelled)
        label_item.setToolTip("" if labelled else "The sample is unlabelled corpus text: no task labels to colour by")

    # ---- export ----
    def write_npz(self, path) -> Path:
        if self.result is None:
            raise ValueError("there is nothing to export yet")
        projection = self.result.projection
        positions = self.result.position_similarity
        arrays = {"position_similarity": np.zeros((0, 0), np.float32) if positions is None else positions,
                  "points": projection.points,
                  "explained_variance_ratio": projection.explained_variance_ratio,
                  "layer": np.asarray(projection.layer), "tokens": np.asarray(projection.sample.tokens, str),
                  "segment": projection.sample.segment, "kind": np.asarray(projection.sample.kind, str),
                  "sentence_index": projection.sample.sentence_index, "position": projection.sample.position}

        def write(target: Path) -> None:
            with open(target, "wb") as handle:
                np.savez_compressed(handle, **arrays)

        return _replace_atomically(Path(path), write)
