"""The token table's cells, computed once per input: one column per position, one row per thing the model is given
(token, ids, segment, position, attention mask, masking decision), and a "tag" row or ELECTRA's "replaced?" row of
per-position outputs; the texts, colours and tooltips each cell shows, without a view."""

from __future__ import annotations

from PySide6.QtCore import QObject, QSignalBlocker, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QStandardItem, QStandardItemModel

from bertcore.data.masking import MaskDecision, Masking
from bertcore.tokenization.pieces import describe_piece, readable_piece, readable_tokens
from bertcore.tokenization.wordpiece import Encoding
from explorer.common._qt.plain_text import plain_tooltip
from explorer.inspector.family_display import REPLACED_ROW_NAME

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
                item.setToolTip(plain_tooltip(tooltip))
            else:
                item.setToolTip(plain_tooltip(self._tooltips[column]))
            self.setItem(row, column, item)

    def _cache_cells(self) -> None:
        encoding, masking = self.encoding, self.masking
        if encoding is None:
            self._texts, self._brushes = [[] for _ in self.rows], [[] for _ in self.rows]
            self._masked, self._column_labels = frozenset(), []
            return
        columns = range(len(encoding))
        self._texts = [
            readable_tokens(encoding),
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
