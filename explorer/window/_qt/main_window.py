"""The explorer's main window: the tabs, the menus (built in `menus`), the status bar, and the wiring between them.

The window's own jobs are few: it holds the "Inspect" tab (`InspectTab`) and the tabs added beside it
(`add_tab`, for any `WindowTab`: Head lab, Embeddings, What changed, Train, Fine-tune; each gets a View menu
entry and Ctrl+N, N its place), loads and saves models through a `ModelLoader`, shows what goes wrong
(`errorLabel`, plus a message box for models), and shuts every worker down before it closes.
Everything is wired here, in `_connect` and `add_tab`, through signals: no part reaches into another.

Public API (for the app, tests and benchmarks): `tabs`, `inspect_tab`, `current_pair()`, `pairChanged`,
`model_and_tokenizer()`, `load_checkpoint(path)` (a folder or a cached repo id), `open_minilm()`,
`open_model_picker()`, `open_hub_download()`, `new_untrained_model(preset)`,
`set_model(model, tokenizer, label)`, `start_up(path)`, `save_checkpoint(path)`, `is_loading()`,
`use_checkpoint(path)` (a tab's "use this model in the inspector"), `show_about()`,
`show_external_inspection(inspection, caption)`, `inspect_pair(text_a, text_b)`, `compare_checkpoints(a, b)`,
`add_tab(tab, title)`, `change_tab`, `explain_tab`, `explain_output(target)` (an output clicked in the Inspect tab),
`runs_tab` (every run on one set of axes) and `open_run_folder(folder, title)` (its "open in the Train tab"),
`tab_actions` (View ▸ a tab), `head_lab` (the HeadLabController), `inspectionShown`, `modelChanged`,
`modelLoadFailed`, `closing`; sessions (File ▸ Save session… / Open session…: `current_session()`,
`save_session(path)`, `open_session(path)`, `apply_session(session)`, explorer.window.session) and the models opened
lately (Model ▸ Open recent: `recent_models()`, `fill_recent_menu()`, `clear_recent_models()`,
explorer.window.recent_models).

A session opens in steps, since the model loads off the GUI thread: the Runs tab, the tab shown and the pair at once;
the model (unless it is the one shown); then, once an inspection of the session's pair by the model that settled is
shown, the layer, the head and the zoom. What it cannot bring back (a model or run folder no longer there, a tab this
window lacks) is said once, in the Inspect tab's error line and the status bar; the rest is restored all the same.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import PySide6
import torch
from PySide6.QtCore import QSettings, Qt, Signal, qVersion
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMessageBox, QTabWidget, QWidget

import explorer.common._qt.shortcuts as shortcuts
from bertcore.models.config import PRESETS
from explorer import APP_NAME, __version__
from explorer.common._qt.background_write import BackgroundWrite
from explorer.common._qt.gui_gc import freeze_long_lived
from explorer.common._qt.line_label import ElidedLabel
from explorer.common._qt.plain_text import plain_tooltip
from explorer.common._qt.theme import use_light_palette
from explorer.common._qt.widget_names import named
from explorer.common._qt.window_tab import WindowTab
from explorer.common.model_names import cached_repo_id
from explorer.embeddings._qt.embedding_view import EmbeddingView
from explorer.explain._qt.explain_tab import ExplainTab
from explorer.explain.state import ExplainRequest
from explorer.head_lab._qt.head_lab_controller import HeadLabController
from explorer.head_lab._qt.head_lab_tab import HeadLabTab
from explorer.inspector._qt.input_form import DEFAULT_THROTTLE_MS
from explorer.inspector._qt.inspect_tab import InspectTab
from explorer.inspector.model_info import LoadedModel, describe_model
from explorer.runs._qt.workbench.workbench_tab import RunsWorkbench
from explorer.what_changed._qt.change_tab import ChangeTab
from explorer.window._qt.hub_download_dialog import HubDownloadDialog
from explorer.window._qt.menus import add_action, build_menus
from explorer.window._qt.model_loader import LAST_CHECKPOINT_KEY, ModelLoader
from explorer.window._qt.model_picker import ModelPicker
from explorer.window.recent_models import RecentModel, from_text, menu_labels, remembered, to_text
from explorer.window.session import FILE_FILTER, SUFFIX, ModelRef, Session, SessionError, read_session, save_session

__all__ = ["LAST_CHECKPOINT_KEY", "SETTINGS_APPLICATION", "SETTINGS_ORGANISATION", "MainWindow", "default_settings"]

SETTINGS_ORGANISATION = SETTINGS_APPLICATION = APP_NAME
GEOMETRY_KEY = "window/geometry"
RECENT_MODELS_KEY = "model/recent"  # Model ▸ Open recent, newest first (JSON text: explorer.window.recent_models)
SESSION_FOLDER_KEY = "session/folder"  # where the last session was opened or saved: the dialogs start there


def default_settings() -> QSettings:
    return QSettings(SETTINGS_ORGANISATION, SETTINGS_APPLICATION)


class MainWindow(QMainWindow):
    pairChanged = Signal(str, str)  # sentence A, sentence B ("" for none), when an edit settles and encodes
    closing = Signal()  # at the start of closeEvent, before any worker is stopped
    modelChanged = Signal(object)  # the LoadedModel (model, tokenizer, info), once the Inspect tab shows it
    modelLoadFailed = Signal(str)  # the message shown; the previous model is still loaded
    inspectionShown = Signal(object)  # the Inspection, after every view has rendered it

    def __init__(self, settings: QSettings | None = None, *, device: str = "cpu",
                 throttle_ms: int = DEFAULT_THROTTLE_MS, parent: QWidget | None = None):
        super().__init__(parent)
        use_light_palette()  # the views are drawn for light: a dark desktop theme's palette made them unreadable
        self.setObjectName("mainWindow")
        self.settings = settings if settings is not None else default_settings()
        self.error_box: QMessageBox | None = None
        self.model_picker: ModelPicker | None = None  # Model ▸ Open from Hugging Face cache, once opened
        self.hub_download: HubDownloadDialog | None = None  # Model ▸ Download from the Hub, once opened
        self.about_box: QMessageBox | None = None  # Help ▸ About, the last one opened
        self._session_waiting: Session | None = None  # a session opened whose layer, head and zoom are still due
        self._session_model_pending = False  # its model is loading
        self.loader = ModelLoader(self.settings, device, parent=self)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("mainTabs")
        self.tabs.setAccessibleName("Main tabs")
        self.setCentralWidget(self.tabs)
        self.inspect_tab = InspectTab(throttle_ms)
        self.tab_actions: list[QAction] = []  # View ▸ one per tab, Ctrl+N for the N-th
        self.tab_shortcuts: list[shortcuts.Shortcut] = []
        # a model's name may be long (a Hub repo id): cut with "…" where it does not fit, never widening the window
        self.model_label = named(ElidedLabel(), "modelLabel", "Loaded model")
        self.timing_label = named(ElidedLabel(), "timingLabel", "Inspection time",
                                  "Time of the last inspection: the model's forward pass, then drawing every view")
        # its place is kept while it is empty, so a passing message cut where it begins stays clear of it once the
        # first inspection's times arrive
        self.timing_label.setFixedWidth(self.timing_label.fontMetrics().horizontalAdvance(
            "model 99,999 ms · views 9,999 ms") + 8)
        self.statusBar().addPermanentWidget(self.timing_label)
        self.statusBar().addPermanentWidget(self.model_label)
        build_menus(self)
        self._add_tab_page(self.inspect_tab, "Inspect")
        self._connect()
        # the head lab: importance, roles and logit lens of what is inspected; its tab; the embeddings
        self.head_lab = HeadLabController(self.inspect_tab.state, self.inspect_tab.attention_panel,
                                          self.inspect_tab.logit_lens, parent=self)
        self.modelChanged.connect(self.head_lab.on_model_changed)
        self.add_tab(HeadLabTab(self.head_lab), "Head lab")
        self.add_tab(EmbeddingView(), "Embeddings")
        self.change_tab = self.add_tab(ChangeTab(), "What changed")
        self.explain_tab = self.add_tab(ExplainTab(), "Explain")
        self.runs_tab = self.add_tab(RunsWorkbench(), "Runs")
        self.runs_tab.openRunFolder.connect(self.open_run_folder)
        self.inspect_tab.predictions.explainRequested.connect(self.explain_output)
        self.inspect_tab.task_output.explainRequested.connect(self.explain_output)
        self.inspect_tab.token_table.explainRequested.connect(self.explain_output)  # ELECTRA's "replaced?" cells
        self.inspectionShown.connect(self.explain_tab.on_inspection_shown)
        self.inspectionShown.connect(self._session_views_when_shown)
        self.modelChanged.connect(self._session_model_settled)
        self.modelLoadFailed.connect(self._session_model_settled)
        self._show_model_label()
        geometry = self.settings.value(GEOMETRY_KEY)
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            self.resize(1400, 900)

    def _connect(self) -> None:
        tab, loader = self.inspect_tab, self.loader
        tab.pairChanged.connect(self.pairChanged)
        tab.inspectionShown.connect(self.inspectionShown)
        tab.inspectionTimed.connect(
            lambda model_ms, views_ms: self.timing_label.setText(f"model {model_ms:.0f} ms · views {views_ms:.0f} ms"))
        tab.statusMessage.connect(self.show_status)
        loader.statusMessage.connect(self.show_status)
        loader.loaded.connect(self._install)
        loader.failed.connect(self._on_load_failed)
        loader.startupNote.connect(lambda text, is_error: self._show_error(text) if is_error else tab.show_info(text))
        loader.saved.connect(lambda path: self.show_status(f"Saved the model to {path}", 8000))
        loader.saveFailed.connect(lambda path, message: self._show_error(f"Could not save to {path}: {message}",
                                                                         dialog_title="Save failed"))

    def add_tab(self, tab: WindowTab, title: str) -> WindowTab:
        """Add `tab` beside Inspect and wire it both ways: it hears the pair and the model (now, and whenever
        they change); it may show an inspection or open a checkpoint in the Inspect tab, or ask the What
        changed tab to compare two checkpoints; it shuts down with the window."""
        self._add_tab_page(tab, title)
        self.pairChanged.connect(tab.on_pair_changed)
        self.modelChanged.connect(tab.on_model_changed)
        self.modelLoadFailed.connect(tab.on_model_load_failed)
        self.closing.connect(tab.shutdown)
        tab.showInspection.connect(self.show_external_inspection)
        tab.openCheckpoint.connect(self.use_checkpoint)
        tab.inspectPair.connect(self.inspect_pair)
        tab.compareCheckpoints.connect(self.compare_checkpoints)
        tab.on_pair_changed(*self.current_pair())
        loaded = self.inspect_tab.loaded_model()
        if loaded is not None:
            tab.on_model_changed(loaded)
        freeze_long_lived()  # the tab's widgets live as long as the window
        return tab

    def _add_tab_page(self, page: QWidget, title: str) -> None:
        """The page as the next tab, with its View menu entry and, for the first nine, Ctrl+N."""
        self.tabs.addTab(page, title)
        key = shortcuts.tab_shortcut(self.tabs.indexOf(page), title)
        action = add_action(self, self.view_menu, f"&{title} tab", lambda: self.tabs.setCurrentWidget(page),
                            QKeySequence(key.keys) if key else None)
        self.tab_actions.append(action)
        if key is not None:
            self.tab_shortcuts.append(key)

    # -- public API -------------------------------------------------------------------------------------------

    def current_pair(self) -> tuple[str, str | None]:
        """What the fields hold now; B is None when its field is blank."""
        return self.inspect_tab.current_pair()

    def model_and_tokenizer(self) -> tuple[Any, Any]:
        return self.inspect_tab.model_and_tokenizer()

    def load_checkpoint(self, path: str) -> None:
        """Open a checkpoint folder off the GUI thread; on failure the message shows and the old model stays."""
        self.loader.load_checkpoint(path)

    def use_checkpoint(self, path: str) -> None:
        """A tab's "use this model in the inspector": open the checkpoint there and bring the Inspect tab forward,
        where its loading, then the model or why it could not be opened, show."""
        self.load_checkpoint(path)
        self.tabs.setCurrentWidget(self.inspect_tab)

    def open_minilm(self) -> None:
        self.loader.open_minilm()

    def new_untrained_model(self, preset_name: str) -> None:
        self.loader.new_untrained_model(preset_name)

    def open_model_picker(self) -> ModelPicker:
        """Model ▸ Open from Hugging Face cache: list the cache (again) and show the picker; the model chosen
        loads from its snapshot folder, offline."""
        if self.model_picker is None:
            self.model_picker = ModelPicker(self)
            self.model_picker.modelChosen.connect(self.load_checkpoint)
            self.closing.connect(self.model_picker.shutdown)
        self.model_picker.refresh()
        self.model_picker.open()
        return self.model_picker

    def open_hub_download(self) -> HubDownloadDialog:
        """Model ▸ Download from the Hub: the dialog; a completed download opens in the window."""
        if self.hub_download is None:
            self.hub_download = HubDownloadDialog(self)
            self.hub_download.downloaded.connect(self.load_checkpoint)
            self.closing.connect(self.hub_download.shutdown)
        self.hub_download.show_where()
        self.hub_download.open()
        return self.hub_download

    def start_up(self, explicit_path: str | None = None) -> None:
        """Load the best model available (see explorer.window.startup) off the GUI thread."""
        self.loader.start_up(explicit_path)

    def save_checkpoint(self, path: str) -> None:
        """Write the current model in the standard folder layout (off the GUI thread)."""
        model, tokenizer = self.model_and_tokenizer()
        if model is None:
            self._show_error("There is no model to save yet.")
            return
        self.loader.save(model, tokenizer, path)

    def is_loading(self) -> bool:
        return self.loader.is_loading()

    def set_model(self, model: Any, tokenizer: Any, label: str) -> None:
        """Show a model built elsewhere; `label` names it in the title ("(untrained)" marks a fresh one)."""
        untrained = "untrained" in label.lower()
        name = label.replace("(untrained)", "").strip() if untrained else label
        self._install(LoadedModel(model, tokenizer, describe_model(model, name, untrained=untrained,
                                                                   tokenizer=tokenizer)))

    def inspect_pair(self, text_a: str, text_b: str = "") -> None:
        """Type a pair into the Inspect tab's fields, inspect it now and bring the tab to the front."""
        form = self.inspect_tab.input_form
        form.sentence_a_edit.setText(text_a)
        form.sentence_b_edit.setText(text_b or "")
        self.inspect_tab.flush_input()
        self.tabs.setCurrentWidget(self.inspect_tab)

    def compare_checkpoints(self, folder_a: str, folder_b: str) -> None:
        """Compare two checkpoints (before, after) in the What changed tab on the current input, and show it."""
        self.change_tab.compare(folder_a, folder_b)
        self.tabs.setCurrentWidget(self.change_tab)

    def open_run_folder(self, folder: str, title: str) -> None:
        """The Runs tab's "open this run": watch it in the tab named `title` (Train, Fine-tune) and show that tab,
        where it opens the run or says why not."""
        page = next((self.tabs.widget(index) for index in range(self.tabs.count())
                     if self.tabs.tabText(index) == title), None)
        if page is None:
            self.runs_tab.say(f"There is no {title} tab in this window (bert-explorer --no-training-tab)", "error")
            return
        page.watch_run_folder(folder)
        self.tabs.setCurrentWidget(page)

    def explain_output(self, target: tuple) -> None:
        """An output clicked in the Inspect tab: explain it in the Explain tab, on the input (and masking) it was
        computed on, and bring that tab forward; a target it cannot explain is said there."""
        state = self.inspect_tab.state
        inspection = state.shown_inspection()
        if state.snapshot is not None or inspection is None:
            self.inspect_tab.show_error("The Explain tab explains the loaded model's own outputs: edit the input to "
                                        "leave the training snapshot, then click the output again.")
            return
        taken = self.explain_tab.explain(ExplainRequest(target, inspection.encoding, inspection.masking, state.text_a,
                                                        state.text_b))
        if taken and state.head_mask is not None:
            self.explain_tab.state.set_message("The explanations use every head: the heads switched off in the "
                                               "Inspect tab are on here.")
        self.tabs.setCurrentWidget(self.explain_tab)

    def show_external_inspection(self, inspection: Any, caption: str) -> None:
        """Display an inspection computed elsewhere (a training snapshot), captioned, until the next edit."""
        self.inspect_tab.show_external_inspection(inspection, caption)

    # -- models -----------------------------------------------------------------------------------------------

    def _install(self, loaded: LoadedModel) -> None:
        self.inspect_tab.set_model(loaded)
        if loaded.info.path:
            self._set_recent_models(remembered(self.recent_models(), loaded.info.path, loaded.info.name))
        self._show_model_label()
        self.modelChanged.emit(loaded)
        freeze_long_lived()  # the model, and what loading it imported, live until the next model

    def _on_load_failed(self, what: str, message: str) -> None:
        text = f"Could not open {what}: {message}"
        info = self.inspect_tab.state.model_info
        if info is not None:
            text += f" — still showing {info.label}"
        self._show_error(text, dialog_title="Could not open the model")
        self.modelLoadFailed.emit(text)

    def _show_model_label(self) -> None:
        info = self.inspect_tab.state.model_info
        if info is None:
            self.model_label.setText("No model loaded yet")
            self.setWindowTitle("bert-explorer")
            return
        where = f" — {info.path}" if info.path else ""
        self.model_label.setText(info.label)
        self.model_label.setToolTip(plain_tooltip(f"{info.label}{where}"))
        self.setWindowTitle(info.label)  # Qt adds " — bert-explorer", the application's display name

    def choose_checkpoint(self) -> None:
        """Model ▸ Open checkpoint folder: a folder picked in a dialog, from the last one opened."""
        start = self.loader.last_checkpoint() or str(Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Open a BERT checkpoint folder", str(start))
        if folder:
            self.load_checkpoint(folder)

    def choose_save_folder(self) -> None:
        """Model ▸ Save as: the model into a folder named in a dialog."""
        folder, _ = QFileDialog.getSaveFileName(self, "Save the model as a checkpoint folder",
                                                str(Path.home() / "bert-checkpoint"))
        if folder:
            self.save_checkpoint(folder)

    # -- sessions -------------------------------------------------------------------------------------------------

    def current_session(self) -> Session:
        """What the window shows, as a session: the model, the pair, the tab, the layer, head and zoom of the
        attention views, the Runs tab."""
        info = self.inspect_tab.state.model_info
        model = None
        if info is not None and info.path:
            model = ModelRef(name=info.name, path=info.path, repo_id=cached_repo_id(Path(info.path)))
        elif info is not None and info.untrained and info.name in PRESETS:
            model = ModelRef(name=info.name, untrained_preset=info.name)
        text_a, text_b = self.current_pair()
        panel = self.inspect_tab.attention_panel
        view_box = panel.head_detail.plot.vb
        zoom = None
        if panel.inspection is not None and view_box.is_zoomed():
            (x0, x1), (y0, y1) = view_box.viewRange()
            zoom = ((float(x0), float(x1)), (float(y0), float(y1)))
        return Session(model=model, sentence_a=text_a, sentence_b=text_b or "",
                       tab=self.tabs.tabText(self.tabs.currentIndex()).replace("&", ""), layer=panel.layer,
                       head=panel.selected_head, zoom=zoom, runs=self.runs_tab.runs_view())

    def save_session(self, path: str | Path) -> Path | None:
        """Write the session to `path` (.bertx added when missing); a failure is said, not raised."""
        try:
            written = save_session(self.current_session(), path)
        except OSError as error:
            self._show_error(f"Could not save the session to {path}: {error}", dialog_title="Save failed")
            return None
        self.settings.setValue(SESSION_FOLDER_KEY, str(written.parent))
        self.show_status(f"Saved the session to {written}", 8000)
        return written

    def open_session(self, path: str | Path) -> Session | None:
        """Read a .bertx file and show it (`apply_session`); a file that is no session is said, nothing changes."""
        try:
            session = read_session(path)
        except SessionError as error:
            self._show_error(f"Could not open the session: {error}", dialog_title="Could not open the session")
            return None
        self.settings.setValue(SESSION_FOLDER_KEY, str(Path(path).parent))
        self.apply_session(session, Path(path).name)
        return session

    def apply_session(self, session: Session, name: str = "the session") -> None:
        """Show `session` (see the module docstring for the order); what cannot be brought back is said."""
        problems = list(session.notes)
        problems += self.runs_tab.apply_runs_view(session.runs)
        titles = [self.tabs.tabText(index).replace("&", "") for index in range(self.tabs.count())]
        if session.tab in titles:
            self.tabs.setCurrentIndex(titles.index(session.tab))
        else:
            problems.append(f"this window has no {session.tab} tab")
        form = self.inspect_tab.input_form
        form.sentence_a_edit.setText(session.sentence_a)
        form.sentence_b_edit.setText(session.sentence_b)
        self.inspect_tab.flush_input()
        self._session_waiting = session
        self._session_model_pending = False
        model = session.model
        info = self.inspect_tab.state.model_info
        if model is None:
            problems.append("it holds no model to open again; the model shown stays")
        elif model.untrained_preset:
            if not (info is not None and info.untrained and info.name == model.untrained_preset):
                if model.untrained_preset in PRESETS:
                    self._session_model_pending = True
                    self.new_untrained_model(model.untrained_preset)
                else:
                    problems.append(f"its untrained model's preset {model.untrained_preset!r} is unknown here")
        elif info is None or info.path is None or not model.path or Path(info.path) != Path(model.path):
            where = model.path if model.path and Path(model.path).is_dir() else model.repo_id
            if where:
                self._session_model_pending = True
                self.load_checkpoint(where)
            else:
                problems.append(f"its model {model.path} is no longer there"
                                + (f"; still showing {info.label}" if info is not None else ""))
        if problems:
            text = f"Opened {name}, but " + "; ".join(problems) + "."
            self._show_error(text, dialog_title="Session opened in part")
            self.show_status(text, 15000)
        else:
            self.show_status(f"Opened {name}", 8000)
        self._session_views_when_shown()

    def _session_model_settled(self, *_args) -> None:
        """The session's model loaded (the tab inspects the pair with it next) or could not be (said already)."""
        if self._session_waiting is not None and self._session_model_pending:
            self._session_model_pending = False
            self._session_views_when_shown()

    def _session_views_when_shown(self, *_args) -> None:
        """Once an inspection of the session's pair shows, by the model that settled: its layer, head and zoom."""
        session = self._session_waiting
        state = self.inspect_tab.state
        if session is None or self._session_model_pending or state.shown_inspection() is None:
            return
        if (state.text_a, state.text_b or "") != (session.sentence_a, session.sentence_b):
            return
        if getattr(state.shown_inspection(), "encoding", None) is not state.encoding:
            return  # an inspection of the input before (or of the model before): the session's is on its way
        self._session_waiting = None
        panel = self.inspect_tab.attention_panel
        panel.select_head(min(session.layer, panel.num_layers - 1), min(session.head, panel.num_heads - 1))
        if session.zoom is not None:
            view_box = panel.head_detail.plot.vb
            view_box.user_moved = True
            view_box.setRange(xRange=session.zoom[0], yRange=session.zoom[1], padding=0)

    def choose_session_to_open(self) -> None:
        """File ▸ Open session…: a .bertx file picked in a dialog."""
        path, _ = QFileDialog.getOpenFileName(self, "Open a bert-explorer session", self._session_folder(),
                                              FILE_FILTER)
        if path:
            self.open_session(path)

    def choose_session_to_save(self) -> None:
        """File ▸ Save session…: the session into a .bertx file named in a dialog."""
        path, _ = QFileDialog.getSaveFileName(self, "Save the session", str(Path(self._session_folder())
                                                                            / f"session{SUFFIX}"), FILE_FILTER)
        if path:
            self.save_session(path)

    def _session_folder(self) -> str:
        return str(self.settings.value(SESSION_FOLDER_KEY) or Path.home())

    # -- recent models -------------------------------------------------------------------------------------------

    def recent_models(self) -> list[RecentModel]:
        return from_text(self.settings.value(RECENT_MODELS_KEY))

    def _set_recent_models(self, models: list[RecentModel]) -> None:
        self.settings.setValue(RECENT_MODELS_KEY, to_text(models))

    def fill_recent_menu(self) -> None:
        """Model ▸ Open recent, as it opens: the models opened lately, newest first; one no longer there greyed,
        saying why; Clear."""
        menu = self.recent_menu
        menu.clear()
        models = self.recent_models()
        for number, (model, label) in enumerate(zip(models, menu_labels(models), strict=True), start=1):
            problem = model.problem()
            action = menu.addAction(f"&{number} {label}" if number < 10 else label)
            action.setData(model.path)
            action.setToolTip(problem or model.path)
            action.setEnabled(problem is None)
            if problem is None:
                action.triggered.connect(lambda _=False, path=model.path: self.load_checkpoint(path))
            else:
                action.setText(action.text() + " (missing)")
        if not models:
            empty = menu.addAction("No models opened yet")
            empty.setEnabled(False)
        menu.addSeparator()
        clear = menu.addAction("&Clear recent models", self.clear_recent_models)
        clear.setObjectName("clearRecentModels")
        clear.setEnabled(bool(models))

    def clear_recent_models(self) -> None:
        self._set_recent_models([])

    def export_with_dialog(self, what: str, default_name: str, write: Callable[[str], Any]) -> None:
        """Export ▸ a table: `write` to a CSV path picked in a dialog; a failure is said, not raised."""
        path, _ = QFileDialog.getSaveFileName(self, f"Export the {what} as CSV", str(Path.home() / default_name),
                                              "CSV table (*.csv)")
        if not path:
            return
        try:
            write(path)
        except (OSError, ValueError) as error:
            self._show_error(f"Could not export the {what} to {path}: {error}", dialog_title="Export failed")
            return
        self.show_status(f"Exported the {what} to {path}", 6000)

    def show_status(self, text: str, timeout_ms: int = 0) -> None:
        """A passing message in the status bar, cut with "…" where the permanent labels begin (Qt's own ran on
        under them), all of it in the status bar's tooltip while it shows."""
        bar = self.statusBar()
        first = self.timing_label  # the first permanent label (a fixed width, there even while empty)
        room = first.x() - 8 if first.isVisible() and first.x() > 48 else bar.width() - first.width() - 24
        shown = bar.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, max(0, room))
        bar.setToolTip(plain_tooltip(text) if shown != text else "")
        bar.showMessage(shown, timeout_ms)

    def show_shortcuts(self) -> QMessageBox:
        """Help ▸ Keyboard shortcuts: the table the shortcuts are installed from."""
        box = QMessageBox(QMessageBox.Icon.NoIcon, "Keyboard shortcuts", shortcuts.shortcuts_html(self.tab_shortcuts),
                          QMessageBox.StandardButton.Close, self)
        box.setObjectName("shortcutsBox")
        box.setTextFormat(Qt.TextFormat.RichText)
        box.open()
        return box

    def show_about(self) -> QMessageBox:
        """Help ▸ About: what a bug report needs, the app's version, the model open now, torch's and Qt's."""
        info = self.inspect_tab.state.model_info
        model = "none loaded yet" if info is None else info.label + (f"\n    from {info.path}" if info.path else "")
        text = (f"bert-explorer {__version__} shows the inside of BERT: its input, masking, predictions and "
                f"attention.\n\nModel: {model}\nPyTorch {torch.__version__}\n"
                f"Qt {qVersion()} (PySide6 {PySide6.__version__})")
        if self.about_box is not None:
            self.about_box.close()
        self.about_box = QMessageBox(QMessageBox.Icon.Information, "About bert-explorer", text,
                                     QMessageBox.StandardButton.Close, self)
        self.about_box.setObjectName("aboutBox")
        self.about_box.setTextFormat(Qt.TextFormat.PlainText)  # a folder's name is not markup
        self.about_box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # to paste in a report
        self.about_box.open()
        return self.about_box

    def _show_error(self, message: str, dialog_title: str | None = None) -> None:
        self.inspect_tab.show_error(message)
        if dialog_title is not None:
            if self.error_box is not None:
                self.error_box.close()
            self.error_box = QMessageBox(QMessageBox.Icon.Warning, dialog_title, message,
                                         QMessageBox.StandardButton.Ok, self)
            self.error_box.setObjectName("errorBox")
            self.error_box.setTextFormat(Qt.TextFormat.PlainText)  # a folder's or a token's name is not markup
            self.error_box.open()  # window-modal but not blocking: workers keep delivering

    # -- closing ------------------------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closing.emit()  # the tabs added beside Inspect shut down (a training run saves a checkpoint)
        self.inspect_tab.shutdown()
        self.loader.shutdown()
        BackgroundWrite.shutdown_all()  # an export still writing stops, and leaves no part of its file
        if self.error_box is not None:
            self.error_box.close()
        self.settings.setValue(GEOMETRY_KEY, self.saveGeometry())
        self.settings.sync()
        super().closeEvent(event)
