"""Every head in one sortable table: importance (raw, normalised, rank), role and where its attention goes.

objectName `importanceTable`. One row per head (layer and head 1-based, as everywhere in the window); the
normalised importance is tinted with the importance colours of the head grid, the role with its badge colour.
Sorting is numeric (a click on a header); empty cells (no importance for this model, no roles yet) sort last.
It renders an `explorer.head_lab.analyses.HeadScores` and exports it as CSV or NPZ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from explorer.common.export_data import _replace_atomically
from explorer.head_lab._qt.head_marks import badge_colour, score_colour
from explorer.head_lab.analyses import ROLE_BADGES, SHARE_COLUMNS, HeadScores

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
COLUMNS = ("layer", "head", "importance", "normalised", "rank", "role", *SHARE_COLUMNS.values(), "entropy", "on")
TIPS = {
    "importance": "Σ |∂ loss / ∂ head gate| (Michel et al. 2019): how much the loss moves, to first order, when "
                  "the head is switched off",
    "normalised": "each layer divided by its L2 norm, then min–max over the model (Michel et al.): what the "
                  "head grid colours by and what the ranking uses",
    "rank": "1 = the most important head, by the normalised importance",
    "role": "where the head's attention mostly goes (Clark et al. 2019): a kind of key holding at least half "
            "of it, else broad (high row entropy) or content (a few words picked by what they are)",
    "entropy": "mean row entropy in nats (a uniform row over n keys: log n)",
    "on": "whether the head is on in the inspector now",
}
SHARE_TIP = "share of the head's attention on {what} (rows averaged; the shares of a head sum to 1)"


class ImportanceModel(QAbstractTableModel):
    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.rows: list[dict[str, Any]] = []

    def set_rows(self, rows: list[dict[str, Any]]) -> None:
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal:
            return None
        name = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return name
        if role == Qt.ItemDataRole.ToolTipRole:
            return TIPS.get(name) or SHARE_TIP.format(what=name)
        return None

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row, name = self.rows[index.row()], COLUMNS[index.column()]
        value = row[name]
        if role == Qt.ItemDataRole.DisplayRole:
            return _text(name, value)
        if role == SORT_ROLE:
            if value is None:
                return float("-inf")
            return value if isinstance(value, str) else float(value)
        if role == Qt.ItemDataRole.BackgroundRole:
            if name == "normalised" and value is not None:
                colour = score_colour(value)
                colour.setAlpha(170)
                return colour
            if name == "role" and value:
                colour = badge_colour(ROLE_BADGES.get(value, value))
                colour.setAlpha(60)
                return colour
            if name == "on" and not value:
                return QColor("#eeeeee")
        if role == Qt.ItemDataRole.TextAlignmentRole and name not in ("role",):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


def _text(name: str, value: Any) -> str:
    if value is None:
        return ""
    if name in ("layer", "head", "rank"):
        return str(value)
    if name == "on":
        return "on" if value else "off"
    if name == "role":
        return value
    if name == "importance":
        return f"{value:.3g}"
    if name in ("normalised", "entropy"):
        return f"{value:.2f}"
    return f"{100 * value:.0f}%"


class ImportanceTable(QTableView):
    """The table of `HeadScores.rows()`; sorted by rank (most important first) until the user sorts."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("importanceTable")
        self.setAccessibleName("Head importance and roles")
        self.scores: HeadScores | None = None
        self.table_model = ImportanceModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.table_model)
        self.proxy.setSortRole(SORT_ROLE)
        self.setModel(self.proxy)
        self.setSortingEnabled(True)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.sortByColumn(COLUMNS.index("rank"), Qt.SortOrder.AscendingOrder)

    def show_scores(self, scores: HeadScores | None) -> None:
        self.scores = scores
        self.table_model.set_rows(scores.rows() if scores is not None else [])

    def column_values(self, name: str) -> list[Any]:
        """The values of one column in the order shown (tests, exports)."""
        column = COLUMNS.index(name)
        return [self.table_model.rows[self.proxy.mapToSource(self.proxy.index(row, column)).row()][name]
                for row in range(self.proxy.rowCount())]

    def write_csv(self, path) -> Path:
        """Every head, layer-major, every column (numbers unrounded)."""
        from explorer.common.export_data import write_rows_csv

        if self.scores is None:
            raise ValueError("there are no head scores to export yet")
        rows = [list(COLUMNS)] + [["" if row[name] is None else str(row[name]) for name in COLUMNS]
                                  for row in self.table_model.rows]
        return write_rows_csv(path, rows)

    def write_npz(self, path) -> Path:
        """importance, normalized, rank (L, H) when computed; role shares (L, H, C), categories, entropy,
        labels (L, H) when computed; head_mask (L, H)."""
        scores = self.scores
        if scores is None:
            raise ValueError("there are no head scores to export yet")
        arrays: dict[str, np.ndarray] = {}
        if scores.importance is not None:
            arrays.update(importance=scores.importance, normalized=scores.normalized, rank=scores.rank)
        if scores.roles is not None:
            roles = scores.roles
            arrays.update(shares=roles.shares, categories=np.asarray(roles.categories, str), entropy=roles.entropy,
                          normalized_entropy=roles.normalized_entropy, labels=np.asarray(roles.labels, str))
        if scores.head_mask is not None:
            arrays["head_mask"] = scores.head_mask

        def write(target: Path) -> None:
            with open(target, "wb") as handle:  # a handle keeps numpy from appending ".npz"
                np.savez_compressed(handle, **arrays)

        return _replace_atomically(Path(path), write)
