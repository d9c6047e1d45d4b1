"""The logit lens beside the predictions: at which layer each masked word forms (nostalgebraist 2020).

A heatmap of layers (rows: the embeddings, then layer 1 … L) × masked positions (columns), coloured by the
probability the MLM head gives the original token when it reads that layer's hidden state, or by its rank.
Clicking a column lists that position's top-k tokens layer by layer below (green: the original token). The
last row is the model's own prediction. It renders a `bertcore.analysis.lens.LogitLens` or says why there is none.

It sits under the predictions in a narrow pane at the window's default size, so it asks for the height its
rows need (`_fit_rows`: every layer labelled in the heatmap, every layer's row in the table, up to
ROWS_ALWAYS_SHOWN) and the hovered cell is named in the caption line over the table instead of a line of its own.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QBrush, QImage
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from bertcore.tokenization.pieces import readable_piece
from explorer.common._qt.cell_numbers import CellNumbers, cell_at
from explorer.common._qt.exporting import CopyPicture, export_button, export_png, render_picture
from explorer.common._qt.heatmap_style import color_map
from explorer.common._qt.plain_text import plain_label, plain_tooltip
from explorer.common._qt.plot_style import style_canvas, style_plot
from explorer.common._qt.token_axis import TokenAxis
from explorer.inspector._qt.predictions_table import CORRECT_COLOUR, percent

LENS_VALUES = {"probability": "P(original)", "rank": "rank of original"}
MAX_CELL_TEXTS = 240  # values written in the cells up to this many cells; beyond, the hover tells
EMPTY_TEXT = "Mask a token (Ctrl+M or click one) to see where its prediction forms, layer by layer."
ROWS_ALWAYS_SHOWN = 7  # the embeddings and 6 layers get their room; a deeper model's lens scrolls and thins labels
PLOT_MARGIN_PX = 12  # the plot's own margins around its view and axes


def short_layer_name(name: str) -> str:
    """"embeddings" -> "emb.", "layer 3" -> "L3": a row name of the lens' top-k table."""
    if name.startswith("layer "):
        return "L" + name.removeprefix("layer ")
    return "emb." if name == "embeddings" else name


class LogitLensView(QWidget):
    """objectName `logitLens`: the lens heatmap (`logitLensPlot`), the selected position's top-k per layer
    (`logitLensTopK`) and a note (`logitLensNote`) that explains an empty state. `matrix` is what the cells
    show: P(original) (L + 1, P), or in rank mode 1 − log10(rank) / log10(worst rank)."""

    positionSelected = Signal(int)  # the sequence position whose top-k is listed, -1 for none

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("logitLens")
        self.setAccessibleName("Logit lens")
        self.lens = None
        self.selected_column = -1
        self.matrix = np.zeros((0, 0), np.float32)  # (L + 1, P) what the heatmap shows

        title = QLabel("<b>Logit lens</b>")
        title.setToolTip("At each masked position, the MLM head is applied to the hidden state after every layer "
                         "(nostalgebraist 2020's logit lens). The last row is the model's own prediction; early "
                         "layers were never trained to be read this way, so the rank is the steadier signal.")
        self.value_combo = QComboBox()
        self.value_combo.setObjectName("logitLensValueCombo")
        self.value_combo.setAccessibleName("logit lens value")
        self.value_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        for key, text in LENS_VALUES.items():
            self.value_combo.addItem(text, key)
        self.value_combo.setToolTip("Colour each cell by the probability of the original token, or by its rank "
                                    "(1 = the top prediction; log scale)")
        self.export_button = export_button(self, "logitLensExportButton", [
            ("Logit lens as CSV…", "logit-lens.csv", self.write_csv),
            ("Copy picture", "", CopyPicture(self.picture)),
            ("Logit lens as PNG…", "logit-lens.png", self.export_png)])
        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(title)
        header.addStretch(1)
        header.addWidget(self.value_combo)
        header.addWidget(self.export_button)

        self.note_label = plain_label(QLabel(EMPTY_TEXT))
        self.note_label.setObjectName("logitLensNote")
        self.note_label.setWordWrap(True)
        self.note_label.setStyleSheet("color: #555;")
        self.note_label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setObjectName("logitLensPlot")
        style_canvas(self.graphics)
        self.left_axis = TokenAxis("left")
        self.bottom_axis = TokenAxis("bottom", upright=True)  # a few wide columns: labels side by side
        self.plot = self.graphics.addPlot(axisItems={"left": self.left_axis, "bottom": self.bottom_axis})
        style_plot(self.plot, mouse=False)
        self.plot.invertY(True)
        self.image_item = pg.ImageItem(axisOrder="row-major")
        self.image_item.setColorMap(color_map())
        self.plot.addItem(self.image_item)
        self.color_bar = pg.ColorBarItem(values=(0, 100), colorMap=color_map(), interactive=False, width=12,
                                         label="P(original), %")
        self.color_bar.setImageItem(self.image_item, insert_in=self.plot)
        self.selection = pg.QtWidgets.QGraphicsRectItem()
        pen = pg.mkPen("#ff8c00", width=3)
        pen.setCosmetic(True)
        self.selection.setPen(pen)
        self.selection.setZValue(10)
        self.selection.setVisible(False)
        self.plot.vb.addItem(self.selection, ignoreBounds=True)
        self.numbers = CellNumbers()
        self.numbers.setZValue(5)
        self.plot.vb.addItem(self.numbers, ignoreBounds=True)

        self.top_table = QTableWidget()
        self.top_table.setObjectName("logitLensTopK")
        self.top_table.setAccessibleName("top-k tokens per layer at the selected position")
        self.top_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.top_table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.top_table.verticalHeader().setDefaultSectionSize(self.top_table.fontMetrics().height() + 4)
        self.top_table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.caption = " "  # what the caption says while no cell is hovered
        self.top_caption = plain_label(QLabel(" "))
        self.top_caption.setObjectName("logitLensTopKCaption")
        self.top_caption.setWordWrap(True)

        plot_box = QWidget()
        plot_layout = QVBoxLayout(plot_box)
        plot_layout.setContentsMargins(0, 0, 0, 0)
        plot_layout.setSpacing(1)
        plot_layout.addWidget(self.graphics, 1)
        table_box = QWidget()
        table_layout = QVBoxLayout(table_box)
        table_layout.setContentsMargins(0, 0, 0, 0)
        table_layout.setSpacing(1)
        table_layout.addWidget(self.top_caption)
        table_layout.addWidget(self.top_table, 1)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(plot_box)
        self.splitter.addWidget(table_box)
        self.splitter.setSizes([220, 200])

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(header)
        layout.addWidget(self.note_label)
        layout.addWidget(self.splitter, 1)

        self.value_combo.currentIndexChanged.connect(lambda _: self._draw())
        scene = self.graphics.scene()
        scene.sigMouseClicked.connect(self._on_mouse_clicked)
        scene.sigMouseMoved.connect(self._on_mouse_moved)
        self.show_lens(None, "No inspection yet.")

    # ---- what the window asks ----
    def show_lens(self, lens, note: str = "") -> None:
        """A `LogitLens` (None, or one without masked positions: `note` says why there is nothing)."""
        self.lens = lens if lens is not None and len(lens.positions) else None
        has_data = self.lens is not None
        self.note_label.setText("" if has_data else (note or EMPTY_TEXT))
        self.note_label.setVisible(not has_data)
        self.splitter.setVisible(has_data)
        self.value_combo.setVisible(has_data)
        self.export_button.setEnabled(has_data)
        if not has_data:
            self.matrix = np.zeros((0, 0), np.float32)
            self.selected_column = -1
            return
        previous = self.selected_position()
        columns = [int(p) for p in self.lens.positions]
        self.selected_column = columns.index(previous) if previous in columns else 0
        self._draw()

    def value_kind(self) -> str:
        return self.value_combo.currentData()

    def selected_position(self) -> int:
        if self.lens is None or self.selected_column < 0:
            return -1
        return int(self.lens.positions[self.selected_column])

    def select_column(self, column: int) -> None:
        """List the top-k per layer of the `column`-th masked position."""
        if self.lens is None or not 0 <= column < len(self.lens.positions):
            return
        self.selected_column = column
        self._show_selection()
        self.positionSelected.emit(self.selected_position())

    def write_csv(self, path) -> Path:
        """One row per (layer, masked position): P(original), its rank, and the top-k with probabilities."""
        from explorer.common.export_data import write_rows_csv

        lens = self.lens
        if lens is None:
            raise ValueError("there is no logit lens to export; mask a token first")
        top_k = lens.top_ids.shape[-1]
        rows = [["layer", "position", "original token", "model saw", "p_original", "rank_original",
                 *(f"top{rank}_{what}" for rank in range(1, top_k + 1) for what in ("token", "probability"))]]
        for row, layer_name in enumerate(lens.layer_names):
            for column, position in enumerate(lens.positions):
                rows.append([layer_name, str(int(position)), lens.original_tokens[column], lens.input_tokens[column],
                             f"{float(lens.original_probability[row, column]):.6g}",
                             str(int(lens.original_rank[row, column])),
                             *(value for rank in range(top_k) for value in (
                                 str(lens.top_tokens[row, column, rank]),
                                 f"{float(lens.top_probabilities[row, column, rank]):.6g}"))])
        return write_rows_csv(path, rows)

    def export_png(self, path) -> Path:
        if self.lens is None:
            raise ValueError("there is no logit lens to export; mask a token first")
        return export_png(self.graphics, path)  # the heatmap, not the value combo and Export button over it

    def picture(self) -> QImage:
        """What export_png writes, for the clipboard."""
        if self.lens is None:
            raise ValueError("there is no logit lens to copy; mask a token first")
        return render_picture(self.graphics)

    # ---- drawing ----
    def _draw(self) -> None:
        lens = self.lens
        if lens is None:
            return
        if self.value_kind() == "rank":
            # log10(rank), reversed so that rank 1 is the brightest, like a high probability
            worst = max(1.0, math.log10(max(2, int(lens.original_rank.max()))))
            self.matrix = (1.0 - np.log10(lens.original_rank.astype(np.float64)) / worst).astype(np.float32)
            levels = (0.0, 1.0)
        else:
            self.matrix = lens.original_probability.astype(np.float32)
            levels = (0.0, max(1e-6, float(self.matrix.max())))
        num_rows, num_columns = self.matrix.shape
        # drawn in percent, as the cells write it; the rank's colour bar would only show its log scale: hidden
        shown = 100.0 if self.value_kind() == "probability" else 1.0
        self.image_item.setImage(shown * self.matrix, autoLevels=False, levels=(0.0, shown * levels[1]))
        self.color_bar.setLevels((0.0, shown * levels[1]))
        self.color_bar.setVisible(self.value_kind() == "probability")
        self.left_axis.set_labels(list(lens.layer_names))
        self.bottom_axis.set_labels([readable_piece(token, lens.piece_style) for token in lens.original_tokens],
                                    lens.positions)
        self._fit_rows(num_rows)
        self.plot.vb.setRange(xRange=(0, num_columns), yRange=(0, num_rows), padding=0)
        self._write_cell_texts(levels)
        self._show_selection()

    def _fit_rows(self, num_rows: int) -> None:
        """Minimum heights that give every row (up to ROWS_ALWAYS_SHOWN) a label in the heatmap and a line in the
        table: the window's splitters never give a widget less than its minimum."""
        rows = min(num_rows, ROWS_ALWAYS_SHOWN)
        self.graphics.setMinimumHeight(rows * self.left_axis.min_spacing_px + self.bottom_axis.minimumHeight()
                                       + PLOT_MARGIN_PX)
        table = self.top_table
        table.setMinimumHeight(table.horizontalHeader().sizeHint().height() + 2 * table.frameWidth()
                               + rows * table.verticalHeader().defaultSectionSize())

    def _write_cell_texts(self, levels: tuple[float, float]) -> None:
        lens = self.lens
        num_rows, num_columns = self.matrix.shape
        if num_rows * num_columns > MAX_CELL_TEXTS:
            self.numbers.set_cells([], np.zeros((0, 0), bool))
            return
        if self.value_kind() == "rank":
            texts = [[str(int(rank)) for rank in row] for row in lens.original_rank]
        else:
            texts = [[f"{value:.0f}" if value >= 9.95 else f"{value:.1f}" for value in row]
                     for row in 100 * np.asarray(lens.original_probability, np.float64)]
        bright = (self.matrix - levels[0]) / max(1e-12, levels[1] - levels[0]) > 0.6
        self.numbers.set_cells(texts, bright)

    def _show_selection(self) -> None:
        lens, column = self.lens, self.selected_column
        if lens is None or column < 0:
            self.selection.setVisible(False)
            return
        self.selection.setVisible(True)
        self.selection.setRect(column, 0, 1, lens.num_rows)
        position = int(lens.positions[column])
        original = lens.original_tokens[column]
        seen = lens.input_tokens[column]
        settled = int(lens.settled_layer[column])
        where = (f"right from {lens.layer_names[settled]} on" if settled >= 0
                 else "the model's final guess is wrong")
        said = f"the model saw {seen!r}, " if seen != original else ""
        self.caption = (f"Position {position}, {original!r} ({said}green): {where}. "
                        f"Top-{lens.top_ids.shape[-1]} per layer:")
        self.top_caption.setText(self.caption)
        top_k = lens.top_ids.shape[-1]
        table = self.top_table
        table.clear()
        table.setRowCount(lens.num_rows)
        table.setColumnCount(top_k)
        table.setHorizontalHeaderLabels([f"#{rank}" for rank in range(1, top_k + 1)])
        # short row names ("emb.", "L1" …), the full ones in their tooltips: the k columns get the width
        for row, name in enumerate(lens.layer_names):
            header_item = QTableWidgetItem(short_layer_name(name))
            header_item.setToolTip(name)
            table.setVerticalHeaderItem(row, header_item)
        for row in range(lens.num_rows):
            for rank in range(top_k):
                token = str(lens.top_tokens[row, column, rank])
                probability = percent(float(lens.top_probabilities[row, column, rank]))
                item = QTableWidgetItem(f"{readable_piece(token, lens.piece_style)} {probability}")
                item.setToolTip(plain_tooltip(f"{lens.layer_names[row]}, #{rank + 1}: {token!r} {probability}"))
                if token == original:
                    item.setBackground(QBrush(CORRECT_COLOUR))
                table.setItem(row, rank, item)
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self._fit_rows(lens.num_rows)  # now that the table has its header

    # ---- mouse ----
    def cell_at(self, scene_pos: QPointF) -> tuple[int, int]:
        if self.lens is None:
            return -1, -1
        return cell_at(self.plot, self.matrix.shape, scene_pos)

    def _on_mouse_clicked(self, event) -> None:
        _, column = self.cell_at(event.scenePos())
        if column >= 0:
            self.select_column(column)

    def leaveEvent(self, event) -> None:
        self.top_caption.setText(self.caption)
        super().leaveEvent(event)

    def _on_mouse_moved(self, scene_pos: QPointF) -> None:
        row, column = self.cell_at(scene_pos)
        if row < 0:
            self.top_caption.setText(self.caption)
            return
        lens = self.lens
        best = str(lens.top_tokens[row, column, 0])
        self.top_caption.setText(
            f"{lens.layer_names[row]}, position {int(lens.positions[column])} ({lens.original_tokens[column]!r}): "
            f"P = {percent(float(lens.original_probability[row, column]))}, rank "
            f"{int(lens.original_rank[row, column])}; best guess {best!r} — click to list the top-k")
