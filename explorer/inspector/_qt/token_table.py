"""BERT's input as a table: one column per position, one row per thing the model is given.

Rows: the token, its id, the segment id, the position id, the attention mask and the masking decision, and
for a token-classification model a "tag" row: the predicted tag of each word, coloured by tag
(`show_tag_row`, `set_tags`; `explorer.inspector.task_display.tag_cells` decides the cells), or ELECTRA's
"replaced?" row, whose cells a click asks to explain (`explainRequested(("rtd", position))`, the Explain tab).
Tokens are shown as readable pieces whatever the family (bertcore.tokenization.pieces: "␣" where a space comes
before a piece, "·" where a WordPiece continues a word, byte-level BPE's bytes as text), the raw piece on hover;
the segment row says "—" for a model without token types (RoBERTa, DistilBERT, ModernBERT: `uses_segments`).
Special tokens and the two segments have their own colours (see `TokenLegend`): the layout's first token ([CLS],
<s>) and its separators ([SEP], </s>) by their place, whatever they are called; the row labels sit in the
vertical header, so they stay pinned while a 512-token input scrolls sideways. The table renders an
`Encoding` and an optional `Masking` (plain data from bertcore) through a model (`token_table_model`), so even
512 columns cost no per-cell widgets.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QModelIndex, QObject, QSignalBlocker, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QWidget,
)

from bertcore.data.masking import MaskDecision, Masking
from bertcore.models.families import model_position_ids, uses_segments
from bertcore.tasks.kinds import TOKEN_TASK
from bertcore.tokenization.pieces import readable_tokens
from bertcore.tokenization.wordpiece import Encoding
from explorer.common.export_data import write_rows_csv
from explorer.inspector._qt.token_table_model import (
    COLOURS,
    TAG_ROW_NAME,
    TokenTableModel,
    decision_text,
)
from explorer.inspector.family_display import REPLACED_ROW_NAME, replaced_cells
from explorer.inspector.state import Change, ExplorerState
from explorer.inspector.task_display import tag_cells

HIGHLIGHT = QColor(230, 50, 50)  # the frame around the hovered column; the attention views mark it in red too
LEGEND = (  # named for every family: BERT's [CLS] is RoBERTa's <s>, its [SEP] </s>, its [MASK] <mask>
    ("[CLS]", "first: [CLS], <s>"), ("[SEP]", "separator: [SEP], </s>"), ("[PAD]", "padding"), ("A", "sentence A"),
    ("B", "sentence B"), ("[UNK]", "unknown"), (MaskDecision.MASK, "→ mask token"),
    (MaskDecision.RANDOM, "→ random token"), (MaskDecision.KEEP, "kept as is"),
)


class HighlightDelegate(QStyledItemDelegate):
    """Draws the cell as usual, then a red frame around the highlighted column (its colours stay readable)."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        super().paint(painter, option, index)
        model = index.model()
        if index.column() != model.highlighted:
            return
        painter.save()
        painter.setPen(QPen(HIGHLIGHT, 3))
        rect = option.rect.adjusted(1, 0, -2, -1)
        painter.drawLine(rect.topLeft(), rect.bottomLeft())
        painter.drawLine(rect.topRight(), rect.bottomRight())
        if index.row() == 0:
            painter.drawLine(rect.topLeft(), rect.topRight())
        if index.row() == model.rowCount() - 1:
            painter.drawLine(rect.bottomLeft(), rect.bottomRight())
        painter.restore()


class TokenTable(QTableView):
    positionClicked = Signal(int)  # a click on the input's rows: mask / unmask the token there
    positionHovered = Signal(int)  # -1 when the mouse leaves the table
    explainRequested = Signal(object)  # a click on an output's cell: its bertcore.explain target, ("rtd", position)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("tokenTable")
        self.setAccessibleName("Token table")
        self.setAccessibleDescription("One column per input position: token, ids, segment, position, mask")
        self.table_model = TokenTableModel(self)
        self.setModel(self.table_model)
        # Only the highlighted column gets the Python delegate: one per cell costs ~35 µs × every cell × paint.
        self.highlight_delegate = HighlightDelegate(self)
        self.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setMouseTracking(True)
        self.setWordWrap(False)
        self.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.horizontalHeader().setMinimumSectionSize(28)
        self.clicked.connect(self._activate)
        self.entered.connect(lambda index: self._hover(index.column()))
        self.viewport().installEventFilter(self)
        self._hovered = -1
        self._height_fitted = False
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)  # a steady height, long input or short
        self._fit_height()

    def _fit_height(self) -> None:
        """Exactly the header, every row and the scroll bar: the table never needs to scroll vertically."""
        rows = self.table_model.rowCount() * self.verticalHeader().defaultSectionSize()
        header = max(self.horizontalHeader().sizeHint().height(), self.horizontalHeader().height())
        scroll_bar = self.horizontalScrollBar().sizeHint().height()
        self.setFixedHeight(header + rows + scroll_bar + 2 * self.frameWidth() + 2)

    def show_tag_row(self, shown: bool, name: str = TAG_ROW_NAME) -> None:
        """A "tag" row under the others, for a token-classification model (or ELECTRA's "replaced?" row, by its
        `name`); the table grows to hold it."""
        self.table_model.show_tag_row(shown, name)
        self._fit_height()

    def set_tags(self, cells: list) -> None:
        """The tag row's cells for the input shown (ignored when they are of another input)."""
        self.table_model.set_tags(cells)
        header, metrics = self.horizontalHeader(), QFontMetrics(self.font())
        for column in range(min(len(cells), self.table_model.columnCount())):
            width = metrics.horizontalAdvance(cells[column].text) + 14
            if width > header.sectionSize(column):
                header.resizeSection(column, width)

    def follow(self, state: ExplorerState) -> None:
        """Show the input `state` shows (a snapshot's while one is) and the tag row of its inspection, redrawn
        whenever it announces a change of them."""
        state.changed.connect(self._on_state_changed)
        self._fit_tag_row(state)
        self._show_state(state)
        self._show_tags(state)

    def _on_state_changed(self, state: ExplorerState, what: Change) -> None:
        # In this order: a tag row added or taken away empties its cells, and the tags are matched to the input.
        if what in (Change.MODEL, Change.SNAPSHOT):
            self._fit_tag_row(state)
        if what in (Change.MODEL, Change.INPUT, Change.MASKING, Change.SNAPSHOT):
            self._show_state(state)
        if what in (Change.INSPECTION, Change.SNAPSHOT):
            self._show_tags(state)

    def _fit_tag_row(self, state: ExplorerState) -> None:
        """A token-classification model's "tag" row, or ELECTRA's discriminator's "replaced?" row (the live
        model's, under any snapshot that has no task head of its own)."""
        heads = state.shown_heads()
        if heads is None:
            return
        task, info = heads[1], state.model_info
        replaced_row = task is None and info is not None and info.has_replaced_token_head
        self.show_tag_row(task == TOKEN_TASK or replaced_row, REPLACED_ROW_NAME if replaced_row else TAG_ROW_NAME)

    def _show_tags(self, state: ExplorerState) -> None:
        """The tag row's cells, from the shown inspection when it is of the input the table shows: a token
        classifier's tags, or ELECTRA's discriminator's probabilities."""
        inspection, shown = state.shown_inspection(), self.table_model.encoding
        if inspection is None or shown is None or shown.tokens != inspection.encoding.tokens:
            return
        output = inspection.task_output
        if output is not None and output.kind == TOKEN_TASK:
            self.set_tags(tag_cells(output, inspection.encoding.tokens))
        elif getattr(inspection, "replaced_probabilities", None) is not None:
            self.set_tags(replaced_cells(inspection))

    def _show_state(self, state: ExplorerState) -> None:
        encoding, masking = state.shown_input()
        model = state.model
        positions = None if model is None or encoding is None else model_position_ids(model, encoding.input_ids)
        self.set_input(encoding, masking, has_segments=model is None or uses_segments(model), position_ids=positions)

    def set_input(self, encoding: Encoding | None, masking: Masking | None, has_segments: bool = True,
                  position_ids: list[int] | None = None) -> None:
        """Show an input; has_segments=False writes "—" in the segment row (a model without token types);
        position_ids: the model's own positions where they are not the encoding's 0…T−1 (RoBERTa's)."""
        self.table_model.set_input(encoding, masking, has_segments, position_ids)
        if encoding is None:
            return
        # Widths from the text itself: ResizeToContents would measure every cell again on each layout.
        metrics = QFontMetrics(self.font())
        bold = QFont(self.font())
        bold.setBold(True)
        bold_metrics = QFontMetrics(bold)
        padding = 14
        header = self.horizontalHeader()
        tokens = readable_tokens(encoding)
        # Each resized section would start the view's column-resize timer, which repaints every cell once more
        # after the paint of the new cells (a second full paint per key press): resize quietly, lay out once.
        with QSignalBlocker(header):
            for column in range(len(encoding)):
                texts = [tokens[column], str(encoding.input_ids[column]), decision_text(masking, column)]
                width = max(bold_metrics.horizontalAdvance(texts[0]),
                            *(metrics.horizontalAdvance(text) for text in texts[1:]))
                header.resizeSection(column, max(width + padding, 28))
        self.updateGeometries()
        self.viewport().update()
        if not self._height_fitted:  # the header's height is known once it has sections
            self._fit_height()
            self._height_fitted = True

    def write_csv(self, path: str | Path) -> Path:
        """The table as shown: a header row of positions, then one row per table row, labelled."""
        model = self.table_model
        if model.encoding is None:
            raise ValueError("the token table is empty; type a sentence first")
        rows = [["", *(str(column) for column in range(model.columnCount()))]]
        rows += [[label, *(model.cell_text(row, column) for column in range(model.columnCount()))]
                 for row, label in enumerate(model.rows)]
        return write_rows_csv(path, rows)

    def highlight_position(self, position: int) -> None:
        """Mark one column (e.g. the token under the mouse in an attention view); -1 clears it."""
        previous = self.table_model.highlighted
        if position == previous:
            return
        if previous >= 0:
            self.setItemDelegateForColumn(previous, None)
        if position >= 0:
            self.setItemDelegateForColumn(position, self.highlight_delegate)
        self.table_model.set_highlighted(position)
        if position >= 0 and position < self.table_model.columnCount():
            self.scrollTo(self.table_model.index(0, position), QAbstractItemView.ScrollHint.EnsureVisible)

    def _activate(self, index: QModelIndex) -> None:
        """A click (or Space/Enter) on a cell: explain the output it shows, or else mask / unmask its token."""
        target = self.table_model.explain_target(index.row(), index.column())
        if target is not None:
            self.explainRequested.emit(target)
        else:
            self.positionClicked.emit(index.column())

    def _hover(self, position: int) -> None:
        if position != self._hovered:
            self._hovered = position
            self.positionHovered.emit(position)

    def keyPressEvent(self, event) -> None:
        # Space or Enter does what a click on the current cell does.
        if event.key() in (Qt.Key.Key_Space, Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.currentIndex().isValid():
            self._activate(self.currentIndex())
            event.accept()
            return
        super().keyPressEvent(event)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.viewport() and event.type() == QEvent.Type.Leave:
            self._hover(-1)
        return super().eventFilter(watched, event)


class TokenLegend(QWidget):
    """Colour swatches explaining the table: special tokens, the segments, [UNK], the masking decisions."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("tokenLegend")
        self.setAccessibleName("Token colour legend")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        for key, text in LEGEND:
            swatch = QLabel(text)
            swatch.setTextFormat(Qt.TextFormat.PlainText)  # "<s>" is RoBERTa's token, not a strike-through tag
            swatch.setStyleSheet(
                f"background: {COLOURS[key].name()}; color: black; border: 1px solid #999;"
                " border-radius: 3px; padding: 1px 5px;"
            )
            layout.addWidget(swatch)
        layout.addStretch(1)
