"""The Runs tab's list of runs, narrow as TensorBoard's and W&B's: a tick box and the run's colour (the plots' colour
key), its name, status, steps and best held-out value, newest first; what it trains, its kind and size as columns a
right-click on the header shows, and everything about a run in its row's tooltip. Rendered from
`WorkbenchState.listed_runs()` whenever the state says the runs changed (the same runs in the same order: only
their cells change, no relayout), the selection kept by run, ticks written back to the state."""

from __future__ import annotations

import html

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QTableView

from explorer.runs.workbench.run_facts import FAILED, FINISHED, KIND_WORDS, RUNNING
from explorer.runs.workbench.state import RunEntry, WorkbenchState

COLUMNS = ("run", "status", "steps", "best", "kind", "objective", "size")
RUN, STATUS, STEPS, BEST, KIND, OBJECTIVE, SIZE = range(len(COLUMNS))
HIDDEN_AT_FIRST = (KIND, OBJECTIVE, SIZE)  # in every row's tooltip; a right-click on the header shows them
WIDTHS = {STATUS: 60, STEPS: 58, BEST: 54, KIND: 90, OBJECTIVE: 100, SIZE: 100}
HEADER_TIPS = {BEST: "The best held-out value so far (the main metric of a fine-tuning run, else the held-out "
                     "loss); its metric and step in the row's tooltip",
               STEPS: "The newest step logged; of how many planned, in the row's tooltip"}
STATUS_COLOURS = {RUNNING: "#1a7f37", FINISHED: "#24292f", FAILED: "#cf222e"}


class RunListModel(QAbstractTableModel):
    def __init__(self, state: WorkbenchState):
        super().__init__()
        self.state = state
        self.rows: list[RunEntry] = state.listed_runs()

    def refresh(self) -> None:
        rows = self.state.listed_runs()
        if [entry.run_id for entry in rows] == [entry.run_id for entry in self.rows]:
            self.rows = rows  # the same runs in the same order: their cells, not the table's layout
            if rows:
                self.dataChanged.emit(self.index(0, 0), self.index(len(rows) - 1, len(COLUMNS) - 1))
            return
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008 (Qt's signature)
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:  # noqa: B008
        return len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal:
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        if role == Qt.ItemDataRole.ToolTipRole:
            return HEADER_TIPS.get(section)
        return None

    def flags(self, index: QModelIndex):
        flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if index.column() == RUN:
            flags |= Qt.ItemFlag.ItemIsUserCheckable
        return flags

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        entry = self.rows[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.text(entry, column)
        if role == Qt.ItemDataRole.CheckStateRole and column == RUN:
            return Qt.CheckState.Checked if entry.ticked else Qt.CheckState.Unchecked
        if role == Qt.ItemDataRole.DecorationRole and column == RUN:
            return QColor(entry.colour)
        if role == Qt.ItemDataRole.ForegroundRole and column == STATUS:
            return QBrush(QColor(STATUS_COLOURS.get(entry.facts.status, "#6e7781")))
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (STEPS, BEST):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.tooltip(entry)
        if role == Qt.ItemDataRole.UserRole:
            return entry.run_id
        return None

    @staticmethod
    def text(entry: RunEntry, column: int) -> str:
        facts = entry.facts
        if column == RUN:
            return entry.name
        if column == STATUS:
            return "unreadable" if entry.error else facts.status
        if column == STEPS:
            return "" if entry.last_step is None else f"{entry.last_step:,}"
        if column == BEST:
            best = entry.best_held_out_point()
            return "" if best is None else f"{best[1]:.4g}"
        if column == KIND:
            return KIND_WORDS.get(entry.kind, entry.kind)
        if column == OBJECTIVE:
            return facts.objective
        return facts.size

    @staticmethod
    def tooltip(entry: RunEntry) -> str:
        """Everything the row knows: the folder, status and why, kind, objective, size, steps of how many, the best
        held-out value with its metric and step, skipped lines, and what a double-click does."""
        facts = entry.facts
        lines = [f"<b>{html.escape(entry.name)}</b>", html.escape(str(entry.folder))]
        if entry.error:
            return "<br>".join([*lines, f"<span style='color:#cf222e'>Cannot be read: {html.escape(entry.error)}"
                                        "</span>"])
        status = facts.status + (f": {facts.status_note}" if facts.status_note else "")
        what = " · ".join(part for part in (KIND_WORDS.get(entry.kind, entry.kind), facts.objective, facts.size)
                          if part)
        lines += [html.escape(part) for part in (status, what) if part]
        if entry.last_step is not None:
            lines.append(f"step {entry.last_step:,}" + (f" of {facts.planned_steps:,}" if facts.planned_steps else ""))
        best = entry.best_held_out()
        if best:
            lines.append(f"best held-out: {html.escape(best)}")
        if entry.skipped:
            lines.append(f"{entry.skipped:,} damaged line(s) skipped")
        if entry.tab:
            lines.append(f"<i>Double-click to open it in the {entry.tab} tab</i>")
        return "<br>".join(lines)

    def setData(self, index: QModelIndex, value, role=Qt.ItemDataRole.EditRole) -> bool:
        if role == Qt.ItemDataRole.CheckStateRole and index.column() == RUN:
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
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # "lr-3e-4/…/seed-2": both ends say which run
        self.setWordWrap(False)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(22)
        header = self.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(RUN, QHeaderView.ResizeMode.Stretch)
        for column, width in WIDTHS.items():
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            self.setColumnWidth(column, width)
        for column in HIDDEN_AT_FIRST:
            self.setColumnHidden(column, True)
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(self._header_menu)
        self.doubleClicked.connect(lambda index: self.runActivated.emit(self.model_.rows[index.row()].run_id))
        self.selectionModel().selectionChanged.connect(lambda *_: self.selectionMoved.emit())
        state.runs_changed.connect(self.refresh)
        state.ticks_changed.connect(self.viewport().update)

    def _header_menu(self, position) -> QMenu:
        """Which columns show (every column but the run's name)."""
        menu = QMenu(self)
        menu.setObjectName("runColumnsMenu")
        for column in range(1, len(COLUMNS)):
            action = menu.addAction(COLUMNS[column])
            action.setCheckable(True)
            action.setChecked(not self.isColumnHidden(column))
            action.toggled.connect(lambda on, column=column: self.setColumnHidden(column, not on))
        menu.popup(self.horizontalHeader().mapToGlobal(position))
        return menu

    def shown_columns(self) -> list[str]:
        return [name for column, name in enumerate(COLUMNS) if not self.isColumnHidden(column)]

    def refresh(self) -> None:
        selected = set(self.selected_ids())
        current = self.current_id()
        before = [entry.run_id for entry in self.model_.rows]
        self.model_.refresh()
        if [entry.run_id for entry in self.model_.rows] == before:
            return  # the same rows: the selection stands
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
