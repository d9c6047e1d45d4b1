"""What the pretraining heads say: the top-k guesses at every masked position, and next-sentence prediction (or,
for ALBERT, sentence-order prediction in its place: explorer.inspector.family_display).

The table (`predictionsView`: one row per masked position, the k guesses as bars) is `predictions_table`'s.
`nspLabel` gives P(B follows A), or says that next-sentence prediction needs a pair when there is no sentence B
(the number BERT gives for "[CLS] A [SEP]" alone answers no question). A model without pretraining heads (an
encoder-only checkpoint such as MiniLM) gets a sentence saying so instead of numbers.

A click on a guess (or on the answer) asks for it to be explained: `explainRequested(("mlm", position,
token_id))`; the "Why?" button beside the NSP line asks for `("nsp", 0)`, B follows A (beside ALBERT's
sentence-order line: `("sop", 0)`, in order). The window hands the request to the Explain tab.

In the Inspect tab the panel follows the tab's `ExplorerState` (`follow`): it shows the inspection shown there.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QPainter, QPalette
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from explorer.common._qt.plain_text import plain_label
from explorer.inspector._qt.predictions_table import FIXED_COLUMNS, BarDelegate, PredictionsModel
from explorer.inspector._qt.shown_inspection_view import ShownInspectionView
from explorer.inspector.family_display import SOP_MEANING, SOP_TITLE, sentence_order_text

# the panel asks for room for this many masked positions (BERT's 15% of the default pair), more scroll: the
# logit lens under it needs the rest of the pane's height at the window's default size
ROWS_ALWAYS_SHOWN = 3

NSP_TITLE = "<b>Next sentence prediction:</b>"


class QuietProgressBar(QProgressBar):
    """A QProgressBar whose new value is painted with the rest of the window, flat. QProgressBar.setValue repaints
    at once (a synchronous paint of its own, ~1 ms on every keystroke for the NSP bar) when the bar moves a pixel,
    and the style's bar (gradients, a rounded frame) took a quarter of a millisecond to paint at 8 pixels high."""

    def paintEvent(self, event) -> None:
        palette = self.palette()
        group = QPalette.ColorGroup.Active if self.isEnabled() else QPalette.ColorGroup.Disabled
        painter = QPainter(self)
        painter.fillRect(self.rect(), palette.color(group, QPalette.ColorRole.Base))
        span = self.maximum() - self.minimum()
        if span > 0 and self.value() > self.minimum():
            filled = round(self.width() * (self.value() - self.minimum()) / span)
            painter.fillRect(0, 0, filled, self.height(), palette.color(group, QPalette.ColorRole.Highlight))
        painter.setPen(palette.color(group, QPalette.ColorRole.Mid))
        painter.drawRect(self.rect().adjusted(0, 0, -1, -1))
        painter.end()

    def setValue(self, value: int) -> None:
        if value == self.value():
            return
        self.setUpdatesEnabled(False)  # the synchronous repaint inside setValue then does nothing
        try:
            super().setValue(value)
        finally:
            self.setUpdatesEnabled(True)  # which schedules an ordinary update


class PredictionsPanel(ShownInspectionView, QWidget):
    """The predictions table (`predictionsView`), the NSP line (`nspLabel`) and a note when there is nothing."""

    explainRequested = Signal(object)  # a bertcore.explain target: ("mlm", position, token_id), ("nsp" | "sop", 0)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("predictionsPanel")
        self._original_ids: list[int] = []  # of the inspection shown: the answer column's token ids
        self._fitted_for: tuple | None = None  # what the table's minimum size was last measured for
        self._heading_widths: tuple[str, list[int]] = ("", [])  # (the header's font, the fixed headings' widths)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)

        self.nsp_title = title = QLabel(NSP_TITLE)  # ALBERT's sentence order takes its place (SOP_TITLE)
        self.nsp_label = plain_label(QLabel("–"))
        self.nsp_label.setObjectName("nspLabel")
        self.nsp_label.setAccessibleName("Next sentence probability")
        self.nsp_label.setWordWrap(True)
        self.nsp_bar = QuietProgressBar()
        self.nsp_bar.setObjectName("nspBar")
        self.nsp_bar.setAccessibleName("Next sentence probability bar")
        self.nsp_bar.setRange(0, 1000)
        self.nsp_bar.setTextVisible(False)
        self.nsp_bar.setMaximumHeight(8)

        self.mlm_title = mlm_title = QLabel()
        mlm_title.setToolTip("The k most likely tokens at every masked position, each a bar as long as its "
                             "probability; green where the guess is the original token")
        self.note_label = plain_label(QLabel())
        self.note_label.setObjectName("predictionsNote")
        self.note_label.setWordWrap(True)
        self.note_label.setStyleSheet("color: #555;")

        self.model = PredictionsModel(self)
        self.view = QTableView()
        self.view.setObjectName("predictionsView")
        self.view.setAccessibleName("Masked-token predictions")
        self.view.setModel(self.model)
        self.view.setItemDelegate(BarDelegate(self.view))
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.view.verticalHeader().hide()
        self.view.setWordWrap(False)
        self.view.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        header = self.view.horizontalHeader()
        header.setMinimumSectionSize(40)
        header.setDefaultSectionSize(96)
        self.view.verticalHeader().setDefaultSectionSize(2 * self.view.fontMetrics().height() + 8)
        self.view.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.view.setToolTip("Click a guess (or the answer) to see why the model gives it, in the Explain tab")
        self.view.clicked.connect(self._on_clicked)
        self.nsp_explain = QToolButton()
        self.nsp_explain.setObjectName("explainNspButton")
        self.nsp_explain.setAccessibleName("Explain the next-sentence prediction")
        self.nsp_explain.setText("Why?")
        self.nsp_explain.setToolTip("Which tokens make the model say B follows A (the Explain tab)")
        self.sentence_target = ("nsp", 0)  # what "Why?" asks: B follows A, or (ALBERT) A then B in order
        self.nsp_explain.clicked.connect(lambda: self.explainRequested.emit(self.sentence_target))

        # The pane beside the attention is narrow and shares its height with the logit lens: the NSP heading shares
        # its line with the answer, and the table asks for the room its rows and bars need (`_fit_table`).
        nsp_row = QHBoxLayout()
        nsp_row.addWidget(title)
        nsp_row.addWidget(self.nsp_label, 1)
        nsp_row.addWidget(self.nsp_explain)
        layout.addLayout(nsp_row)
        layout.addWidget(self.nsp_bar)
        layout.addWidget(self.mlm_title)
        layout.addWidget(self.note_label)  # only when there is no table to show: it says why
        layout.addWidget(self.view, 1)
        self.show_inspection(None)

    def write_csv(self, path) -> Path:
        """One row per (masked position, rank): position, what the model saw, the answer, token, probability."""
        from explorer.common.export_data import write_rows_csv

        if not self.model.predictions:
            raise ValueError("there are no predictions to export; mask a token first")
        rows = [["position", "model saw", "original token", "rank", "predicted token", "probability"]]
        for prediction in self.model.predictions:
            for rank, (token, probability) in enumerate(
                    zip(prediction.top_tokens, prediction.top_probabilities, strict=True), start=1):
                rows.append([str(prediction.position), prediction.input_token, prediction.original_token,
                             str(rank), token, f"{float(probability):.6g}"])
        return write_rows_csv(path, rows)

    def _show_note_or_table(self, headless: bool) -> None:
        """The note under the heading says why there is no table; with predictions there is no note, and for a
        model with neither head (`headless`: the NSP line said so) neither heading, note nor table."""
        if self.model.predictions or headless:
            self.note_label.setText("")
        self.note_label.setVisible(bool(self.note_label.text()))
        self.view.setVisible(not self.note_label.text() and not headless)
        self.mlm_title.setVisible(not headless)
        count = len(self.model.predictions)
        where = f" at {count} position{'s' if count != 1 else ''}" if count else ""
        self.mlm_title.setText(f"<b>Masked-token predictions</b>{where} (green: the original)")
        self._fit_table()

    def _size_columns(self) -> None:
        """The words' columns as wide as their widest cell or heading (set here: asked of the view, they were
        measured through every cell after each change); the k bars share what is left of the width."""
        header = self.view.horizontalHeader()
        widths = self.model.fixed_widths(self.view.fontMetrics())
        font = header.font().key()
        if self._heading_widths[0] != font:  # the headings' own widths, asked of the style once per font
            self._heading_widths = (font, [header.sectionSizeHint(column) for column in range(len(FIXED_COLUMNS))])
        for column in range(self.model.columnCount()):
            mode = QHeaderView.ResizeMode.Fixed if column < len(FIXED_COLUMNS) else QHeaderView.ResizeMode.Stretch
            if header.sectionResizeMode(column) != mode:  # (setting it again lays the sections out again)
                header.setSectionResizeMode(column, mode)
            if column < len(FIXED_COLUMNS):
                width = max(widths[column], self._heading_widths[1][column])
                if header.sectionSize(column) != width:
                    header.resizeSection(column, width)

    def _fit_table(self) -> None:
        """Ask for the room the table's rows (up to ROWS_ALWAYS_SHOWN) and readable bars need: the window's
        splitters give a widget at least its minimum, so at the default size nothing is cut off. Measured again
        only when what it depends on changed (a keystroke mostly keeps the rows and the word columns' widths)."""
        view, header = self.view, self.view.horizontalHeader()
        fixed_widths = tuple(header.sectionSize(column)
                             for column in range(min(len(FIXED_COLUMNS), self.model.columnCount())))
        key = (self.model.rowCount(), self.model.top_k, fixed_widths, view.font().key())
        if key == self._fitted_for:
            return
        self._fitted_for = key
        rows = min(max(1, self.model.rowCount()), ROWS_ALWAYS_SHOWN)
        frame = 2 * view.frameWidth()
        view.setMinimumHeight(header.sizeHint().height() + rows * view.verticalHeader().defaultSectionSize() + frame)
        metrics = view.fontMetrics()
        fixed = sum(fixed_widths)
        bar = metrics.horizontalAdvance("0.013%") + 8  # the longest percentage, with the cell's margins
        bars = self.model.top_k * bar
        scroll = view.verticalScrollBar().sizeHint().width() if self.model.rowCount() > ROWS_ALWAYS_SHOWN else 0
        view.setMinimumWidth(fixed + bars + frame + scroll if bars else 0)

    def show_inspection(self, inspection, *, has_pair: bool | None = None) -> None:
        masking = None if inspection is None else inspection.masking
        self._original_ids = list(masking.original_ids) if masking is not None else []
        headless = self._show(inspection, has_pair)
        has_sop_head = inspection is not None and getattr(inspection, "in_order_probability", None) is not None
        self.sentence_target = ("sop", 0) if has_sop_head else ("nsp", 0)
        self.nsp_explain.setVisible(inspection is not None and (_heads_of(inspection)[1] or has_sop_head))
        self._show_note_or_table(headless)

    def target_at(self, index: QModelIndex) -> tuple | None:
        """The explanation target a click on `index` asks for: a guess, or the answer; None for the other cells."""
        if not index.isValid():
            return None
        prediction = self.model.predictions[index.row()]
        rank = index.column() - len(FIXED_COLUMNS)
        if 0 <= rank < len(prediction.top_ids):
            return ("mlm", int(prediction.position), int(prediction.top_ids[rank]))
        if index.column() == 2 and prediction.position < len(self._original_ids):
            return ("mlm", int(prediction.position), int(self._original_ids[prediction.position]))
        return None

    def _on_clicked(self, index: QModelIndex) -> None:
        target = self.target_at(index)
        if target is not None:
            self.explainRequested.emit(target)

    def _show(self, inspection, has_pair: bool | None) -> bool:
        """The NSP (or SOP) line and the predictions' model; returns whether the model has neither an MLM nor an
        NSP head."""
        in_order = None if inspection is None else getattr(inspection, "in_order_probability", None)
        has_sop_head = in_order is not None  # ALBERT: sentence order where BERT has next-sentence prediction
        self.nsp_title.setText(SOP_TITLE if has_sop_head else NSP_TITLE)
        self.nsp_title.setToolTip(SOP_MEANING if has_sop_head else "")
        if inspection is None:
            for widget in (self.nsp_title, self.nsp_label, self.nsp_bar):
                widget.setVisible(True)
            self.model.set_predictions([])
            self.nsp_label.setText("–")
            self.nsp_bar.setValue(0)
            self.note_label.setText("No inspection yet.")
            return False
        if has_pair is None:
            has_pair = 1 in inspection.encoding.sequence_ids
        # A masked LM alone (BertForMaskedLM, DistilBERT, RoBERTa…) has no next-sentence head: no NSP line at all.
        has_mlm_head, has_nsp_head = _heads_of(inspection)
        # A model with neither head says so once, on the NSP line; no empty bar, heading or table under it.
        headless = not has_mlm_head and not has_nsp_head
        for widget in (self.nsp_title, self.nsp_bar):
            widget.setVisible(has_nsp_head or has_sop_head)
        self.nsp_label.setVisible(has_nsp_head or has_sop_head or headless)
        if headless:
            self.model.set_predictions([])
            self.nsp_bar.setValue(0)
            self.nsp_label.setText("This model has no MLM or NSP head (none was in its checkpoint), so it cannot "
                                   "predict masked tokens or the next sentence. Attention views still work.")
            return True
        probability = inspection.is_next_probability
        self.nsp_bar.setEnabled(has_pair and probability is not None)
        if has_sop_head:
            self.nsp_label.setText(sentence_order_text(in_order, has_pair))
            self.nsp_bar.setEnabled(has_pair)
            self.nsp_bar.setValue(round(1000 * in_order) if has_pair else 0)
        elif not has_nsp_head:
            self.nsp_label.setText("No NSP head: this model predicts masked tokens only.")
            self.nsp_bar.setValue(0)
        elif not has_pair:
            self.nsp_label.setText("Next-sentence prediction needs a pair: type a sentence B to see whether BERT "
                                   "thinks it follows A.")
            self.nsp_bar.setValue(0)
        elif probability is None:
            self.nsp_label.setText("No NSP probability in this inspection.")
            self.nsp_bar.setValue(0)
        else:
            self.nsp_label.setText(f"B follows A: {100 * probability:.1f}%")
            self.nsp_bar.setValue(round(1000 * probability))
        self.model.set_predictions(inspection.predictions, inspection.encoding.piece_style)
        if inspection.predictions:
            self._size_columns()
        else:
            self.note_label.setText("No masked positions: press “Mask like BERT” or click a token in the table.")
        return False


def _heads_of(inspection) -> tuple[bool, bool]:
    """(has MLM head, has NSP head) of the model behind an inspection. One built without the two (an older
    snapshot, a hand-made inspection) says only has_pretraining_heads, which then meant both."""
    has_mlm_head, has_nsp_head = getattr(inspection, "has_mlm_head", False), getattr(inspection, "has_nsp_head", False)
    if inspection.has_pretraining_heads and not (has_mlm_head or has_nsp_head):
        return True, True
    return has_mlm_head, has_nsp_head
