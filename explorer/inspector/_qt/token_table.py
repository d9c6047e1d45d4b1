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
`Encoding` and an optional `Masking` (plain data from bertcore) through a model, so even 512 columns
cost no per-cell widgets.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from PySide6.QtCore import QEvent, QModelIndex, QObject, QSignalBlocker, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QPainter, QPen, QStandardItem, QStandardItemModel
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
from bertcore.tokenization.pieces import describe_piece, readable_piece
from bertcore.tokenization.wordpiece import Encoding
from explorer.inspector.family_display import REPLACED_ROW_NAME
from explorer.inspector.state import Change, ExplorerState

ROWS = ("token", "token id", "segment id", "position id", "attention mask", "masking")
TOKEN_ROW, ID_ROW, SEGMENT_ROW, POSITION_ROW, ATTENTION_ROW, MASKING_ROW = range(len(ROWS))
TAG_ROW_NAME = "tag"
EXPLAINED_ROWS = {REPLACED_ROW_NAME: "rtd"}  # a row of per-position outputs -> the explain target kind of its cells

# Light fills that keep black text readable; the same colours appear in the legend.
COLOURS = {
    "[CLS]": QColor("#d9c8f0"),
    "[SEP]": QColor("#f7d59c"),
    "[PAD]": QColor("#dddddd"),
    "A": QColor("#d4e6fa"),
    "B": QColor("#d5f0d5"),
    "[UNK]": QColor("#f6b8b8"),
    MaskDecision.MASK: QColor("#ffe066"),
    MaskDecision.RANDOM: QColor("#ff9f80"),
    MaskDecision.KEEP: QColor("#9fe0d8"),
}
UNKNOWN_TOKENS = frozenset({"[UNK]", "<unk>"})  # WordPiece's and SentencePiece's unknown token
NO_SEGMENTS = "\u2014"  # "—": the model has no token types, so the segment ids it is given play no part
HIGHLIGHT = QColor(230, 50, 50)  # the frame around the hovered column; the attention views mark it in red too
LEGEND = (  # named for every family: BERT's [CLS] is RoBERTa's <s>, its [SEP] </s>, its [MASK] <mask>
    ("[CLS]", "first: [CLS], <s>"), ("[SEP]", "separator: [SEP], </s>"), ("[PAD]", "padding"), ("A", "sentence A"),
    ("B", "sentence B"), ("[UNK]", "unknown"), (MaskDecision.MASK, "→ mask token"),
    (MaskDecision.RANDOM, "→ random token"), (MaskDecision.KEEP, "kept as is"),
)


def decision_text(masking: Masking | None, position: int) -> str:
    """What BERT's masking did at this position, in words."""
    if masking is None:
        return ""
    decision = MaskDecision(masking.decisions[position])
    if decision is MaskDecision.MASK:
        return masking.masked_tokens[position]  # the model's own: [MASK], RoBERTa's <mask>
    if decision is MaskDecision.RANDOM:
        return f"random → {masking.masked_tokens[position]}"
    if decision is MaskDecision.KEEP:
        return "kept"
    return ""


class TokenTableModel(QStandardItemModel):
    """Cells are computed once per input (texts, brushes, fonts, tooltips) and stored in Qt's own items: Qt
    asks for every role of every visible cell on each paint, and a `data` written in Python made that ~1,200
    calls into Python per paint (4.5 ms for 30 tokens; the same cells from C++ items: 1.4 ms, filled in ~1 ms
    once per input)."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.encoding: Encoding | None = None
        self.masking: Masking | None = None
        self.highlighted = -1
        self.has_segments = True  # False: the segment row shows "—" (a model without token types)
        self.position_ids: list[int] | None = None  # the model's own positions; None: the encoding's 0…T−1
        self.rows: tuple[str, ...] = ROWS  # ROWS, and "tag" while a token-classification model is shown
        self._tags: list | None = None  # TagCells of the encoding shown; None: not (yet) known
        self._texts: list[list[str]] = [[] for _ in ROWS]  # [row][column]
        self._brushes: list[list[QBrush | None]] = [[] for _ in ROWS]
        self._masked: frozenset[int] = frozenset()
        self._bold = QFont()
        self._bold.setBold(True)
        self._column_labels: list[str] = []
        self._tooltips: list[str] = []  # [column], for every row but the tag row
        self._reset_cells()  # the row labels, before any input

    def set_input(self, encoding: Encoding | None, masking: Masking | None, has_segments: bool = True,
                  position_ids: list[int] | None = None) -> None:
        self.encoding, self.masking, self.has_segments = encoding, masking, has_segments
        self.position_ids = position_ids  # the model's own (RoBERTa counts from pad + 1); None: the encoding's
        if encoding is None or self.highlighted >= len(encoding):
            self.highlighted = -1
        self._tags = None  # the tags come with the inspection of this input
        self._reset_cells()

    def show_tag_row(self, shown: bool, name: str = TAG_ROW_NAME) -> None:
        """Add (or remove) the "tag" row, or another row of per-position cells under `name` (ELECTRA's "replaced?"
        row); its cells stay empty until `set_tags`."""
        rows = (*ROWS, name) if shown else ROWS
        if rows != self.rows:
            self.rows, self._tags = rows, None
            self._reset_cells()

    def set_tags(self, cells: list) -> None:
        """The tag row's cells (`task_display.TagCell`, one per position of the encoding shown)."""
        if len(self.rows) == len(ROWS) or self.encoding is None or len(cells) != len(self.encoding):
            return
        self._tags = list(cells)
        self._cache_cells()
        with QSignalBlocker(self):
            self._fill_row(len(ROWS))
        self.dataChanged.emit(self.index(len(ROWS), 0), self.index(len(ROWS), len(self.encoding) - 1))

    def _reset_cells(self) -> None:
        """Every cell anew, announced to the views as one reset (not one change per item)."""
        self.beginResetModel()
        with QSignalBlocker(self):
            self._cache_cells()
            columns = 0 if self.encoding is None else len(self.encoding)
            self.setRowCount(len(self.rows))
            self.setColumnCount(columns)
            self.setVerticalHeaderLabels(list(self.rows))
            self.setHorizontalHeaderLabels(self._column_labels)
            for column in range(columns):
                self.setHeaderData(column, Qt.Orientation.Horizontal, f"position {column}",
                                   Qt.ItemDataRole.ToolTipRole)
            self._tooltips = [self.tooltip(column) for column in range(columns)]
            for row in range(len(self.rows)):
                self._fill_row(row)
        self.endResetModel()

    def _fill_row(self, row: int) -> None:
        texts, brushes = self._texts[row], self._brushes[row]
        tag_row = row == len(ROWS)
        for column, text in enumerate(texts):
            item = QStandardItem(text)
            item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            if brushes[column] is not None:
                item.setBackground(brushes[column])
            if row == TOKEN_ROW and column in self._masked:
                item.setFont(self._bold)
            if tag_row:
                tooltip = self._tags[column].tooltip if self._tags else "the tag comes with the inspection"
                if self._tags and self.rows[row] in EXPLAINED_ROWS:
                    tooltip += "\nclick: why? (the Explain tab)"
                item.setToolTip(tooltip)
            else:
                item.setToolTip(self._tooltips[column])
            self.setItem(row, column, item)

    def _cache_cells(self) -> None:
        encoding, masking = self.encoding, self.masking
        if encoding is None:
            self._texts, self._brushes = [[] for _ in self.rows], [[] for _ in self.rows]
            self._masked, self._column_labels = frozenset(), []
            return
        columns = range(len(encoding))
        self._texts = [
            shown_tokens(encoding),
            [str(i) for i in encoding.input_ids],
            [str(i) for i in encoding.segment_ids] if self.has_segments else [NO_SEGMENTS] * len(encoding),
            [str(i) for i in (encoding.position_ids if self.position_ids is None else self.position_ids)],
            [str(i) for i in encoding.attention_mask],
            [decision_text(masking, column) for column in columns],
        ]
        brushes = {key: QBrush(colour) for key, colour in COLOURS.items()}
        kind_brushes = [brushes[self.kind(column)] for column in columns]
        decisions = [MaskDecision(d) for d in masking.decisions] if masking is not None else []
        decision_brushes = [brushes[d] if d else None for d in decisions] or [None] * len(encoding)
        self._brushes = [kind_brushes] * MASKING_ROW + [decision_brushes]
        if len(self.rows) > len(ROWS):  # the tag row, or another row of cells (show_tag_row)
            tags = self._tags or []
            self._texts.append([cell.text for cell in tags] or [""] * len(encoding))
            self._brushes.append([QBrush(QColor(cell.colour)) if cell.colour else None for cell in tags]
                                 or [None] * len(encoding))
        self._masked = frozenset(column for column, d in enumerate(decisions) if d)
        self._column_labels = [str(column) for column in columns]

    def set_highlighted(self, position: int) -> None:
        previous, self.highlighted = self.highlighted, position
        for column in (previous, position):
            if self.encoding is not None and 0 <= column < len(self.encoding):
                self.dataChanged.emit(self.index(0, column), self.index(len(self.rows) - 1, column))

    def cell_text(self, row: int, column: int) -> str:
        return self._texts[row][column]

    def explain_target(self, row: int, column: int) -> tuple | None:
        """The output a cell shows, as an explain target (ELECTRA's "replaced?" cell: ("rtd", position)); None for
        the input's own rows, and for a row whose cells have not come yet."""
        if row < len(ROWS) or row >= len(self.rows) or not self._tags or self.rows[row] not in EXPLAINED_ROWS:
            return None
        return (EXPLAINED_ROWS[self.rows[row]], column)

    def kind(self, column: int) -> str:
        """The colour key of a position: "[PAD]" for padding, "[CLS]" for the layout's first token and "[SEP]" for
        its others (<s> and </s> alike), "[UNK]", or the segment "A"/"B" of a sentence's token."""
        encoding = self.encoding
        if not encoding.attention_mask[column]:
            return "[PAD]"
        sequence = encoding.sequence_ids[column]
        if sequence is None:
            return "[CLS]" if column == 0 else "[SEP]"
        if encoding.tokens[column] in UNKNOWN_TOKENS:
            return "[UNK]"
        return "A" if sequence == 0 else "B"

    def tooltip(self, column: int) -> str:
        encoding = self.encoding
        lines = [f"position {column}: {encoding.tokens[column]!r} (id {encoding.input_ids[column]})"]
        sequence = encoding.sequence_ids[column]
        if sequence is not None and readable_piece(encoding.tokens[column], encoding.piece_style) != \
                encoding.tokens[column]:
            lines.append(describe_piece(encoding.tokens[column], encoding.piece_style))
        if not self.has_segments:
            lines.append("this model has no token types: the segment ids play no part")
        if sequence is None:
            lines.append("added by the model's layout (never masked)")
        else:
            start, end = encoding.offsets[column]
            lines.append(f"sentence {'AB'[sequence]}, characters {start}–{end}")
            lines.append("click to mask / unmask this token")
        decision = decision_text(self.masking, column)
        if decision:
            lines.append(f"masking: {decision} (the model must predict {self.masking.original_tokens[column]!r})")
            unit = unit_text(self.masking, column)
            if unit:
                lines.append(unit)
        return "\n".join(lines)


def unit_text(masking: Masking, position: int) -> str:
    """For whole-word and span masking: the word or span this picked position belongs to, which shares its decision."""
    kind = {"whole-word": "word", "span": "span"}.get(masking.recipe or "")
    if kind is None or not masking.units or not masking.units[position]:
        return ""
    unit = masking.units[position]
    pieces = [token for token, other in zip(masking.original_tokens, masking.units, strict=True) if other == unit]
    return (f"{kind} {unit} of {masking.num_units}: {' '.join(pieces)!r}, picked and decided as one "
            f"({len(pieces)} token{'s' if len(pieces) != 1 else ''})")


def shown_tokens(encoding: Encoding) -> list[str]:
    """The token row: each sentence token as a readable piece, the layout's special tokens as they are."""
    return [token if sequence is None else readable_piece(token, encoding.piece_style)
            for token, sequence in zip(encoding.tokens, encoding.sequence_ids, strict=True)]


def write_rows_csv(path: str | Path, rows: list[list[str]]) -> Path:
    """Write a CSV next to the target and move it into place, so a failed write leaves no half file."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(rows)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


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
        """Show the input `state` shows (a snapshot's while one is), redrawn whenever it announces a change of it."""
        state.changed.connect(self._on_state_changed)
        self._show_state(state)

    def _on_state_changed(self, state: ExplorerState, what: Change) -> None:
        if what in (Change.MODEL, Change.INPUT, Change.MASKING, Change.SNAPSHOT):
            self._show_state(state)

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
        tokens = shown_tokens(encoding)
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
