"""The "Head lab" tab: which heads matter and what each one does, on this input or on a corpus sample.

Top: what to show (this input, or the corpus sample once run), the loss importance differentiates (defaulting
to the one that is honest for the loaded model: the tooltip says why), and the corpus run (held-out pairs,
Run / Pruning curve / Cancel, a progress bar). Below: every head in a sortable table (`importanceTable`) with
"switch off the k least important heads", and the pruning curve (`pruningPlot`). The marks on the Inspect
tab's heads come from the same source. It renders what the `HeadLabController` computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

import explorer.common._qt.shortcuts as shortcuts
from explorer.common._qt.exporting import CopyPicture, export_button
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.common._qt.window_tab import WindowTab
from explorer.common.message_text import sentence_case
from explorer.head_lab._qt.head_lab_controller import HeadLabController
from explorer.head_lab._qt.importance_table import ImportanceTable
from explorer.head_lab._qt.pruning_plot import PruningPlot
from explorer.head_lab.analyses import OBJECTIVES, SOURCES, HeadScores
from explorer.head_lab.corpus_run import CorpusProgress, CorpusSettings
from explorer.inspector.state import Change, ExplorerState

RUN_TIP = ("Importance (the gradient of the loss with respect to each head's gate, Michel et al. 2019) and roles "
           "(Clark et al. 2019) over held-out pairs of the built-in corpus, the pairs the shipped model was not "
           "trained on. Runs in the background; Cancel keeps what was computed so far.")
NO_CURVE_TEXT = ("This model has no MLM or NSP head (a plain encoder checkpoint), so there is no held-out metric to "
                 "prune against and no loss to rank heads by. Head roles still work: run the corpus sample.")
CURVE_TIP = ("Switch heads off 10% at a time, least important first and in a random order, and measure MLM and "
             "NSP accuracy on as many other held-out pairs (Michel et al. 2019, figure 3). Uses the corpus "
             "importance (computed first if needed).")


class HeadLabTab(WindowTab):
    def __init__(self, controller: HeadLabController, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("headLabTab")
        self.controller = controller

        self.source_combo = named(QComboBox(), "headSourceCombo", "show heads of",
                                   "What the table and the marks on the Inspect tab's heads show")
        for key, text in SOURCES.items():
            self.source_combo.addItem(text, key)
        self.objective_combo = named(QComboBox(), "objectiveCombo", "importance loss")
        self.objective_combo.setPlaceholderText("no loss (no MLM or NSP head)")
        for key, text in OBJECTIVES.items():
            self.objective_combo.addItem(f"{text} loss", key)
        self.pairs_spin = named(QSpinBox(), "samplePairsSpin", "held-out pairs",
                                 "Held-out sentence pairs for importance and roles (as many again evaluate the "
                                 "pruning curve)")
        self.pairs_spin.setRange(8, 4096)
        self.pairs_spin.setSingleStep(32)
        self.pairs_spin.setValue(256)
        self.pairs_spin.setSuffix(" pairs")
        self.length_spin = named(QSpinBox(), "sampleLengthSpin", "tokens per pair", "Tokens per pair at most")
        self.length_spin.setRange(16, 512)
        self.length_spin.setSingleStep(16)
        self.length_spin.setValue(128)
        self.length_spin.setSuffix(" tokens")
        self.run_button = named(QPushButton("Run on corpus sample"), "runSampleButton", "run on corpus sample",
                                 RUN_TIP)
        self.curve_button = named(QPushButton("Pruning curve"), "pruningCurveButton", "compute the pruning curve",
                                   CURVE_TIP)
        self.cancel_button = named(QPushButton("Cancel"), "cancelSampleButton", "cancel the corpus run",
                                    "Stop after the current batch; what was computed stays")
        self.progress = named(QProgressBar(), "sampleProgress", "corpus run progress")
        self.progress.setTextVisible(True)
        self.progress.setFormat("idle")
        self.status_label = plain_label(named(QLabel(" "), "headLabStatus", "head lab status"))
        self.status_label.setWordWrap(True)
        self.caption_label = plain_label(named(QLabel(" "), "headScoresCaption", "what the table shows"))
        self.caption_label.setWordWrap(True)

        self.table = ImportanceTable()
        self.count_spin = named(QSpinBox(), "switchOffCountSpin", "heads to switch off",
                                 "How many of the least important heads (by the table's rank) to switch off")
        self.count_spin.setRange(0, 0)
        self.switch_off_button = named(QPushButton("Switch off"), "switchOffLeastButton",
                                        "switch off the least important heads",
                                        "Switch exactly these heads off in the inspector (and every other head "
                                        "on), as unticking them would; the predictions update")
        self.all_on_button = named(QPushButton("All heads on"), "allHeadsOnButton", "all heads on")
        self.plot = PruningPlot()
        self.export_button = export_button(self, "headLabExportButton", [
            ("Head table as CSV…", "head-importance.csv", self.table.write_csv),
            ("Head arrays as NPZ…", "head-importance.npz", self.table.write_npz),
            ("Pruning curve as CSV…", "pruning-curve.csv", self.plot.write_csv),
            ("Copy picture", "", CopyPicture(self.plot.picture)),
            ("Pruning curve as PNG…", "pruning-curve.png", self.plot.export_png),
            ("Pruning curve as SVG…", "pruning-curve.svg", self.plot.export_svg)])

        # layout
        show_row = QHBoxLayout()
        show_row.addWidget(QLabel("Show heads of"))
        show_row.addWidget(self.source_combo)
        show_row.addSpacing(16)
        show_row.addWidget(QLabel("Importance from the"))
        show_row.addWidget(self.objective_combo)
        show_row.addStretch(1)
        show_row.addWidget(self.export_button)
        run_box = QGroupBox("Corpus sample")
        run_row = QHBoxLayout(run_box)
        for widget in (self.pairs_spin, self.length_spin, self.run_button, self.curve_button, self.cancel_button):
            run_row.addWidget(widget)
        run_row.addWidget(self.progress, 1)
        ablate_row = QHBoxLayout()
        ablate_row.addWidget(QLabel("Switch off the"))
        ablate_row.addWidget(self.count_spin)
        ablate_row.addWidget(QLabel("least important heads:"))
        ablate_row.addWidget(self.switch_off_button)
        ablate_row.addWidget(self.all_on_button)
        ablate_row.addStretch(1)
        table_box = QWidget()
        table_layout = QVBoxLayout(table_box)
        table_layout.setContentsMargins(0, 0, 0, 0)
        table_layout.addWidget(self.caption_label)
        table_layout.addWidget(self.table, 1)
        table_layout.addLayout(ablate_row)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(table_box)
        splitter.addWidget(self.plot)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([900, 600])
        layout = QVBoxLayout(self)
        layout.addLayout(show_row)
        layout.addWidget(run_box)
        layout.addWidget(self.status_label)
        layout.addWidget(splitter, 1)

        # wiring
        self.source_combo.currentIndexChanged.connect(lambda _: controller.set_source(self.source_combo.currentData()))
        self.objective_combo.currentIndexChanged.connect(self._on_objective_chosen)
        self.run_button.clicked.connect(lambda: self.start_run(pruning=False))
        self.curve_button.clicked.connect(lambda: self.start_run(pruning=True))
        self.cancel_button.clicked.connect(self.cancel_run)
        self.switch_off_button.clicked.connect(self.switch_off_least_important)
        self.all_on_button.clicked.connect(controller.all_heads_on)
        self._switched_off = None  # the head mask "Switch off" set: the status names it while it is the one in use
        controller.state.changed.connect(self._on_state_changed)
        self.count_spin.valueChanged.connect(self._mark_count)
        controller.scoresChanged.connect(self.show_scores)
        controller.sourceChanged.connect(self._show_source)
        controller.objectiveChanged.connect(self._show_objective)
        controller.corpusProgress.connect(self._on_progress)
        controller.corpusEnded.connect(self._on_run_ended)
        controller.curveChanged.connect(self.plot.show_curve)
        state = controller.state  # "mask a token (Ctrl+M …)" is what the scores of this input wait for
        self.shortcuts = shortcuts.install(self, {
            "mask_like_bert": self._mask_like_bert, "reroll": lambda: state.encoding is not None and state.reroll(),
            "clear_masks": state.clear_masks}, shortcuts.HEAD_LAB)
        self._show_objective(controller.objective or "", controller.objective_reason)
        self.show_scores(controller.shown_scores())
        self._update_buttons()

    # ---- WindowTab ----
    def on_model_changed(self, loaded: Any) -> None:
        self.controller.on_model_changed(loaded)
        self.status_label.setText(" ")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("idle")
        self._update_buttons()

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        return self.controller.shutdown(timeout_ms)

    def _mask_like_bert(self) -> None:
        if self.controller.state.encoding is None:
            self.status_label.setText("There is no input to mask yet: type a sentence in the Inspect tab first.")
            return
        self.controller.state.mask_like_bert()

    def showEvent(self, event) -> None:
        self.controller.watch("lab", True)
        super().showEvent(event)

    def hideEvent(self, event) -> None:
        self.controller.watch("lab", False)
        super().hideEvent(event)

    # ---- actions ----
    def settings(self, pruning: bool) -> CorpusSettings:
        return CorpusSettings(num_pairs=self.pairs_spin.value(), seq_len=self.length_spin.value(),
                              objective=self.controller.objective or "mlm", pruning=pruning)

    def start_run(self, pruning: bool = False, settings: CorpusSettings | None = None) -> bool:
        """Start a corpus run: importance and roles afresh, or the pruning curve (reusing the importance and
        roles of the same sample when they are there). False, with a message, when it cannot start."""
        settings = settings or self.settings(pruning)
        try:
            self.controller.start_corpus_run(settings, reuse=settings.pruning)
        except ValueError as error:
            self.status_label.setText(f"Cannot start: {error}")
            return False
        self.status_label.setText("Computing the pruning curve…" if pruning else "Computing on the corpus sample…")
        self.progress.setRange(0, 0)
        self.progress.setFormat("starting…")
        self._update_buttons()
        return True

    def cancel_run(self) -> None:
        self.controller.cancel_corpus_run()
        self.status_label.setText("Cancelling after the current batch…")
        self._update_buttons()

    def switch_off_least_important(self) -> None:
        try:
            self.controller.switch_off_least_important(self.count_spin.value())
        except ValueError as error:
            self.status_label.setText(sentence_case(str(error)))
            return
        count = self.count_spin.value()
        self._switched_off = self.controller.state.head_mask
        self.status_label.setText(f"Switched off the {count} least important heads ({SOURCES[self.controller.source]})"
                                  " in the inspector; the predictions follow." if count else "All heads are on.")

    def _on_state_changed(self, state: ExplorerState, what: Change) -> None:
        """Another head mask than the one "Switch off" set (All heads on, a head ticked in the Inspect tab): the
        status says what is switched off now instead of naming the heads switched off before."""
        if what is not Change.HEAD_MASK or self._switched_off is None:
            return
        mask = state.head_mask
        if mask is not None and np.array_equal(mask, self._switched_off):
            return
        self._switched_off = None
        off = 0 if mask is None else int((mask < 0.5).sum())
        self.status_label.setText(f"{off} head(s) switched off in the inspector." if off else "All heads are on.")

    # ---- showing ----
    def show_scores(self, scores: HeadScores | None) -> None:
        self.table.show_scores(scores)
        if scores is None:
            self.caption_label.setText("Nothing yet: type a sentence in the Inspect tab and mask a token, or run the "
                                       "corpus sample.")
        else:
            off = 0 if scores.head_mask is None else int((scores.head_mask < 0.5).sum())
            text = f"Heads of {scores.caption}" + (f", with {off} head(s) switched off" if off else "")
            if scores.importance is None and scores.importance_note:
                text += f". No importance: {scores.importance_note}."
            self.caption_label.setText(text)
        total = 0 if scores is None else scores.grid_shape[0] * scores.grid_shape[1]
        self.count_spin.setRange(0, total)
        self._mark_count()
        self._update_buttons()

    def _mark_count(self, *_) -> None:
        scores = self.controller.shown_scores()
        ranked = scores is not None and scores.importance is not None
        self.plot.mark_count(self.count_spin.value() if ranked else 0, scores.grid_shape[0] * scores.grid_shape[1]
                             if ranked else 0)

    def _show_source(self, source: str) -> None:
        index = self.source_combo.findData(source)
        with blocked(self.source_combo):
            self.source_combo.setCurrentIndex(index)

    def _show_objective(self, objective: str, reason: str) -> None:
        with blocked(self.objective_combo):
            self.objective_combo.setCurrentIndex(self.objective_combo.findData(objective) if objective else -1)
        self.objective_combo.setEnabled(bool(objective))
        self.objective_combo.setToolTip(reason)

    def _on_objective_chosen(self, *_) -> None:
        self.controller.set_objective(self.objective_combo.currentData())

    def _on_progress(self, progress: CorpusProgress) -> None:
        if progress.total:
            self.progress.setRange(0, progress.total)
            self.progress.setValue(progress.done)
        else:
            self.progress.setRange(0, 0)
        self.progress.setFormat(progress.text)
        if progress.note:
            self.status_label.setText(sentence_case(progress.note))

    def _on_run_ended(self, outcome: str, text: str) -> None:
        self.status_label.setText(text)
        self.progress.setRange(0, 1)
        self.progress.setValue(1 if outcome == "finished" else 0)
        self.progress.setFormat({"finished": "done", "stopped": "cancelled", "failed": "failed"}[outcome])
        self._update_buttons()

    def _update_buttons(self) -> None:
        controller = self.controller
        running = controller.corpus_running
        has_model = controller.model is not None
        self.run_button.setEnabled(has_model and not running)
        self.curve_button.setEnabled(has_model and not running and controller.has_pretraining_heads)
        if has_model and not controller.has_pretraining_heads:
            self.curve_button.setToolTip(NO_CURVE_TEXT)
            if controller.curve is None:
                self.plot.show_curve(None, NO_CURVE_TEXT)
        else:
            self.curve_button.setToolTip(CURVE_TIP)
        self.cancel_button.setEnabled(running)
        corpus_index = self.source_combo.findData("corpus")
        self.source_combo.model().item(corpus_index).setEnabled(controller.corpus_scores is not None)
        scores = controller.shown_scores()
        ranked = scores is not None and scores.importance is not None
        self.switch_off_button.setEnabled(ranked)
        self.count_spin.setEnabled(ranked)
