"""The "Inspect" tab: type a pair, see BERT's input, its masking, predictions and attention.

A thin view over `ExplorerState`. Each settled edit (`InputForm`) re-encodes on the GUI thread (a few
milliseconds) and submits an inspection to a `LatestJobWorker`, whose newest request always wins; the token
table and the notes are refreshed while the worker computes on the other core. An inspection that arrives
is rendered by every view in `inspection_views`. Errors show in `errorLabel` and leave the previous input
and inspection on screen. An inspection computed elsewhere (a training snapshot) can be shown, captioned,
until the next edit.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

from explorer._qt.attention_panel import AttentionPanel
from explorer._qt.input_form import DEFAULT_DEBOUNCE_MS, InputForm
from explorer._qt.logit_lens_view import LogitLensView
from explorer._qt.predictions_view import PredictionsPanel
from explorer._qt.token_table import TokenLegend, TokenTable
from explorer._qt.workers import InspectionThreads, LatestJobWorker
from explorer.startup import LoadedModel
from explorer.state import ExplorerState, MaskingMode, run_inspection

ERROR_STYLE = "color: #a40000; background: #fde7e7; border: 1px solid #e0a0a0; border-radius: 3px; padding: 3px;"
WARNING_STYLE = "color: #6b4a00; background: #fff4d6; border: 1px solid #e6c66e; border-radius: 3px; padding: 3px;"
INFO_STYLE = "color: #333; background: #f0f0f0; border: 1px solid #ccc; border-radius: 3px; padding: 3px;"
CAPTION_STYLE = "color: #0b3d75; background: #e3eefb; border: 1px solid #9dbde6; border-radius: 3px; padding: 3px;"


class InspectTab(QWidget):
    pairChanged = Signal(str, str)  # sentence A, sentence B ("" for none), when an edit settles and encodes
    inspectionShown = Signal(object)  # the Inspection, after every view has rendered it
    inspectionTimed = Signal(float, float)  # milliseconds of the model's forward pass, of drawing every view
    statusMessage = Signal(str, int)  # a passing note for the status bar: text, milliseconds

    def __init__(self, debounce_ms: int = DEFAULT_DEBOUNCE_MS, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("inspectTab")
        self.state = ExplorerState()
        self._showing_external = False
        self._last_emitted_pair: tuple[str, str] | None = None
        self.last_render_ms = float("nan")
        self.inspect_worker = LatestJobWorker(run_inspection, name="inspectThread", torch_threads=InspectionThreads(),
                                              drop_superseded=True)
        self.inspect_worker.done.connect(self._on_inspected)
        self.inspect_worker.failed.connect(self._on_inspect_failed)

        self.input_form = InputForm(debounce_ms)
        self.error_label = _message_label("errorLabel", "Error message", ERROR_STYLE)
        self.warning_label = _message_label("warningLabel", "Input warnings", WARNING_STYLE)
        self.caption_label = _message_label("captionLabel", "Inspection caption", CAPTION_STYLE)
        self.info_label = _message_label("infoLabel", "Model notes", INFO_STYLE)
        self.token_table = TokenTable()
        self.legend = TokenLegend()
        self.attention_panel = AttentionPanel()
        self.predictions = PredictionsPanel()
        self.logit_lens = LogitLensView()  # fed by the head lab (explorer._qt.head_lab_controller)
        # Everything that renders an inspection (an Inspection, or None for nothing yet), in drawing order.
        self.inspection_views = (self.attention_panel.set_inspection, self.predictions.show_inspection)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setObjectName("inspectSplitter")
        splitter.addWidget(self.attention_panel)
        predictions_side = QSplitter(Qt.Orientation.Vertical)
        predictions_side.setObjectName("predictionsSplitter")
        predictions_side.addWidget(self.predictions)
        predictions_side.addWidget(self.logit_lens)
        predictions_side.setSizes([260, 420])
        splitter.addWidget(predictions_side)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([790, 650])
        layout = QVBoxLayout(self)
        for widget in (self.input_form, self.error_label, self.warning_label, self.caption_label, self.info_label,
                       self.token_table, self.legend):
            layout.addWidget(widget)
        layout.addWidget(splitter, 1)

        form = self.input_form
        form.edited.connect(self._leave_external)
        form.settled.connect(self._settle_input)
        form.maskRequested.connect(self.mask_like_bert)
        form.rerollRequested.connect(self.reroll_masking)
        form.clearRequested.connect(self.clear_masks)
        form.seedChanged.connect(self._on_seed_changed)
        form.padChanged.connect(self._on_pad_changed)
        self.token_table.positionClicked.connect(self.toggle_mask)
        self.token_table.positionHovered.connect(self._on_table_hovered)
        self.attention_panel.tokenHovered.connect(self.token_table.highlight_position)
        self.attention_panel.headMaskChanged.connect(self._on_head_mask_changed)

    # -- what the window asks ----------------------------------------------------------------------------------

    def current_pair(self) -> tuple[str, str | None]:
        return self.input_form.current_pair()

    def model_and_tokenizer(self) -> tuple[Any, Any]:
        return self.state.model, self.state.tokenizer

    def loaded_model(self) -> LoadedModel | None:
        """The model shown, with its description; None before the first."""
        state = self.state
        return None if state.model is None else LoadedModel(state.model, state.tokenizer, state.model_info)

    def set_model(self, loaded: LoadedModel) -> None:
        """Inspect with `loaded` from now on; the pair stays and is encoded again with its vocabulary."""
        self._leave_external()
        self.info_label.hide()
        self.state.set_model(loaded.model, loaded.tokenizer, loaded.info)
        for render in self.inspection_views:
            render(None)
        self.input_form.set_max_positions(loaded.info.max_positions)
        self.clear_error()
        self._settle_input()
        if self.state.encoding is None:
            self.token_table.set_input(None, None)

    def show_external_inspection(self, inspection: Any, caption: str) -> None:
        """Display an inspection computed elsewhere (a training snapshot), captioned, until the next edit."""
        self.state.supersede_requests()  # a live result still in flight must not replace it
        self._showing_external = True
        self.caption_label.setText(f"Showing: {caption} — edit the input to return to the live model")
        self.caption_label.show()
        self.token_table.set_input(inspection.encoding, inspection.masking)
        self._render(inspection)

    def show_error(self, message: str) -> None:
        self.error_label.setText(message)
        self.error_label.show()

    def clear_error(self) -> None:
        self.error_label.clear()
        self.error_label.hide()

    def show_info(self, text: str) -> None:
        self.info_label.setText(text)
        self.info_label.setVisible(bool(text))

    def flush_input(self) -> None:
        """Settle pending edits now (tests and the benchmark use it instead of waiting for the timer)."""
        self.input_form.flush()

    def shutdown(self, timeout_ms: int = 10_000) -> bool:
        """Drop pending edits, let the inspection in progress finish, end its thread."""
        self.input_form.stop()
        return self.inspect_worker.shutdown(timeout_ms)

    # -- input ---------------------------------------------------------------------------------------------------

    def _settle_input(self) -> None:
        text_a, text_b = self.current_pair()
        if self.state.tokenizer is None:
            return  # no model yet: the pair is encoded once one is installed
        try:
            self.state.set_pair(text_a, text_b)
        except ValueError as error:
            kept = " (the tables still show the last input that worked)" if self.state.encoding is not None else ""
            self.show_error(_sentence_case(str(error)) + kept)
            return
        self.clear_error()
        self._input_changed()
        pair = (text_a, text_b or "")
        if pair != self._last_emitted_pair:  # only pairs that encode: other tabs can inspect what they get
            self._last_emitted_pair = pair
            self.pairChanged.emit(*pair)

    def _input_changed(self) -> None:
        """The encoding or masking changed: ask for an inspection, then refresh the table and the notes
        while the worker computes on the other core."""
        self._request_inspection()
        notes = self.state.input_notes()
        self.warning_label.setText("\n".join(notes))
        self.warning_label.setVisible(bool(notes))
        self.token_table.set_input(self.state.encoding, self.state.masking)
        self.input_form.show_masking_summary(self.state.masking_summary())

    def _request_inspection(self) -> None:
        request = self.state.inspect_request()
        if request is not None:
            self.inspect_worker.submit(request.request_id, request)

    def _leave_external(self) -> None:
        self._showing_external = False
        self.caption_label.hide()
        self.caption_label.clear()

    def _on_pad_changed(self, pad_to: int) -> None:
        self.state.pad_to = pad_to or None
        self.input_form.flush()

    # -- masking -----------------------------------------------------------------------------------------------

    def mask_like_bert(self, seed: int | None = None) -> None:
        if self.state.encoding is None:
            self.show_error("There is no input to mask yet: type sentence A first.")
            return
        self._leave_external()
        self.state.mask_like_bert(self.input_form.seed() if seed is None else seed)
        self._input_changed()

    def reroll_masking(self) -> None:
        if self.state.encoding is None:
            return
        self._leave_external()
        self.state.reroll()
        self.input_form.show_seed(self.state.seed)
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
            self.statusMessage.emit(_sentence_case(str(error)), 6000)
            return
        self._input_changed()

    def _on_seed_changed(self, seed: int) -> None:
        if self.state.masking_mode is MaskingMode.BERT and self.state.encoding is not None:
            self.state.mask_like_bert(seed)
            self._input_changed()

    # -- heads and hover -----------------------------------------------------------------------------------

    def _on_head_mask_changed(self, head_mask: Any) -> None:
        try:
            changed = self.state.set_head_mask(None if head_mask is None else np.asarray(head_mask))
        except ValueError as error:
            self.show_error(_sentence_case(str(error)))
            return
        if changed:
            self._leave_external()
            off = 0 if self.state.head_mask is None else int((self.state.head_mask == 0).sum())
            self.statusMessage.emit(f"{off} head(s) switched off" if off else "All heads on", 4000)
            self._request_inspection()

    def _on_table_hovered(self, position: int) -> None:
        self.token_table.highlight_position(position)
        self.attention_panel.highlight_token(position)

    # -- inspection results ---------------------------------------------------------------------------------

    def _on_inspected(self, request_id: int, inspection: Any) -> None:
        if request_id != self.state.latest_request_id:
            return  # superseded while it crossed to the GUI thread
        self.state.inspection = inspection
        started = time.perf_counter()
        self._render(inspection)
        self.last_render_ms = (time.perf_counter() - started) * 1e3
        self.inspectionTimed.emit(self.inspect_worker.last_compute_ms, self.last_render_ms)

    def _render(self, inspection: Any) -> None:
        for render in self.inspection_views:
            render(inspection)
        self.inspectionShown.emit(inspection)

    def _on_inspect_failed(self, request_id: int, failure: Any) -> None:
        if request_id == self.state.latest_request_id:
            self.show_error(f"The model could not inspect this input: {failure.text}")


def _message_label(name: str, accessible: str, style: str) -> QLabel:
    label = QLabel()
    label.setObjectName(name)
    label.setAccessibleName(accessible)
    label.setWordWrap(True)
    label.setStyleSheet(style)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.hide()
    return label


def _sentence_case(message: str) -> str:
    return message[:1].upper() + message[1:] if message else message
