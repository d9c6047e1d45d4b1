"""Model ▸ Open from Hugging Face cache…: every model the local cache holds, in a table to filter and open.

The listing (bertcore.models.hub_listing.scan_cache) reads config.json and the weights' headers of every cached repo,
which takes a moment on a large cache or a network home folder, so it runs in a `OneShotWorker`. Nothing here
reaches the network: the row opened is a snapshot folder, which the window loads like any checkpoint folder.
What cannot be opened is listed too, greyed and not selectable, with the reason in the Head column (after the head,
for a model this program cannot open yet) and the whole story in its tooltip: a family or a tokenizer this program
does not read, and a repo folder that is broken (no config.json, a ref naming no snapshot, another model family,
unreadable). A user who downloaded a model never finds it simply missing; "Show the ones that cannot be opened"
hides them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QPalette, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from bertcore.models.hub import default_cache_dir
from bertcore.models.hub_listing import BrokenCacheEntry, CachedModel, CacheListing, scan_cache
from explorer.common._qt.widget_names import named
from explorer.common._qt.workers.one_shot import OneShotWorker

COLUMNS = ("Name", "Size on disk", "Parameters", "Layers × heads", "Head", "Last used")
MODEL_ROLE = Qt.ItemDataRole.UserRole  # the row's CachedModel or BrokenCacheEntry, on its name cell
SORT_ROLE = Qt.ItemDataRole.UserRole + 1  # a number (or lower-case name) to sort a column by
OPENABLE_ROLE = Qt.ItemDataRole.UserRole + 2  # whether the row can be opened, on its name cell
NOT_KNOWN = "—"  # a cell a broken entry has nothing for


class _CacheRows(QSortFilterProxyModel):
    """The rows shown: those whose name holds the filter text, and those that cannot be opened only when asked."""

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self.show_unopenable = True

    def set_show_unopenable(self, show: bool) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt 6.9 and later
            self.beginFilterChange()
            self.show_unopenable = show
            self.endFilterChange()
        else:
            self.show_unopenable = show
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        name = self.sourceModel().index(source_row, 0, source_parent)
        if not self.show_unopenable and not name.data(OPENABLE_ROLE):
            return False
        return super().filterAcceptsRow(source_row, source_parent)


class ModelPicker(QDialog):
    """The cached models as a table; `modelChosen(folder)` when the user opens one."""

    modelChosen = Signal(str)  # the snapshot folder to load
    listed = Signal(int)  # how many models the listing found, openable or not (tests, and the status line)

    def __init__(self, parent: QWidget | None = None, *, scan: Callable[[], CacheListing] = scan_cache):
        super().__init__(parent)
        self.setObjectName("modelPicker")
        self.setWindowTitle("Open from the Hugging Face cache")
        self._scan = scan
        self._job = 0
        self._workers: dict[int, OneShotWorker] = {}
        self._listing: CacheListing | None = None
        self.filter_edit = named(QLineEdit(), "modelFilter", "Filter models by name",
                                 "Shows the models whose repo id contains this text (case does not matter)")
        self.filter_edit.setPlaceholderText("Filter by name, e.g. bert-base")
        self.filter_edit.setClearButtonEnabled(True)
        self.rows = QStandardItemModel(0, len(COLUMNS), self)
        self.rows.setHorizontalHeaderLabels(list(COLUMNS))
        self.proxy = _CacheRows(self)
        self.proxy.setSourceModel(self.rows)
        self.proxy.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.proxy.setFilterKeyColumn(0)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = named(QTableView(), "cachedModels", "Cached models")
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSortingEnabled(True)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)  # a repo id broken over two lines reads as two names
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(COLUMNS.index("Head"), QHeaderView.ResizeMode.Stretch)
        self.show_unopenable = named(QCheckBox("Show the ones that cannot be opened"), "showUnopenable",
                                     "Show the cached models that cannot be opened",
                                     "Greyed rows: a repo this program cannot open yet, or one whose download is "
                                     "broken; the Head column says why, its tooltip says what to do")
        self.show_unopenable.setChecked(True)
        self.status_label = named(QLabel(), "cacheStatus", "Cache status")
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
        self.open_button = self.buttons.button(QDialogButtonBox.StandardButton.Open)
        named(self.open_button, "openCachedModel", "Open the selected model")
        self.open_button.setEnabled(False)

        layout = QVBoxLayout(self)
        layout.addWidget(self.filter_edit)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.show_unopenable)
        layout.addWidget(self.status_label)
        layout.addWidget(self.buttons)
        self.resize(1100, 420)

        self.filter_edit.textChanged.connect(self.proxy.setFilterFixedString)
        self.show_unopenable.toggled.connect(self.proxy.set_show_unopenable)
        self.show_unopenable.toggled.connect(self._show_status)
        self.filter_edit.returnPressed.connect(self.open_selected)
        self.table.doubleClicked.connect(self._open_index)
        self.table.selectionModel().selectionChanged.connect(self._update_open_button)
        self.proxy.modelReset.connect(self._update_open_button)
        self.proxy.rowsRemoved.connect(self._update_open_button)
        self.buttons.accepted.connect(self.open_selected)
        self.buttons.rejected.connect(self.reject)

    # ---- listing ----
    def refresh(self) -> None:
        """List the cache again, off the GUI thread (the newest listing asked for wins)."""
        self._job += 1
        worker = OneShotWorker(self._job, self._scan, name="cacheListThread")
        worker.done.connect(self._on_listed)
        worker.failed.connect(self._on_list_failed)
        self.status_label.setText(f"Reading the Hugging Face cache at {default_cache_dir()}…")
        self._workers[worker.key] = worker
        worker.finished.connect(lambda: self._forget(worker.key))
        worker.start()

    def is_listing(self) -> bool:
        return any(worker.is_running for worker in self._workers.values())

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Join the listings still running (they read headers only, and end by themselves)."""
        return all([worker.wait(timeout_ms) for worker in list(self._workers.values())])

    def _forget(self, key: int) -> None:
        worker = self._workers.pop(key, None)
        if worker is not None:
            worker.wait()  # `finished` comes just before its thread ends
            worker.deleteLater()

    def _on_listed(self, job: int, listing: CacheListing) -> None:
        if job != self._job:
            return
        self.table.setSortingEnabled(False)  # rows are appended in the listing's order (newest used first)
        self.rows.removeRows(0, self.rows.rowCount())
        greyed = self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
        for entry in [*listing.models, *listing.broken]:
            self.rows.appendRow(_row(entry, greyed))
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(5, Qt.SortOrder.DescendingOrder)
        self._listing = listing
        self._show_status()
        self._select_first_openable()
        self.listed.emit(len(listing.models) + len(listing.broken))

    def _show_status(self, *_args) -> None:
        if self._listing is not None:
            self.status_label.setText(_status_text(self._listing, self.show_unopenable.isChecked()))

    def _on_list_failed(self, job: int, failure) -> None:
        if job == self._job:
            self.status_label.setText(f"Could not list the Hugging Face cache at {default_cache_dir()}: "
                                      f"{failure.text}")
            self.listed.emit(0)

    # ---- choosing ----
    def visible_repo_ids(self) -> list[str]:
        """The repo ids the table shows now, top to bottom (after filtering and sorting)."""
        return [self.proxy.index(row, 0).data() for row in range(self.proxy.rowCount())]

    def select(self, repo_id: str) -> bool:
        """Select the row of `repo_id` if it is shown and can be opened."""
        for row in range(self.proxy.rowCount()):
            index = self.proxy.index(row, 0)
            if index.data() == repo_id and index.flags() & Qt.ItemFlag.ItemIsSelectable:
                self.table.selectRow(row)
                return True
        return False

    def selected_model(self) -> CachedModel | None:
        rows = self.table.selectionModel().selectedRows(0)
        entry = rows[0].data(MODEL_ROLE) if rows else None
        return entry if isinstance(entry, CachedModel) else None

    def open_selected(self) -> None:
        model = self.selected_model()
        if model is None or not model.supported_now:
            return
        self.accept()
        self.modelChosen.emit(str(model.folder))

    def _open_index(self, index: QModelIndex) -> None:
        if index.siblingAtColumn(0).data(OPENABLE_ROLE):
            self.table.selectRow(index.row())
            self.open_selected()

    def _select_first_openable(self) -> None:
        for row in range(self.proxy.rowCount()):
            if self.proxy.index(row, 0).flags() & Qt.ItemFlag.ItemIsSelectable:
                self.table.selectRow(row)
                return
        self._update_open_button()

    def _update_open_button(self, *_args) -> None:
        model = self.selected_model()
        self.open_button.setEnabled(model is not None and model.supported_now)


def _status_text(listing: CacheListing, unopenable_shown: bool) -> str:
    cache = listing.cache
    if listing.problem is not None:
        return f"Could not read the Hugging Face cache: {listing.problem}"
    if not listing.models and not listing.broken:
        return (f"No models in the Hugging Face cache at {cache}. Download one with Model ▸ Download from the Hub…, "
                "or set HF_HUB_CACHE (or HF_HOME) to the cache you use.")
    openable = sum(model.supported_now for model in listing.models)
    unopenable = len(listing.models) + len(listing.broken) - openable
    if not unopenable:
        greyed = ""
    elif unopenable_shown:
        greyed = f"; {unopenable} greyed cannot be opened (the Head column says why; hover for more)"
    else:
        greyed = f"; {unopenable} that cannot be opened are hidden"
    return f"{openable} model{'' if openable == 1 else 's'} to open in {cache}{greyed}."


def _row(entry: CachedModel | BrokenCacheEntry, greyed: object) -> list[QStandardItem]:
    if isinstance(entry, BrokenCacheEntry):
        cells = [(entry.name, entry.name.lower()), (NOT_KNOWN, -1), (NOT_KNOWN, -1), (NOT_KNOWN, -1),
                 (entry.reason, entry.reason), _last_used_cell(entry.last_used)]
        tip = f"{entry.name} cannot be opened: {entry.detail}\n{entry.folder}"
        openable = False
    else:
        model = entry
        layers = (f"{model.num_layers} × {model.num_heads}"
                  if model.num_layers is not None and model.num_heads is not None else "?")
        parameters = "?" if model.parameters is None else ("~" if model.parameters_estimated else "") + count_text(
            model.parameters)
        head = model.head if model.supported_now else f"{model.head} · {model.unsupported_reason}"
        cells = [
            (model.repo_id, model.repo_id.lower()),
            (size_text(model.size_bytes), model.size_bytes),
            (parameters, -1 if model.parameters is None else model.parameters),
            (layers, (model.num_layers or 0) * 10_000 + (model.num_heads or 0)),
            (head, model.head),
            _last_used_cell(model.last_used),
        ]
        tip = (f"{model.repo_id}: {model.describe()}\n{model.folder}" if model.supported_now else
               f"{model.repo_id} cannot be opened: {model.unsupported_reason}\n{model.folder}")
        openable = model.supported_now
    items = []
    for text, sort_key in cells:
        item = QStandardItem(text)
        item.setData(sort_key, SORT_ROLE)
        item.setToolTip(tip)
        if openable:
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
        else:
            item.setFlags(Qt.ItemFlag.ItemIsEnabled)  # shown, with its tooltip, but not selectable
            item.setForeground(greyed)
        items.append(item)
    items[0].setData(entry, MODEL_ROLE)
    items[0].setData(openable, OPENABLE_ROLE)
    if isinstance(entry, CachedModel) and entry.parameters_estimated:
        items[2].setToolTip("Estimated from the size of pytorch_model.bin, as if every tensor were float32")
    return items


def _last_used_cell(last_used: float) -> tuple[str, float]:
    return (time.strftime("%Y-%m-%d %H:%M", time.localtime(last_used)) if last_used else NOT_KNOWN), last_used


def count_text(parameters: int) -> str:
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if parameters >= scale:
            return f"{parameters / scale:.1f}{suffix}"
    return str(parameters)


def size_text(size_bytes: int) -> str:
    for scale, suffix in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {suffix}"
    return f"{size_bytes} B"
