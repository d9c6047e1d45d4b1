"""The Runs tab's list of runs: a tick box and colour, the name, status, what it trains, its size, its steps and its
best held-out value, newest first; rendered from `WorkbenchState.listed_runs()` whenever the state says the runs
changed, the selection kept by run, ticks written back to the state."""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from explorer.runs.workbench.run_facts import FAILED, FINISHED, KIND_WORDS, RUNNING
from explorer.runs.workbench.state import RunEntry, WorkbenchState

COLUMNS = ("run", "status", "kind", "objective", "size", "steps", "best held-out")
STATUS_COLOURS = {RUNNING: "#1a7f37", FINISHED: "#24292f", FAILED: "#cf222e"}


class RunListModel(QAbstractTableModel):
    def __init__(self, state: WorkbenchState):
        super().__init__()
        self.state = state
        self.rows: list[RunEntry] = state.listed_runs()

    def refresh(self) -> None:
        self.beginResetModel()
        self.rows = self.state.listed_runs()
        self.endResetModel()

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def flags(self, index: QModelIndex):
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.column() == 0:
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        return flags

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        entry = self.rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(entry, column)
        if role == Qt.ItemDataRole.CheckStateRole and column == 0:
            return Qt.CheckState.Checked if entry.ticked else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.DecorationRole and column == 0:
            return QColor(entry.colour)
        if role == Qt.ItemDataRole.ForegroundRole and column == 1:
            return QBrush(QColor(STATUS_COLOURS.get(entry.facts.status, "#6e7781")))
        if role == Qt.ItemDataRole.ToolTipRole:
            if entry.error:
                return f"{entry.folder}\nCannot be read: {entry.error}"
            lines = [str(entry.folder)]
            if entry.facts.status_note:
                lines.append(f"{entry.facts.status or 'status'}: {entry.facts.status_note}")
            if entry.tab:
                lines.append(f"Double-click to open it in the {entry.tab} tab")
            if entry.skipped:
                lines.append(f"{entry.skipped:,} damaged line(s) skipped")
            return "\n".join(lines)
        if role == Qt.ItemDataRole.UserRole:
            return entry.run_id
        return None

    @staticmethod
    def text(entry: RunEntry, column: int) -> str:
        facts = entry.facts
        if column == 0:
            return entry.name
        if column == 1:
            return "unreadable" if entry.error else facts.status
        if column == 2:
            return KIND_WORDS.get(entry.kind, entry.kind)
        if column == 3:
            return facts.objective
        if column == 4:
            return facts.size
        if column == 5:
            if entry.last_step is None:
                return ""
            return f"{entry.last_step:,}" + (f" / {facts.planned_steps:,}" if facts.planned_steps else "")
        return entry.best_held_out()

    def setData(self, index: QModelIndex, value, role=Qt.ItemDataRole.EditRole) -> bool:
        if role == Qt.ItemDataRole.CheckStateRole and index.column() == 0:
            entry = self.rows[index.row()]
            ticked = Qt.CheckState(value) == Qt.CheckState.Checked if not isinstance(value, bool) else value
            self.state.set_ticked([entry.run_id], ticked)
            self.dataChanged.emit(index, index)
            return True
        return False


class RunList(QTableView):
    """The run table; `runActivated(run_id)` on a double-click or Enter."""

    runActivated = Signal(int)
    selectionMoved = Signal()

    def __init__(self, state: WorkbenchState):
        super().__init__()
        self.setObjectName("runList")
        self.setAccessibleName("Runs")
        self.state = state
        self.model_ = RunListModel(state)
        self.setModel(self.model_)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(22)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        for column, width in enumerate((150, 70, 90, 100, 110, 90)):
            self.setColumnWidth(column, width)
        self.doubleClicked.connect(lambda index: self.runActivated.emit(self.model_.rows[index.row()].run_id))
        self.selectionModel().selectionChanged.connect(lambda *_: self.selectionMoved.emit())
        state.runs_changed.connect(self.refresh)
        state.ticks_changed.connect(self.viewport().update)

    def refresh(self) -> None:
        selected = set(self.selected_ids())
        current = self.current_id()
        self.model_.refresh()
        selection = self.selectionModel()
        for row, entry in enumerate(self.model_.rows):
            if entry.run_id in selected:
                selection.select(self.model_.index(row, 0), selection.SelectionFlag.Select
                                 | selection.SelectionFlag.Rows)
            if entry.run_id == current:
                selection.setCurrentIndex(self.model_.index(row, 0), selection.SelectionFlag.NoUpdate)
        self.selectionMoved.emit()

    def selected_ids(self) -> list[int]:
        rows = sorted({index.row() for index in self.selectionModel().selectedRows()})
        return [self.model_.rows[row].run_id for row in rows if row < len(self.model_.rows)]

    def current_id(self) -> int | None:
        index = self.currentIndex()
        if not index.isValid() or index.row() >= len(self.model_.rows):
            return None
        return self.model_.rows[index.row()].run_id
