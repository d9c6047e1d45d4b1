"""The Runs tab (`runsWorkbench`): every run a user has on one set of axes, live.

Left: the runs of the runs folder and of every folder added (*Add folder…*; a folder of many runs adds them all),
newest first, with status, objective, size, steps and best held-out value; tick runs to overlay them; a regex
filter on their names. Double-clicking a bert-train or bert-finetune run opens it in the Train or Fine-tune tab
(`openRunFolder`); *Use this model in the inspector* opens any checkpoint of the selected run (`openCheckpoint`).
Right: the plots (explorer.runs._qt.workbench.metric_plots) with their controls above them (smoothing from 0 to
0.999, the x axis, log x and y, ignoring outliers, a regex filter on metric names, metrics every run shares), and
the ticked runs' settings side by side, the rows where they differ marked. Export: a CSV of every shown point, raw
and smoothed; each plot exports itself as PNG or SVG.

The runs are found and read by a `RunFollower` in a worker thread (`GeneratorWorker`: the follower's rounds are its
steps, a stop request sets the follower's stop flag); what it yields reaches `WorkbenchState.apply` as plain records.
The worker starts when the tab is first shown, and stops, joined, when the window closes (`shutdown`).
"""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSizePolicy,
    QSlider,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from explorer import APP_NAME
from explorer.common._qt.exporting import export_with_dialog
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.common._qt.window_tab import WindowTab
from explorer.common._qt.workers.generator import GeneratorWorker
from explorer.runs._qt.workbench.metric_plots import MetricPlots
from explorer.runs._qt.workbench.run_list import RunList
from explorer.runs.workbench.follower import RunFollower, follow
from explorer.runs.workbench.overlay import X_AXES
from explorer.runs.workbench.state import MAX_SMOOTHING, RunsView, WorkbenchState

FOLDERS_KEY = "runs/folders"  # QSettings: the folders added, searched again at the next start
SLIDER_STEPS = 1000  # the smoothing slider's positions: 0 … 0.999 in thousandths
LIST_WIDTH = 380  # px: the run list's side, narrow as TensorBoard's (its columns: name, status, steps, best)
DIFFERS = QColor("#fff3bf")


class ConfigTable(QTableWidget):
    """The ticked runs' settings side by side; rows where they differ are marked (and may be shown alone)."""

    def __init__(self, state: WorkbenchState):
        super().__init__()
        self.setObjectName("configTable")
        self.setAccessibleName("Settings of the ticked runs")
        self.state = state
        self.differing_only = False
        self._stale = False  # changed while hidden: filled in when shown
        self.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.verticalHeader().setDefaultSectionSize(20)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        state.ticks_changed.connect(self.refresh)
        state.runs_changed.connect(self.refresh)

    def set_differing_only(self, only: bool) -> None:
        self.differing_only = bool(only)
        self.refresh()

    def refresh(self) -> None:
        if not self.isVisible() and self.rowCount():
            self._stale = True
            return
        self._stale = False
        names, rows = self.state.config_rows(self.differing_only)
        self.setColumnCount(len(names))
        self.setHorizontalHeaderLabels(names)
        self.setRowCount(len(rows))
        self.setVerticalHeaderLabels([key for key, _, _ in rows])
        bold = QFont()
        bold.setBold(True)
        for row, (key, values, differs) in enumerate(rows):
            header = self.verticalHeaderItem(row)
            if differs and header is not None:
                header.setFont(bold)
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setToolTip(f"{key} = {value}" if value else f"{names[column]} does not record {key}")
                if differs:
                    item.setBackground(QBrush(DIFFERS))
                self.setItem(row, column, item)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._stale:
            self.refresh()


class RunsWorkbench(WindowTab):
    """See the module docstring."""

    openRunFolder = Signal(str, str)  # run folder, the tab to open it in ("Train" or "Fine-tune")

    def __init__(self, parent: QWidget | None = None, *, folders: list[str] | None = None,
                 settings: QSettings | None = None, interval_s: float = 1.0, start_on_show: bool = True):
        super().__init__(parent)
        self.setObjectName("runsWorkbench")
        self.state = WorkbenchState()
        self.follower = RunFollower(interval_s=interval_s)
        self.settings = settings
        self.worker: GeneratorWorker | None = None
        self._stop = threading.Event()
        self._start_on_show = start_on_show
        self._initial_folders = folders
        self.batches_applied = 0

        # ---- left: the runs
        self.add_button = named(QPushButton("Add folder…"), "addRunsFolderButton", "Add a folder of runs",
                                "A run folder (bert-train, bert-finetune), a Hugging Face Trainer output folder or a "
                                "TensorBoard log folder; a folder holding many runs adds them all")
        self.add_button.clicked.connect(self.choose_folder)
        self.run_filter = named(QLineEdit(), "runFilterEdit", "Filter runs",
                                "A regular expression matched against run names and folders (case ignored)")
        self.run_filter.setPlaceholderText("filter runs (regex)")
        self.run_filter.textChanged.connect(self._run_filter_changed)
        self.run_filter_error = named(QLabel(""), "runFilterError", "Run filter error")
        self.run_filter_error.setStyleSheet("color: #cf222e")
        self.run_filter_error.setWordWrap(True)  # a regex's error names the pattern: never widen the window
        self.run_filter_error.setVisible(False)
        self.run_list = RunList(self.state)
        self.run_list.runActivated.connect(self.open_in_tab)
        self.run_list.selectionMoved.connect(self._selection_moved)
        self.tick_selected_button = named(QPushButton("Tick selected"), "tickSelectedButton", "Tick selected runs")
        self.tick_selected_button.clicked.connect(lambda: self.state.set_ticked(self.run_list.selected_ids(), True))
        self.untick_button = named(QPushButton("Untick all"), "untickAllButton", "Untick every run")
        self.untick_button.clicked.connect(lambda: self.state.set_ticked(list(self.state.runs), False))
        self.open_button = named(QPushButton("Open in its tab"), "openRunButton", "Open the run in its tab",
                                 "Open the selected bert-train run in the Train tab, a bert-finetune run in the "
                                 "Fine-tune tab (also: double-click)")
        self.open_button.clicked.connect(lambda: self.open_in_tab(self.run_list.current_id()))
        self.inspect_button = named(QToolButton(), "useCheckpointButton", "Use a checkpoint in the inspector")
        self.inspect_button.setText("Use this model in the inspector")
        self.inspect_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.inspect_button.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.inspect_menu = QMenu(self.inspect_button)
        self.inspect_button.setMenu(self.inspect_menu)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(self.add_button)
        top.addWidget(self.run_filter, 1)
        left_layout.addLayout(top)
        left_layout.addWidget(self.run_filter_error)
        left_layout.addWidget(self.run_list, 1)
        for row in ((self.tick_selected_button, self.untick_button, self.open_button), (self.inspect_button,)):
            buttons = QHBoxLayout()
            for button in row:
                buttons.addWidget(button, 1)
            left_layout.addLayout(buttons)

        # ---- right: the controls and the plots
        self.smoothing_slider = named(QSlider(Qt.Orientation.Horizontal), "smoothingSlider", "Smoothing",
                                      "TensorBoard's smoothing: a debiased exponential moving average (0 = none); the "
                                      "raw values stay faint behind")
        self.smoothing_slider.setRange(0, round(MAX_SMOOTHING * SLIDER_STEPS))
        self.smoothing_slider.setValue(round(self.state.smoothing * SLIDER_STEPS))
        self.smoothing_slider.valueChanged.connect(self._smoothing_moved)
        self.smoothing_label = named(QLabel(f"{self.state.smoothing:.3f}"), "smoothingValue", "Smoothing weight")
        self.axis_box = named(QComboBox(), "xAxisBox", "X axis")
        for key, words in X_AXES.items():
            self.axis_box.addItem(words, key)
        self.axis_box.currentIndexChanged.connect(lambda _: self.state.set_axis(self.axis_box.currentData()))
        self.log_x_check = named(QCheckBox("log x"), "logXCheck", "Log x axis")
        self.log_x_check.toggled.connect(lambda on: self.state.set_log(x=on))
        self.log_y_check = named(QCheckBox("log y"), "logYCheck", "Log y axis")
        self.log_y_check.toggled.connect(lambda on: self.state.set_log(y=on))
        self.outliers_check = named(QCheckBox("ignore outliers"), "ignoreOutliersCheck", "Ignore outliers",
                                    "Scale each plot's values to the 5th-95th percentile of each curve, as "
                                    "TensorBoard's \"ignore outliers in chart scaling\"")
        self.outliers_check.setChecked(self.state.ignore_outliers)
        self.outliers_check.toggled.connect(self.state.set_ignore_outliers)
        self.metric_filter = named(QLineEdit(), "metricFilterEdit", "Filter metrics",
                                   "A regular expression matched against metric names (case ignored)")
        self.metric_filter.setPlaceholderText("filter metrics (regex)")
        self.metric_filter.textChanged.connect(self._metric_filter_changed)
        self.shared_check = named(QCheckBox("shared only"), "sharedOnlyCheck", "Only metrics every ticked run has")
        self.shared_check.toggled.connect(self.state.set_shared_only)
        self.export_button = named(QPushButton("Export CSV…"), "exportCsvButton", "Export the shown values as CSV",
                                   "Every point of the shown plots, raw and smoothed (not only what is drawn)")
        self.export_button.clicked.connect(lambda: export_with_dialog(self, "the shown values", "runs.csv",
                                                                      self.state.export_csv))
        self.metric_filter_error = named(QLabel(""), "metricFilterError", "Metric filter error")
        self.metric_filter_error.setStyleSheet("color: #cf222e")
        self.metric_filter_error.setWordWrap(True)
        self.metric_filter_error.setVisible(False)
        self.message_label = named(QLabel(""), "workbenchMessage", "Runs tab message")
        self.message_label.setWordWrap(True)
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        controls = QHBoxLayout()
        for widget in (QLabel("smoothing"), self.smoothing_slider, self.smoothing_label, QLabel("x"), self.axis_box,
                       self.log_x_check, self.log_y_check, self.outliers_check, self.metric_filter, self.shared_check,
                       self.export_button):
            controls.addWidget(widget)
        controls.setStretchFactor(self.smoothing_slider, 2)
        controls.setStretchFactor(self.metric_filter, 2)
        self.plots = MetricPlots(self.state)
        self.config_table = ConfigTable(self.state)
        self.differing_check = named(QCheckBox("only the settings that differ"), "differingOnlyCheck",
                                     "Only the settings that differ")
        self.differing_check.toggled.connect(self.config_table.set_differing_only)
        config_page = QWidget()
        config_layout = QVBoxLayout(config_page)
        config_layout.addWidget(self.differing_check)
        config_layout.addWidget(self.config_table, 1)
        self.pages = QTabWidget()
        self.pages.setObjectName("workbenchPages")
        self.pages.addTab(self.plots, "Curves")
        self.pages.addTab(config_page, "Settings side by side")
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addLayout(controls)
        right_layout.addWidget(self.metric_filter_error)
        right_layout.addWidget(self.pages, 1)
        right_layout.addWidget(self.message_label)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setStretchFactor(0, 0)
        splitter.setSizes([LIST_WIDTH, 1200])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(splitter)
        self.state.message.connect(self.say)
        self.state.runs_changed.connect(self._runs_changed)
        self._selection_moved()

    # ---- the follower
    def start(self) -> None:
        """Search the runs folder and the folders added before, and start following them (once)."""
        if self.worker is not None:
            return
        for folder in self._folders_to_search():
            self.add_folder(folder, remember=False)
        self.worker = GeneratorWorker(lambda: follow(self.follower, self._stop), stop_hook=self._stop.set,
                                      niceness=5, name="runsFollowerThread")
        self.worker.yielded.connect(self._apply)
        self.worker.errored.connect(lambda failure, _last: self.say(f"Reading the runs stopped: {failure.text}",
                                                                    "error"))
        self.worker.start()

    def _folders_to_search(self) -> list[str]:
        if self._initial_folders is not None:
            return list(self._initial_folders)
        from explorer.runs._qt.form_fields import default_runs_dir

        folders = [str(default_runs_dir())]
        saved = self._settings().value(FOLDERS_KEY, [])
        saved = [saved] if isinstance(saved, str) else list(saved or [])
        return folders + [folder for folder in saved if folder not in folders]

    def _settings(self) -> QSettings:
        return self.settings if self.settings is not None else QSettings(APP_NAME, APP_NAME)

    def _apply(self, records: list) -> None:
        self.state.apply(records)
        self.batches_applied += 1

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._start_on_show:
            self.start()

    def shutdown(self, timeout_ms: int = 120_000) -> bool:
        self.plots.shutdown()
        if self.worker is None:
            return True
        return self.worker.shutdown(timeout_ms)

    # ---- folders
    def choose_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder of runs (bert-train, Trainer, TensorBoard)",
                                                  str(self.state.folders[-1] if self.state.folders else Path.home()))
        if folder:
            self.add_folder(folder)

    def add_folder(self, folder: str, remember: bool = True) -> None:
        """Follow the runs in `folder` and below it; remembered for the next start."""
        path = Path(folder).expanduser()
        if not path.is_dir():
            if remember:
                self.say(f"{path} is not a folder; pick a run folder or a folder of runs", "error")
            return
        if path not in self.state.folders:
            self.state.folders.append(path)
        self.follower.add_folder(path)
        if remember:
            saved = [str(folder) for folder in self.state.folders]
            self._settings().setValue(FOLDERS_KEY, saved)
            self.say(f"Looking for runs in {path}…", "info")

    # ---- what the user does
    def _smoothing_moved(self, position: int) -> None:
        weight = position / SLIDER_STEPS
        self.smoothing_label.setText(f"{weight:.3f}")
        self.state.set_smoothing(weight)

    def _run_filter_changed(self, text: str) -> None:
        error = self.state.set_run_filter(text)
        self.run_filter_error.setText(f"Run filter: {error}" if error else "")
        self.run_filter_error.setVisible(bool(error))

    def _metric_filter_changed(self, text: str) -> None:
        error = self.state.set_metric_filter(text)
        self.metric_filter_error.setText(f"Metric filter: {error}" if error else "")
        self.metric_filter_error.setVisible(bool(error))

    def open_in_tab(self, run_id: int | None) -> None:
        entry = self.state.runs.get(run_id) if run_id is not None else None
        if entry is None:
            return
        if entry.tab is None:
            self.say(f"{entry.name} is a {self.state.kind_words(entry)} run; the Train and Fine-tune tabs open "
                     "bert-train and bert-finetune runs. Its curves are here.", "info")
            return
        self.openRunFolder.emit(str(entry.folder), entry.tab)

    def _selection_moved(self) -> None:
        entry = self.state.runs.get(self.run_list.current_id()) if self.run_list.current_id() is not None else None
        self.open_button.setEnabled(entry is not None and entry.tab is not None)
        self.inspect_menu.clear()
        checkpoints = entry.facts.checkpoints if entry is not None else ()
        for label, folder in reversed(checkpoints):
            self.inspect_menu.addAction(label, lambda folder=folder: self.openCheckpoint.emit(folder))
        self.inspect_button.setEnabled(bool(checkpoints))
        self.inspect_button.setToolTip("Open a checkpoint of the selected run in the Inspect tab" if checkpoints else
                                       "The selected run has no checkpoint (yet)" if entry is not None else
                                       "Select a run first")

    def _runs_changed(self) -> None:
        if not self.state.runs:
            return
        self._selection_moved()

    def say(self, text: str, kind: str = "info") -> None:
        self.message_label.setStyleSheet("color: #cf222e" if kind == "error" else "")
        self.message_label.setText(text)

    # ---- sessions (explorer.window.session)
    def runs_view(self) -> RunsView:
        """The tab as a session keeps it: the folders added, the runs ticked, how the plots draw, the filters."""
        state = self.state
        return RunsView(folders=tuple(str(folder) for folder in state.folders),
                        ticked=tuple(state.ticked_folders()), smoothing=state.smoothing, axis=state.mode.axis,
                        log_x=state.mode.log_x, log_y=state.mode.log_y, ignore_outliers=state.ignore_outliers,
                        shared_only=state.shared_only, run_filter=state.run_filter_text,
                        metric_filter=state.metric_filter_text)

    def apply_runs_view(self, view: RunsView) -> list[str]:
        """Show the runs as a session kept them: its folders followed (besides those already), its runs ticked (when
        found), the rest as it says. Returns what could not be brought back, in words (a folder no longer here)."""
        missing = []
        for folder in view.folders:
            if Path(folder).expanduser().is_dir():
                self.add_folder(folder, remember=False)
            else:
                missing.append(f"the runs folder {folder} is not here")
        missing += [f"the run {folder} is not here" for folder in view.ticked
                    if not Path(folder).expanduser().is_dir()]
        self.state.tick_only(view.ticked)
        self.set_smoothing(view.smoothing)
        index = self.axis_box.findData(view.axis)
        self.axis_box.setCurrentIndex(index if index >= 0 else 0)
        for check, on in ((self.log_x_check, view.log_x), (self.log_y_check, view.log_y),
                          (self.outliers_check, view.ignore_outliers), (self.shared_check, view.shared_only)):
            check.setChecked(on)
        self.run_filter.setText(view.run_filter)
        self.metric_filter.setText(view.metric_filter)
        if missing:
            self.say("From the session: " + "; ".join(missing), "error")
        return missing

    # ---- for tests and the window
    def set_smoothing(self, weight: float) -> None:
        with blocked(self.smoothing_slider):
            self.smoothing_slider.setValue(round(weight * SLIDER_STEPS))
        self._smoothing_moved(round(weight * SLIDER_STEPS))
