"""The "Inspect" tab: type a pair, see BERT's input, its masking, predictions and attention.

A thin view over `ExplorerState`: the tab writes what the user does into the state, and every view in it follows the
state itself (`follow`: the token table, the input form, the attention panel, the predictions side with its
predictions, task output and logit lens) and redraws from what the state announces (`ExplorerState.changed`, one
`Change` at a time), never because a sibling called it; what any view of an inspection shows is
`state.shown_inspection()`. The tab keeps the layout, the worker and its own messages (errors, warnings, the
snapshot's caption, the model's note: `_on_state_changed`).

Each settled edit (`InputForm`: a throttle, so a fast typist sees the views follow) re-encodes on the GUI thread (a
few milliseconds); every change of the input, its masking or the head mask submits an inspection (`inspect_job`)
to a `LatestJobWorker`, which computes the newest request submitted, and the token table and the notes are redrawn
while the worker computes on the other core. The worker also draws the attention panel's pictures for what it
shows now (`AttentionPanel.picture_spec`), so that a long input costs the GUI thread only the hand-over.

Every result newer than the one on screen is shown, even when the user has typed on meanwhile: while keys
keep coming the views show the input of a moment ago instead of nothing, and the newest request always
arrives last. An inspection that arrives goes into the state with the pictures drawn for it, and each view
redraws from there; `inspectionShown` says when they all have. Errors show in `errorLabel` and leave the previous
input and inspection on screen. An inspection computed elsewhere (a training snapshot) can be shown, captioned,
until the next edit; the table and the masking note then describe the snapshot's input, not the live one.

The predictions sit beside the attention (`PredictionsSide`); they fold away (Ctrl+P, or the "Predictions" button in the
attention toolbar) to give the heads the room, and by themselves for a model without pretraining heads (a
training snapshot shown over such a model has its own predictions, and they come back for as long as it shows).
A fine-tuned model (a task head) shows its task output there instead (`TaskOutputView`, objectName
`taskOutput`), and a token-classification model adds a "tag" row to the token table.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QSplitter, QVBoxLayout, QWidget

import explorer.common._qt.shortcuts as shortcuts
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.common._qt.workers.latest_job import LatestJobWorker
from explorer.common.message_text import sentence_case
from explorer.inspector._qt.attention_panel import AttentionPanel
from explorer.inspector._qt.input_form import DEFAULT_THROTTLE_MS, InputForm
from explorer.inspector._qt.predictions_side import PredictionsSide
from explorer.inspector._qt.token_table import TokenLegend, TokenTable
from explorer.inspector.inspect_job import InspectJob, InspectResult, inspect_and_draw
from explorer.inspector.inspection_threads import InspectionThreads
from explorer.inspector.model_info import LoadedModel, ModelInfo
from explorer.inspector.state import Change, ExplorerState

ERROR_STYLE = "color: #a40000; background: #fde7e7; border: 1px solid #e0a0a0; border-radius: 3px; padding: 3px;"
WARNING_STYLE = "color: #6b4a00; background: #fff4d6; border: 1px solid #e6c66e; border-radius: 3px; padding: 3px;"
INFO_STYLE = "color: #333; background: #f0f0f0; border: 1px solid #ccc; border-radius: 3px; padding: 3px;"
CAPTION_STYLE = "color: #0b3d75; background: #e3eefb; border: 1px solid #9dbde6; border-radius: 3px; padding: 3px;"


PREDICTIONS_SHARE = 0.3  # of the width, when the predictions are shown
INSPECT_NICENESS = 5  # the inspection thread yields the CPU to the GUI thread (explorer.common._qt.workers, rule 5)


class InspectTab(QWidget):
    pairChanged = Signal(str, str)  # sentence A, sentence B ("" for none), when an edit settles and encodes
    inspectionShown = Signal(object)  # the Inspection shown, after every view has rendered it
    inspectionTimed = Signal(float, float)  # milliseconds in the worker (model + pictures), of showing every view
    statusMessage = Signal(str, int)  # a passing note for the status bar: text, milliseconds

    def __init__(self, throttle_ms: int = DEFAULT_THROTTLE_MS, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("inspectTab")
        self.state = ExplorerState()
        self._note_under_snapshot = ""  # the model's note, hidden while a snapshot shows and back after it
        self._last_emitted_pair: tuple[str, str] | None = None
        self.last_render_ms = float("nan")
        self.last_pictures_ms = float("nan")
        threads = InspectionThreads()
        self.inspect_worker = LatestJobWorker(inspect_and_draw, name="inspectThread",
                                              torch_threads=lambda job: threads(job.request), niceness=INSPECT_NICENESS,
                                              hand_over=True)
        self.inspect_worker.done.connect(self._on_inspected)
        self.inspect_worker.failed.connect(self._on_inspect_failed)

        self.input_form = InputForm(throttle_ms)
        self.error_label = _message_label("errorLabel", "Error message", ERROR_STYLE)
        self.warning_label = _message_label("warningLabel", "Input warnings", WARNING_STYLE)
        self.caption_label = _message_label("captionLabel", "Inspection caption", CAPTION_STYLE)
        self.info_label = _message_label("infoLabel", "Model notes", INFO_STYLE)
        self.token_table = TokenTable()
        self.legend = TokenLegend()
        self.attention_panel = AttentionPanel()
        self.predictions_side = PredictionsSide()  # the predictions (or a task output) over the logit lens
        side = self.predictions_side
        self.predictions, self.task_output, self.logit_lens = side.predictions, side.task_output, side.logit_lens
        self.predictions_button = side.toggle_button
        self.predictions_button.toggled.connect(self._on_predictions_toggled)  # after the side's own slot
        self.attention_panel.add_tool(self.predictions_button)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("inspectSplitter")
        self.splitter.addWidget(self.attention_panel)
        self.splitter.addWidget(self.predictions_side)
        self.splitter.setStretchFactor(0, 7)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setSizes([round(1000 * (1 - PREDICTIONS_SHARE)), round(1000 * PREDICTIONS_SHARE)])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 2)
        layout.setSpacing(4)
        for widget in (self.input_form, self.error_label, self.warning_label, self.caption_label, self.info_label,
                       self.token_table, self.legend):
            layout.addWidget(widget)
        layout.addWidget(self.splitter, 1)
        self.shortcuts = shortcuts.install(self, {
            "focus_sentence_a": lambda: self.input_form.sentence_a_edit.setFocus(),
            "focus_sentence_b": lambda: self.input_form.sentence_b_edit.setFocus(),
            "mask_like_bert": self.mask_like_bert, "reroll": self.reroll_masking, "clear_masks": self.clear_masks,
            "previous_layer": lambda: self.attention_panel.set_layer(self.attention_panel.layer - 1),
            "next_layer": lambda: self.attention_panel.set_layer(self.attention_panel.layer + 1),
            "toggle_predictions": self.predictions_button.toggle,
        }, shortcuts.INSPECT)

        form = self.input_form
        form.edited.connect(self.state.leave_snapshot)
        form.settled.connect(self._settle_input)
        form.maskRequested.connect(self.mask_like_bert)
        form.rerollRequested.connect(self.reroll_masking)
        form.clearRequested.connect(self.clear_masks)
        form.seedChanged.connect(self._on_seed_changed)
        form.recipeChanged.connect(self.set_masking_recipe)
        form.padChanged.connect(self._on_pad_changed)
        self.token_table.positionClicked.connect(self.toggle_mask)
        self.token_table.positionHovered.connect(self._on_table_hovered)
        self.attention_panel.tokenHovered.connect(self.token_table.highlight_position)
        self.attention_panel.headMaskChanged.connect(self._on_head_mask_changed)
        # In this order: the worker starts on a change before any view redraws, and the tab's own messages and
        # `inspectionShown` come after every view has redrawn.
        self.state.changed.connect(self._request_on_change)
        for view in (self.token_table, self.input_form, self.attention_panel, self.predictions_side):
            view.follow(self.state)
        self.state.changed.connect(self._on_state_changed)

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
        self.clear_error()
        self.state.set_model(loaded.model, loaded.tokenizer, loaded.info)
        if self.state.encoding is None or (self.state.text_a, self.state.text_b) != self.current_pair():
            self._settle_input()  # the state could not re-encode its pair (or has none yet): the form's, with why

    def show_external_inspection(self, inspection: Any, caption: str) -> None:
        """Display an inspection computed elsewhere (a training snapshot), captioned, until the next edit."""
        self.state.show_snapshot(inspection, caption)

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
            self.show_error(sentence_case(str(error)) + kept)
            return
        pair = (text_a, text_b or "")
        if pair != self._last_emitted_pair:  # only pairs that encode: other tabs can inspect what they get
            self._last_emitted_pair = pair
            self.pairChanged.emit(*pair)

    def _request_inspection(self) -> None:
        request = self.state.inspect_request()
        if request is not None:
            self.inspect_worker.submit(request.request_id, InspectJob(request, self.attention_panel.picture_spec()))

    def _on_pad_changed(self, pad_to: int) -> None:
        self.state.pad_to = pad_to or None
        self.input_form.flush()

    # -- masking -----------------------------------------------------------------------------------------------

    def mask_like_bert(self, seed: int | None = None) -> None:
        """BERT's recipe with `seed`, or the one in the seed box."""
        if self.state.encoding is None:
            self.show_error("There is no input to mask yet: type sentence A first.")
            return
        self._masking(lambda: self.state.mask_like_bert(self.input_form.seed() if seed is None else seed))

    def set_masking_recipe(self, recipe: str) -> None:
        """Picking a recipe masks with it (the seed in the box) as soon as there is an input: picking one is asking
        to see it; hand-picked positions give way."""
        if self.state.encoding is None:
            self.state.set_masking_recipe(recipe)
        else:
            self._masking(lambda: self.state.mask_like_bert(self.input_form.seed(), recipe=recipe))

    def reroll_masking(self) -> None:
        if self.state.encoding is not None:
            self._masking(self.state.reroll)

    def _masking(self, draw) -> None:
        """Draw a masking; a vocabulary it cannot draw from (every id special) is said, the input kept unmasked."""
        try:
            draw()
        except ValueError as error:
            self.show_error(f"Cannot mask this input: {error}.")

    def clear_masks(self) -> None:
        self.state.clear_masks()

    def toggle_mask(self, position: int) -> None:
        """Click-to-mask: a token cell toggles [MASK] at its position."""
        if self.state.snapshot is not None:
            return  # the table shows a snapshot's input, not the live one
        try:
            self.state.toggle_mask(position)
        except ValueError as error:
            self.statusMessage.emit(sentence_case(str(error)), 6000)

    def _on_seed_changed(self, seed: int) -> None:
        with blocked(self.input_form.seed_spin):
            self.state.set_seed(seed)

    # -- heads and hover -----------------------------------------------------------------------------------

    def _on_head_mask_changed(self, head_mask: Any) -> None:
        try:
            with blocked(self.attention_panel):
                self.state.set_head_mask(None if head_mask is None else np.asarray(head_mask))
        except ValueError as error:
            self.show_error(sentence_case(str(error)))

    def _on_table_hovered(self, position: int) -> None:
        self.token_table.highlight_position(position)
        self.attention_panel.highlight_token(position)

    # -- inspection results ---------------------------------------------------------------------------------

    def _on_inspected(self, request_id: int, result: InspectResult) -> None:
        started = time.perf_counter()
        # the state drops a result older than the one shown (or made stale by a snapshot or a model); one it takes
        # every view redraws before this returns
        if self.state.inspection_arrived(request_id, result.inspection, result.pictures):
            self.last_render_ms = (time.perf_counter() - started) * 1e3
            self.last_pictures_ms = result.pictures_ms
            self.inspectionTimed.emit(self.inspect_worker.last_compute_ms, self.last_render_ms)

    # -- the tab's messages, from the state ------------------------------------------------------------------

    def _request_on_change(self, state: ExplorerState, what: Change) -> None:
        """What the model sees changed: ask for its inspection at once, before any view redraws."""
        if what in (Change.INPUT, Change.MASKING, Change.HEAD_MASK):
            self._request_inspection()

    def _on_state_changed(self, state: ExplorerState, what: Change) -> None:
        if what is Change.MODEL:
            self._show_model(state.model_info)
        elif what is Change.INPUT:
            self.clear_error()
            notes = self.input_form.full_fields() + state.input_notes()
            self.warning_label.setText("\n".join(notes))
            self.warning_label.setVisible(bool(notes))
        elif what is Change.HEAD_MASK:
            off = 0 if state.head_mask is None else int((state.head_mask == 0).sum())
            self.statusMessage.emit(f"{off} head(s) switched off" if off else "All heads on", 4000)
        elif what is Change.INSPECTION:
            self._inspection_shown(state.shown_inspection())
        elif what is Change.SNAPSHOT:
            self._caption_snapshot_or_live()
            if state.shown_inspection() is not None:
                self._inspection_shown(state.shown_inspection())

    def _show_model(self, info: ModelInfo) -> None:
        """Another model: its note says what it lacks (the views, following the state, show nothing of the
        previous one's)."""
        self.caption_label.hide()
        self.caption_label.clear()
        if info.task is not None:
            self.show_info(f"{info.name} is fine-tuned ({info.task_description}): beside the attention is what its "
                           "task head says about the input, in place of MLM/NSP predictions.")
        elif info.has_replaced_token_head:
            self.show_info(f"{info.name} is ELECTRA's discriminator: the token table's “replaced?” row gives, for "
                           "every token, how sure it is that the token is not the text's own. Mask like BERT (its "
                           "random tokens) or click tokens to [MASK] them, and see which it finds.")
        elif not info.has_pretraining_heads:
            self.show_info(f"{info.name} has no MLM or NSP head (none was in its checkpoint), so there are no "
                           "predictions to show: the attention views have the room.")
        else:
            self.show_info("")
        self.input_form.set_max_positions(info.max_positions)

    def _caption_snapshot_or_live(self) -> None:
        snapshot = self.state.snapshot
        if snapshot is not None:
            if not self.caption_label.text():  # a first snapshot, not one over another
                # the note speaks of the live model (MiniLM: "no predictions to show"), not of the snapshot
                self._note_under_snapshot = self.info_label.text()
                self.show_info("")
            self.caption_label.setText(f"Showing: {snapshot.caption} — edit the input to return to the live model")
            self.caption_label.show()
            return
        self.caption_label.hide()
        self.caption_label.clear()
        self.show_info(self._note_under_snapshot)

    def _inspection_shown(self, inspection: Any) -> None:
        """Every view has redrawn `inspection` (each on its own, from the state): its head switches exist now."""
        self._order_tabs()
        self.inspectionShown.emit(inspection)

    def _order_tabs(self) -> None:
        """Tab moves through the head switches before the predictions (the switches are made later)."""
        chain = [self.attention_panel.toolbar.export_button, *self.attention_panel.head_grid.checkboxes,
                 self.predictions.view]
        for before, after in itertools.pairwise(chain):
            QWidget.setTabOrder(before, after)

    # -- the predictions beside the attention ----------------------------------------------------------------

    def predictions_shown(self) -> bool:
        return not self.predictions_side.isHidden()

    def set_predictions_shown(self, shown: bool) -> None:
        self.predictions_button.setChecked(shown)

    def _on_predictions_toggled(self, shown: bool) -> None:
        """The side shown again gets its share of the width back."""
        if shown:
            width = sum(self.splitter.sizes()) or 1000
            self.splitter.setSizes([round(width * (1 - PREDICTIONS_SHARE)), round(width * PREDICTIONS_SHARE)])

    def _on_inspect_failed(self, request_id: int, failure: Any) -> None:
        if request_id == self.state.latest_request_id:
            self.show_error(f"The model could not inspect this input: {failure.text}")


def _message_label(name: str, accessible: str, style: str) -> QLabel:
    label = plain_label(named(QLabel(), name, accessible))  # model text: RoBERTa's <s> A </s></s> B </s>
    label.setWordWrap(True)
    label.setStyleSheet(style)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.hide()
    return label
