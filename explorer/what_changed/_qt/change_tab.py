"""The "What changed" tab: how far each attention head moved between two checkpoints, on the Inspect tab's input.

Top: checkpoint A ("before") and B ("after"), any two folders of the same shape (a model and the model fine-tuned
from it; step 1,000 and step 10,000 of one run). Left: the layers × heads grid (`headChangeGrid`) coloured by
Jensen–Shannon divergence in bits, the most-changed heads named above it, and under it how alike the two
representations are layer by layer (`layerSimilarityRow`: linear CKA over treebank words, whatever the input).
Right: the clicked head in A, in B and their difference B − A (a diverging map, white at 0), with the token labels.

Loading the two checkpoints and both forward passes run in one `LatestJobWorker` thread (newest request wins: a
pair typed character by character computes once more, not once per character), which keeps the models loaded
between inputs (`explorer.what_changed.head_change.ChangeComputer`). A hidden tab does not compute; it catches up
when shown.
"""

from __future__ import annotations

import os
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from explorer.common._qt.plain_text import plain_label, plain_tooltip
from explorer.common._qt.widget_names import named
from explorer.common._qt.window_tab import WindowTab
from explorer.common._qt.workers.latest_job import LatestJobWorker
from explorer.common.failure import Failure
from explorer.common.message_text import sentence_case
from explorer.inspector._qt.token_heatmap import TokenHeatmap
from explorer.what_changed._qt.change_grid import HeadChangeGrid, bits_text
from explorer.what_changed._qt.similarity_row import LayerSimilarityRow
from explorer.what_changed.head_change import ChangeComputer, ChangeRequest, HeadChange

IDLE_TEXT = ("Choose two checkpoints of the same shape, A (before) and B (after), e.g. a model and the model "
             "fine-tuned from it: each head's change on the Inspect tab's input appears here.")


class FolderField(QWidget):
    """A checkpoint folder: typed, or picked with Browse…."""

    def __init__(self, object_name: str, caption: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.edit = named(QLineEdit(), object_name, f"checkpoint {caption}",
                          "A checkpoint folder: config.json, the weights and vocab.txt")
        self.edit.setPlaceholderText("checkpoint folder…")
        self.browse_button = named(QPushButton("Browse…"), f"{object_name}Browse", f"browse for checkpoint {caption}")
        self.browse_button.clicked.connect(self.browse)
        self.caption = caption
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(self.browse_button)

    def folder(self) -> str:
        return self.edit.text().strip()

    def set_folder(self, folder: str) -> None:
        self.edit.setText(folder)

    def browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, f"Checkpoint {self.caption}", self.folder())
        if folder:
            self.edit.setText(folder)
            self.edit.editingFinished.emit()


class ChangeTab(WindowTab):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("changeTab")
        self.text_a = ""
        self.text_b: str | None = None
        self.result: HeadChange | None = None
        self.selected = (-1, -1)  # the head shown large; none yet: the first result shows its most changed head
        self._pending: ChangeRequest | None = None  # asked for while hidden: computed when shown
        self._submitted = 0  # the number of the newest request, so an old answer is never shown
        self.computer = ChangeComputer()
        self.worker = LatestJobWorker(self.computer, name="headChangeThread", drop_superseded=True,
                                      torch_threads=max(1, (os.cpu_count() or 2) - 1))
        self.worker.done.connect(self._on_done)
        self.worker.failed.connect(self._on_failed)

        self.field_a = FolderField("checkpointA", "A (before)")
        self.field_b = FolderField("checkpointB", "B (after)")
        self.swap_button = named(QPushButton("⇄"), "swapCheckpoints", "swap A and B", "Swap A and B")
        self.compare_button = named(QPushButton("Compare"), "compareButton", "compare A and B",
                                    "Compare A and B on the Inspect tab's input")
        self.status_label = plain_label(named(QLabel(IDLE_TEXT), "changeStatus", "what changed: status"))
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.grid = HeadChangeGrid()
        # Short fixed titles: a checkpoint's name (often a long run folder) goes in the status line and the
        # tooltips; in a title it would be wider than the square plot under it, squeezing that plot.
        self.heatmap_a = TokenHeatmap("A (before)")
        self.heatmap_b = TokenHeatmap("B (after)")
        self.heatmap_difference = TokenHeatmap("B − A", value_name="B − A", difference=True)
        for heatmap, name in ((self.heatmap_a, "changeHeatmapA"), (self.heatmap_b, "changeHeatmapB"),
                              (self.heatmap_difference, "changeHeatmapDifference")):
            heatmap.setObjectName(name)
        self.detail_label = plain_label(named(QLabel(" "), "changeDetailCaption", "the clicked head"))
        self.detail_label.setWordWrap(True)  # a long sentence takes two lines, not the window's width

        # layout
        folders = QHBoxLayout()
        folders.addWidget(QLabel("A (before)"))
        folders.addWidget(self.field_a, 1)
        folders.addWidget(self.swap_button)
        folders.addWidget(QLabel("B (after)"))
        folders.addWidget(self.field_b, 1)
        folders.addWidget(self.compare_button)
        detail = QWidget()
        detail_layout = QVBoxLayout(detail)
        detail_layout.setContentsMargins(0, 0, 0, 0)
        detail_layout.addWidget(self.detail_label)
        heatmaps = QHBoxLayout()
        for heatmap in (self.heatmap_a, self.heatmap_b, self.heatmap_difference):
            # A third of the row each, whatever width a heatmap last fixed for its square plot: that width
            # must not become the row's minimum, or the window could never be made narrower again.
            heatmap.setSizePolicy(QSizePolicy.Policy.Ignored, heatmap.sizePolicy().verticalPolicy())
            heatmaps.addWidget(heatmap, 1)
        detail_layout.addLayout(heatmaps, 1)
        self.similarity_row = LayerSimilarityRow()
        heads = QWidget()
        heads_layout = QVBoxLayout(heads)
        heads_layout.setContentsMargins(0, 0, 0, 0)
        heads_layout.addWidget(self.grid, 1)
        heads_layout.addWidget(self.similarity_row)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(heads)
        splitter.addWidget(detail)
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        splitter.setSizes([420, 480])
        layout = QVBoxLayout(self)
        layout.addLayout(folders)
        layout.addWidget(self.status_label)
        layout.addWidget(splitter, 1)

        # wiring
        for field in (self.field_a, self.field_b):
            field.edit.editingFinished.connect(self.request)
        self.swap_button.clicked.connect(self.swap)
        self.compare_button.clicked.connect(lambda: self.request(force=True))
        self.grid.headClicked.connect(self.show_head)

    # ---- WindowTab ----
    def on_pair_changed(self, text_a: str, text_b: str | None) -> None:
        self.text_a, self.text_b = text_a, text_b or None
        self.request()

    def on_model_changed(self, loaded: Any) -> None:
        """The inspector's checkpoint is a natural A: offered while A is still empty."""
        path = getattr(getattr(loaded, "info", None), "path", None)
        if path and not self.field_a.folder():
            self.field_a.set_folder(path)

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        return self.worker.shutdown(timeout_ms)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._pending is not None:
            self._submit(self._pending)

    # ---- actions ----
    def compare(self, folder_a: str, folder_b: str) -> None:
        """Compare these two checkpoints on the current input (the Fine-tune tab's "what changed")."""
        self.field_a.set_folder(str(folder_a))
        self.field_b.set_folder(str(folder_b))
        self.request(force=True)

    def swap(self) -> None:
        folder_a, folder_b = self.field_a.folder(), self.field_b.folder()
        self.field_a.set_folder(folder_b)
        self.field_b.set_folder(folder_a)
        self.request()

    def request(self, force: bool = False) -> None:
        """Compute for the folders and the pair there are now: at once when shown (or `force`d), else when shown."""
        if not (self.field_a.folder() and self.field_b.folder()):
            self._pending = None
            missing = " and ".join(name for name, field in (("A (before)", self.field_a), ("B (after)", self.field_b))
                                   if not field.folder())
            # asked to compare (the button), it says what is missing; otherwise what the tab is for
            self.status_label.setText(f"Choose {missing} first: a checkpoint folder to compare." if force
                                      else IDLE_TEXT)
            return
        if not self.text_a.strip():
            self._pending = None
            self.status_label.setText("Type a sentence in the Inspect tab: the heads are compared on it.")
            return
        request = ChangeRequest(self.field_a.folder(), self.field_b.folder(), self.text_a, self.text_b)
        if force or self.isVisible():
            self._submit(request)
        else:
            self._pending = request

    def _submit(self, request: ChangeRequest) -> None:
        self._pending = None
        self._submitted += 1
        self.status_label.setText("Comparing… (loading the checkpoints the first time)" if self.result is None
                                  else "Comparing…")
        self.worker.submit(self._submitted, request)

    # ---- results ----
    def _on_done(self, number: int, result: HeadChange) -> None:
        if number != self._submitted:
            return
        self.result = result
        self.grid.show_values(result.divergence, result.levels)
        self.similarity_row.show_similarity(result.similarity, result.similarity_note)
        names = result.names
        num_layers, num_heads = result.divergence.shape
        self.status_label.setText(f"A = {names[0]}, B = {names[1]}; {num_layers} layers × {num_heads} heads on "
                                  f"{len(result.positions)} tokens. {result.summary()}")
        layer, head = self.selected
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            layer, head = result.change.most_changed
        self.show_head(layer, head)

    def _on_failed(self, number: int, failure: Failure) -> None:
        if number != self._submitted:
            return
        self.result = None
        self.grid.clear()
        self.similarity_row.clear()
        for heatmap in (self.heatmap_a, self.heatmap_b, self.heatmap_difference):
            heatmap.clear()
        self.detail_label.setText(" ")
        text = failure.text
        self.status_label.setText(f"Cannot compare: {sentence_case(text)}")

    def show_head(self, layer: int, head: int) -> None:
        """A's and B's attention in this head and their difference, side by side."""
        if self.result is None:
            return
        self.selected = (layer, head)
        self.grid.select(layer, head)
        detail = self.result.head_detail(layer, head)
        names = self.result.names
        self.heatmap_a.setToolTip(plain_tooltip(f"A (before): {names[0]}"))
        self.heatmap_b.setToolTip(plain_tooltip(f"B (after): {names[1]}"))
        self.heatmap_a.set_matrix(detail.attention_a, detail.tokens, detail.positions, detail.levels)
        self.heatmap_b.set_matrix(detail.attention_b, detail.tokens, detail.positions, detail.levels)
        self.heatmap_difference.set_matrix(detail.difference, detail.tokens, detail.positions,
                                           detail.difference_levels)
        self.detail_label.setText(f"Layer {layer + 1}, head {head + 1}: {bits_text(detail.divergence)} "
                                  "(mean Jensen–Shannon divergence of its query rows). Rows are queries, columns "
                                  "keys; A and B share one colour scale.")
