"""`syntaxHeads`: which heads of the model in the window track dependency syntax (Clark et al. 2019).

Top: the treebank (the shipped cut of UD English EWT's dev set, or a CoNLL-U file of the user's), how many of its
first sentences to score, Score / Cancel and a progress bar; the line under it says what was scored and what was
skipped. Left: the layers × heads grid of each head's UAS, in the direction chosen (the better of the two, as
Clark et al. report it; "dependent → head": word i's head predicted as the word i attends to most; "head →
dependent": as the word that attends to i most), the value written in each cell, one colour scale from 0 to the
best head. Right: the best head of each relation (over every word first, then each relation with at least
MIN_RELATION_WORDS scored words, the most frequent first) with its accuracy, its words, and beside it the best of
Clark's offset baselines for that relation ("the next word is the head"): a head that beats its baseline tracks the
relation rather than a position. Under them the six baselines over all words.

The scoring runs in a `GeneratorWorker` off the GUI thread (`explorer.head_lab.syntax_heads.syntax_heads_run`,
bertcore.syntactic_attention's computation a batch at a time): cancellable after any batch, started by Score, and
by itself the first time the view is shown for a model. A new model cancels a run and forgets the scores.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from explorer.common._qt.cell_numbers import CellNumbers, cell_at, cell_centre
from explorer.common._qt.heatmap_style import colour_lookup, insert_scale_bar, make_scale_bar
from explorer.common._qt.picture_item import PictureItem
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.plot_style import CAPTION_STYLE, style_canvas, style_plot
from explorer.common._qt.widget_names import named
from explorer.common._qt.workers.generator import GeneratorWorker
from explorer.common.attention_math import to_rgba
from explorer.common.message_text import sentence_case
from explorer.head_lab.syntax_heads import (
    DEFAULT_SENTENCES,
    MIN_RELATION_WORDS,
    SHIPPED_NAME,
    SyntaxHeads,
    SyntaxProgress,
    SyntaxSettings,
    direction_name,
    syntax_heads_run,
)

SYNTAX_NICENESS = 5  # as the training thread: the GUI thread wins the CPU
DIRECTION_CHOICES = (("better", "better of the two directions"), (0, "dependent → head"),
                     (1, "head → dependent"))
TABLE_COLUMNS = ("relation", "words", "head", "direction", "accuracy", "baseline", "baseline accuracy")
TABLE_TIPS = {
    "relation": "the dependency relation (UD's DEPREL, subtypes apart as Clark et al. keep them); \"all\": every "
                "scored word",
    "words": "words of the relation scored (their gold head is not the root)",
    "head": "the head that finds the gold head of most of these words, layer·head counted from 1",
    "direction": "dependent → head: the word's strongest attention lands on its head; head → dependent: the head "
                 "attends most to the word",
    "accuracy": "the share of these words whose head the head finds",
    "baseline": "the best of Clark's offset baselines for these words: the head is the word k places away",
    "baseline accuracy": "that baseline's share: a head above it tracks the relation, not a position",
}
BRIGHT_FRACTION = 0.62  # above this fraction of the scale the colour map is light: dark ink
SORT_ROLE = Qt.ItemDataRole.UserRole + 1


class SyntaxHeadsGrid(QWidget):
    """Layers × heads, each cell coloured by a head's UAS and the value written in it; hovering names the head."""

    HINT = "hover a head for its best relations"
    hovered = Signal(int, int)  # layer, head (0-based); (-1, -1) off the grid

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("syntaxHeadsGrid")
        self.values = np.zeros((0, 0))
        self.levels = (0.0, 1.0)
        self.graphics = pg.GraphicsLayoutWidget()
        style_canvas(self.graphics)
        self.plot = style_plot(self.graphics.addPlot(), x_label="head", y_label="layer", mouse=False)
        self.plot.invertY(True)
        self.picture = PictureItem()
        self.plot.addItem(self.picture)
        self.numbers = CellNumbers()
        self.numbers.setZValue(5)
        self.plot.addItem(self.numbers, ignoreBounds=True)
        self.scale_bar = make_scale_bar()
        self.scale_bar.getAxis("left").setLabel("UAS", **CAPTION_STYLE)
        insert_scale_bar(self.plot, self.scale_bar)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.graphics, 1)
        self.graphics.scene().sigMouseMoved.connect(self._on_moved)
        self.show_values(np.zeros((0, 0)))

    def show_values(self, values: np.ndarray) -> None:
        values = np.asarray(values, np.float64)
        self.values = values
        if not values.size:
            self.picture.clear()
            self.numbers.set_cells([], np.zeros((0, 0), bool))
            self.plot.getAxis("left").setTicks([[]])
            self.plot.getAxis("bottom").setTicks([[]])
            return
        num_layers, num_heads = values.shape
        self.levels = (0.0, max(float(values.max()), 0.05))
        self.picture.set_picture(to_rgba(values, self.levels, colour_lookup()), QRectF(0, 0, num_heads, num_layers))
        self.scale_bar.setLevels(self.levels)
        fractions = values / self.levels[1]
        self.numbers.set_cells([[f"{value:.2f}" for value in row] for row in values], fractions > BRIGHT_FRACTION)
        self.plot.getAxis("left").setTicks([[(layer + 0.5, str(layer + 1)) for layer in range(num_layers)]])
        self.plot.getAxis("bottom").setTicks([[(head + 0.5, str(head + 1)) for head in range(num_heads)]])
        self.plot.vb.setRange(xRange=(0, num_heads), yRange=(0, num_layers), padding=0)

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int]:
        return cell_at(self.plot, self.values.shape, scene_pos)

    def cell_centre(self, layer: int, head: int) -> QPointF:
        return cell_centre(self.plot, layer, head)

    def _on_moved(self, scene_pos: QPointF) -> None:
        self.hovered.emit(*self.cell_at(scene_pos))

    def leaveEvent(self, event) -> None:
        self.hovered.emit(-1, -1)
        super().leaveEvent(event)


class SyntaxHeadsView(QWidget):
    """See the module docstring. It scores the model it is given (`set_model`)."""

    scored = Signal(object)  # SyntaxHeads, when a run ends with its scores

    def __init__(self, parent: QWidget | None = None, *, torch_threads: int | None = None):
        super().__init__(parent)
        self.setObjectName("syntaxHeads")
        self.setAccessibleName("Syntax heads")
        self.model: Any = None
        self.tokenizer: Any = None
        self.result: SyntaxHeads | None = None
        self.worker: GeneratorWorker | None = None
        self.torch_threads = torch_threads or max(1, (os.cpu_count() or 1) - 1)
        self._retired: list[GeneratorWorker] = []
        self._asked_for_model = False  # a run was started (or cancelled) for this model: showing does not start one

        self.treebank_combo = named(QComboBox(), "syntaxTreebankCombo", "treebank",
                                    "The dependency treebank the heads are scored on")
        self.treebank_combo.addItem(SHIPPED_NAME, None)
        self.treebank_combo.addItem("a CoNLL-U file…", "file")
        self.treebank_edit = named(QLineEdit(), "syntaxTreebankEdit", "treebank file",
                                   "A CoNLL-U treebank (.conllu): words, heads and relations, as Universal "
                                   "Dependencies writes them")
        self.treebank_edit.setPlaceholderText("path of a .conllu file")
        self.browse_button = named(QPushButton("Browse…"), "syntaxTreebankBrowse", "browse for a treebank")
        self.sentences_spin = named(QSpinBox(), "syntaxSentencesSpin", "sentences",
                                    "Score the treebank's first N sentences (the shipped cut holds 1,000)")
        self.sentences_spin.setRange(1, 100_000)
        self.sentences_spin.setSingleStep(100)
        self.sentences_spin.setValue(DEFAULT_SENTENCES)
        self.sentences_spin.setSuffix(" sentences")
        self.run_button = named(QPushButton("Score heads"), "syntaxRunButton", "score the heads on the treebank",
                                "Score every head as a dependency parser on the treebank (Clark et al. 2019), in the "
                                "background")
        self.cancel_button = named(QPushButton("Cancel"), "syntaxCancelButton", "cancel scoring",
                                   "Stop after the current batch")
        self.progress = named(QProgressBar(), "syntaxProgress", "scoring progress")
        self.progress.setTextVisible(True)
        self.progress.setFormat("idle")
        self.status_label = plain_label(named(QLabel(" "), "syntaxStatus", "what was scored"))
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.direction_combo = named(QComboBox(), "syntaxDirectionCombo", "direction",
                                     "Which direction's UAS the grid shows: the better of the two for each head (as "
                                     "Clark et al. report it), or one of them")
        for key, text in DIRECTION_CHOICES:
            self.direction_combo.addItem(text, key)
        self.grid = SyntaxHeadsGrid()
        self.hover_label = plain_label(named(QLabel(SyntaxHeadsGrid.HINT), "syntaxHoverLabel", "the hovered head"))
        self.hover_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.table = named(QTableWidget(0, len(TABLE_COLUMNS)), "syntaxRelationTable",
                           "the best head of each relation")
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        for column, name in enumerate(TABLE_COLUMNS):
            self.table.horizontalHeaderItem(column).setToolTip(TABLE_TIPS[name])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.baselines_label = plain_label(named(QLabel(" "), "syntaxBaselines", "offset baselines"))
        self.baselines_label.setWordWrap(True)
        self.baselines_label.setToolTip("Clark et al.'s baselines: \"the head is the word k places away\", over "
                                        "every scored word")

        top = QHBoxLayout()
        top.addWidget(QLabel("Treebank"))
        top.addWidget(self.treebank_combo)
        top.addWidget(self.treebank_edit, 1)
        top.addWidget(self.browse_button)
        top.addWidget(self.sentences_spin)
        top.addWidget(self.run_button)
        top.addWidget(self.cancel_button)
        top.addWidget(self.progress)
        left = QWidget()
        left_column = QVBoxLayout(left)
        left_column.setContentsMargins(0, 0, 0, 0)
        direction_row = QHBoxLayout()
        direction_row.addWidget(QLabel("UAS per head,"))
        direction_row.addWidget(self.direction_combo)
        direction_row.addStretch(1)
        left_column.addLayout(direction_row)
        left_column.addWidget(self.grid, 1)
        left_column.addWidget(self.hover_label)
        right = QWidget()
        right_column = QVBoxLayout(right)
        right_column.setContentsMargins(0, 0, 0, 0)
        right_column.addWidget(QLabel(f"The best head of each relation (with {MIN_RELATION_WORDS}+ words) and its "
                                      "offset baseline"))
        right_column.addWidget(self.table, 1)
        right_column.addWidget(self.baselines_label)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([640, 760])
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.status_label)
        layout.addWidget(splitter, 1)

        self.treebank_combo.currentIndexChanged.connect(self._on_treebank_chosen)
        self.treebank_edit.textEdited.connect(lambda _: self._choose_file_treebank())
        self.browse_button.clicked.connect(self.browse)
        self.run_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.direction_combo.currentIndexChanged.connect(lambda _: self._show_grid())
        self.grid.hovered.connect(self._on_hovered)
        self._on_treebank_chosen()
        self._update_buttons()

    # ---- the model ----
    def set_model(self, model: Any, tokenizer: Any) -> None:
        """The model in the window: a run of the previous one is cancelled and its scores forgotten."""
        if model is self.model:
            return
        self.cancel(quiet=True)
        self.model, self.tokenizer = model, tokenizer
        self.result = None
        self._asked_for_model = False
        self._show_result()
        self.status_label.setText("Score heads: each head as a dependency parser on the treebank." if model is not None
                                  else "No model is loaded yet.")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("idle")
        self._update_buttons()
        if self.isVisible():
            self.start()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.model is not None and self.result is None and not self._asked_for_model:
            self.start()  # the first look at this model's syntax heads computes them

    # ---- settings ----
    def settings(self) -> SyntaxSettings:
        """The settings as chosen; ValueError saying what is missing."""
        treebank = None if self.treebank_combo.currentData() is None else self.treebank_edit.text().strip()
        return SyntaxSettings(treebank=treebank, max_sentences=self.sentences_spin.value())

    def _on_treebank_chosen(self, *_) -> None:
        shipped = self.treebank_combo.currentData() is None
        self.treebank_edit.setEnabled(not shipped)

    def _choose_file_treebank(self) -> None:
        if self.treebank_combo.currentData() is None:
            self.treebank_combo.setCurrentIndex(1)

    def browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "CoNLL-U treebank", self.treebank_edit.text(),
                                              "CoNLL-U treebanks (*.conllu);;All files (*)")
        if path:
            self.treebank_edit.setText(path)
            self._choose_file_treebank()

    # ---- running ----
    @property
    def running(self) -> bool:
        return self.worker is not None and self.worker.is_running

    def start(self, settings: SyntaxSettings | None = None) -> bool:
        """Score the heads of the model in the background (a run in progress is cancelled: the newest wins).
        False, with the reason, when it cannot start."""
        if self.model is None:
            self.status_label.setText("No model is loaded yet: open one (Model menu) to score its heads.")
            return False
        try:
            settings = settings or self.settings()
        except ValueError as error:
            self.status_label.setText(f"Cannot score: {sentence_case(str(error))}")
            return False
        self.cancel(quiet=True)
        self._asked_for_model = True
        model, tokenizer = self.model, self.tokenizer
        worker = GeneratorWorker(lambda: syntax_heads_run(model, tokenizer, settings), torch_threads=self.torch_threads,
                                 niceness=SYNTAX_NICENESS, name="syntaxHeadsThread")
        self.worker = worker
        worker.yielded.connect(lambda progress: self._on_progress(worker, progress))
        worker.returned.connect(lambda _value: self._on_ended(worker, "finished", ""))
        worker.stopped.connect(lambda _value: self._on_ended(worker, "stopped", ""))
        worker.errored.connect(lambda failure, _last: self._on_ended(worker, "failed", failure.text))
        self.status_label.setText(f"Scoring every head on {settings.source}…")
        self.progress.setRange(0, 0)
        self.progress.setFormat("starting…")
        worker.start()
        self._update_buttons()
        return True

    def cancel(self, quiet: bool = False) -> None:
        """Stop after the current batch."""
        worker, self.worker = self.worker, None
        if worker is None:
            return
        self._retired.append(worker)  # joined at shutdown (rule 6 of explorer.common._qt.workers)
        if worker.is_running:
            worker.request_stop()
            if not quiet:
                self.status_label.setText("Cancelled." + (" The scores shown are of the run before."
                                                          if self.result is not None else ""))
                self.progress.setRange(0, 1)
                self.progress.setValue(0)
                self.progress.setFormat("cancelled")
        self._update_buttons()

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        self.cancel(quiet=True)
        joined = True
        for worker in self._retired:
            joined = worker.shutdown(timeout_ms) and joined
        return joined

    def _on_progress(self, worker: GeneratorWorker, progress: SyntaxProgress) -> None:
        if worker is not self.worker:
            return
        if progress.total:
            self.progress.setRange(0, progress.total)
            self.progress.setValue(progress.done)
        self.progress.setFormat(progress.text if progress.result is None else "done")
        if progress.result is not None:
            self.result = progress.result
            self._show_result()

    def _on_ended(self, worker: GeneratorWorker, outcome: str, message: str) -> None:
        if worker is not self.worker:
            return
        self._retired.append(worker)
        self.worker = None
        if outcome == "failed":
            self.status_label.setText(f"Cannot score the heads: {sentence_case(message)}")
            self.progress.setRange(0, 1)
            self.progress.setValue(0)
            self.progress.setFormat("failed")
        elif self.result is not None and outcome == "finished":
            self.status_label.setText(f"UAS per head on {self.result.caption}")
            self.scored.emit(self.result)
        self._update_buttons()

    def _update_buttons(self) -> None:
        running = self.running
        self.run_button.setEnabled(self.model is not None and not running)
        self.cancel_button.setEnabled(running)

    # ---- showing ----
    def grid_values(self) -> np.ndarray:
        """(L, H) the UAS the grid shows, in the direction chosen."""
        if self.result is None:
            return np.zeros((0, 0))
        direction = self.direction_combo.currentData()
        syntax = self.result.syntax
        return syntax.uas if direction == "better" else syntax.uas_by_direction[direction]

    def _show_grid(self) -> None:
        self.grid.show_values(self.grid_values())

    def _show_result(self) -> None:
        self._show_grid()
        self.table.setSortingEnabled(False)
        result = self.result
        rows = result.best_heads() if result is not None else []
        self.table.setRowCount(len(rows))
        for row, best in enumerate(rows):
            cells = (best.relation, best.count, f"L{best.layer + 1}·H{best.head + 1}", direction_name(best.direction),
                     best.accuracy, f"{best.offset:+d}", best.offset_accuracy)
            for column, value in enumerate(cells):
                self.table.setItem(row, column, _cell(value))
        self.table.setSortingEnabled(True)
        self.table.sortItems(TABLE_COLUMNS.index("words"), Qt.SortOrder.DescendingOrder)  # "all" first
        self.baselines_label.setText(f"Offset baselines over all words: {result.baselines_text()}."
                                     if result is not None else " ")

    def _on_hovered(self, layer: int, head: int) -> None:
        if layer < 0 or self.result is None:
            self.hover_label.setText(SyntaxHeadsGrid.HINT)
            return
        syntax = self.result.syntax
        direction = int(syntax.best_direction[layer, head])
        text = (f"L{layer + 1}·H{head + 1}: UAS {syntax.uas[layer, head]:.3f} ({direction_name(direction)}; "
                f"{direction_name(1 - direction)} {syntax.uas_by_direction[1 - direction, layer, head]:.3f})")
        counts = syntax.relation_counts >= MIN_RELATION_WORDS
        if counts.any():
            scores = syntax.relation_accuracy[:, :, layer, head].max(axis=1)  # (R,) the better direction
            scores = np.where(counts, scores, -1.0)
            best = int(scores.argmax())
            text += (f"; best at {syntax.relations[best]}: {scores[best]:.3f} of "
                     f"{int(syntax.relation_counts[best]):,} words")
        self.hover_label.setText(text)


class _Cell(QTableWidgetItem):
    """A table cell that sorts by its value (numbers as numbers), not by its text."""

    def __lt__(self, other: QTableWidgetItem) -> bool:
        mine, theirs = self.data(SORT_ROLE), other.data(SORT_ROLE)
        if isinstance(mine, (int, float)) and isinstance(theirs, (int, float)):
            return mine < theirs
        return str(mine) < str(theirs)


def _cell(value: Any) -> QTableWidgetItem:
    item = _Cell(f"{value:.3f}" if isinstance(value, float) else f"{value:,}" if isinstance(value, int) else value)
    item.setData(SORT_ROLE, value)
    if isinstance(value, (int, float)):
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item
