"""The masked-token predictions as a table: one row per masked position, its fixed columns (position, what the model
saw, the answer) and then the top-k guesses, each painted as a bar as long as its probability, green where the
guess is the original token. What the cells say is written once per inspection; the delegate paints every cell
itself, and the word columns are as wide as `fixed_widths` says. The panel around it (the NSP line, the note, the
room it asks for): `predictions_view`."""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QRectF, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPalette
from PySide6.QtWidgets import QStyledItemDelegate, QStyleOptionViewItem

from bertcore.data.masking import MaskDecision
from bertcore.tokenization.pieces import readable_piece
from explorer.common._qt.plain_text import plain_tooltip

PROBABILITY_ROLE = Qt.ItemDataRole.UserRole + 1  # float in [0, 1] for the bar
CORRECT_ROLE = Qt.ItemDataRole.UserRole + 2  # True where the guess is the original token
FIXED_COLUMNS = ("pos", "model saw", "answer")
BAR_COLOUR = QColor("#8fb3e0")
TEXT_MARGIN = 3  # a text cell's, as the style's item views have
LEFT_MIDDLE = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
LEFT_TOP = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
RIGHT_BOTTOM = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignBottom)
ELIDE_RIGHT = Qt.TextElideMode.ElideRight
CORRECT_COLOUR = QColor("#7cc47c")


def percent(probability: float) -> str:
    """Readable at both ends: "87.3%", and "0.013%" for an untrained model's near-uniform guesses."""
    value = 100 * probability
    if value >= 0.1:
        return f"{value:.1f}%"
    return f"{value:.3f}%" if value >= 0.001 else "<0.001%"


def _decision_word(prediction, piece_style: str) -> str:
    decision = MaskDecision(prediction.decision)
    shown = readable_piece(prediction.input_token, piece_style)
    if decision is MaskDecision.RANDOM:
        return f"{shown} (random)"
    if decision is MaskDecision.KEEP:
        return f"{shown} (kept)"
    return shown


class PredictionsModel(QAbstractTableModel):
    """One row per masked position: its fixed columns, then the top-k guesses. What the cells say is written once
    per inspection (`set_predictions`), not at each of a paint's many `data` calls."""

    # the roles the cells answer: a view asks for a dozen per cell and paint; the rest get None at once
    ANSWERED_ROLES = frozenset({int(Qt.ItemDataRole.DisplayRole), int(Qt.ItemDataRole.ToolTipRole),
                                int(PROBABILITY_ROLE), int(CORRECT_ROLE)})

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.predictions: list = []
        self.top_k = 0
        self.piece_style = "wordpiece"  # the tokenizer's word marks: cells show readable pieces, tooltips raw ones
        self._fixed: list[tuple[str, str, str]] = []  # per row: position, what the model saw, the answer
        self._guesses: list[list[tuple[str, str, float, bool]]] = []  # per row: (piece, percent, probability, right)

    def set_predictions(self, predictions: list, piece_style: str = "wordpiece") -> None:
        """New predictions. As many rows and guesses as shown already (a keystroke, mostly): the cells change in
        place; otherwise the table is reset (which makes the view lay its rows and columns out again)."""
        top_k = max((len(p.top_tokens) for p in predictions), default=0)
        in_place = bool(predictions) and len(predictions) == len(self.predictions) and top_k == self.top_k
        if not in_place:
            self.beginResetModel()
        self.predictions = list(predictions)
        self.piece_style = piece_style
        self.top_k = top_k
        self._fixed = [(str(p.position), _decision_word(p, piece_style), readable_piece(p.original_token, piece_style))
                       for p in self.predictions]
        self._guesses = [[(readable_piece(token, piece_style), percent(float(probability)), float(probability),
                           token == p.original_token)
                          for token, probability in zip(p.top_tokens, p.top_probabilities, strict=True)]
                         for p in self.predictions]
        if in_place:
            self.dataChanged.emit(self.index(0, 0), self.index(self.rowCount() - 1, self.columnCount() - 1))
        else:
            self.endResetModel()

    def fixed_widths(self, metrics: QFontMetrics) -> list[int]:
        """How wide each fixed column's cells are drawn at their widest (0 with no rows)."""
        return [max((text_cell_width(metrics, texts[column]) for texts in self._fixed), default=0)
                for column in range(len(FIXED_COLUMNS))]

    def fixed_text(self, row: int, column: int) -> str:
        """What a fixed column's cell says ("" for the others)."""
        return self._fixed[row][column] if column < len(FIXED_COLUMNS) else ""

    def guess(self, row: int, column: int) -> tuple[str, str, float, bool] | None:
        """(piece, percent, probability, whether it is the original) of a top-k cell; None for the others."""
        rank = column - len(FIXED_COLUMNS)
        guesses = self._guesses[row]
        return guesses[rank] if 0 <= rank < len(guesses) else None

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self.predictions)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(FIXED_COLUMNS) + self.top_k

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if role != Qt.ItemDataRole.DisplayRole or orientation != Qt.Orientation.Horizontal:
            return None
        return FIXED_COLUMNS[section] if section < len(FIXED_COLUMNS) else f"#{section - len(FIXED_COLUMNS) + 1}"

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if role not in self.ANSWERED_ROLES or not index.isValid():
            return None
        row, column = index.row(), index.column()
        if column < len(FIXED_COLUMNS):
            if role == Qt.ItemDataRole.DisplayRole:
                return self._fixed[row][column]
            return plain_tooltip(self._tooltip(row)) if role == Qt.ItemDataRole.ToolTipRole else None
        guess = self.guess(row, column)
        if guess is None:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return f"{guess[0]}  {guess[1]}"
        if role == PROBABILITY_ROLE:
            return guess[2]
        if role == CORRECT_ROLE:
            return guess[3]
        return plain_tooltip(self._tooltip(row))

    def _tooltip(self, row: int) -> str:
        prediction = self.predictions[row]
        lines = [f"position {prediction.position}: the model saw {prediction.input_token!r}, "
                 f"the original was {prediction.original_token!r}"]
        lines += [f"{token!r}: {100 * float(probability):.2f}%"
                  for token, probability in zip(prediction.top_tokens, prediction.top_probabilities, strict=True)]
        return "\n".join(lines)


class BarDelegate(QStyledItemDelegate):
    """Paints every cell itself, one Python call a cell: a fixed column's text, or a top-k guess as a bar as long as
    its probability with the token on the left and the percentage on the right. (Left to the style, a text cell
    asked the model a dozen roles and laid its text out through QTextLayout: a keystroke's table took ~2 ms.)"""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        model, row, column = index.model(), index.row(), index.column()
        rect, metrics = option.rect, option.fontMetrics
        painter.save()
        painter.setPen(option.palette.color(QPalette.ColorRole.Text))
        guess = model.guess(row, column)
        if guess is None:
            text = model.fixed_text(row, column)
            if text:
                box = rect.adjusted(TEXT_MARGIN, 0, -TEXT_MARGIN, 0)
                painter.drawText(box, LEFT_MIDDLE, metrics.elidedText(text, ELIDE_RIGHT, max(0, box.width())))
        else:
            token, value, probability, correct = guess
            bar = QRectF(rect).adjusted(2, 3, -2, -3)
            bar.setWidth(bar.width() * max(0.0, min(1.0, probability)))
            painter.fillRect(bar, CORRECT_COLOUR if correct else BAR_COLOUR)
            # Two lines, the token over its percentage, so narrow columns still show whole words.
            box = rect.adjusted(4, 2, -4, -2)
            painter.drawText(box, LEFT_TOP, metrics.elidedText(token, ELIDE_RIGHT, max(0, box.width())))
            painter.drawText(box, RIGHT_BOTTOM, value)
        painter.restore()


def text_cell_width(metrics: QFontMetrics, text: str) -> int:
    """How wide a text cell is drawn for `text`: the text and its margins (0 for none)."""
    return metrics.horizontalAdvance(text) + 2 * TEXT_MARGIN + 1 if text else 0
