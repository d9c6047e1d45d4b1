"""What the Inspect tab shows beside the attention: the MLM/NSP predictions, or a fine-tuned model's task output in
their place, over the logit lens; and the "Predictions" toggle that folds them away (Ctrl+P), remembering the
user's choice for the models that have something to show there. It follows the Inspect tab's `ExplorerState`
(`follow`): the predictions and the task output show the inspection shown, and the side fits the model behind it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QToolButton, QWidget

from explorer.inspector._qt.logit_lens_view import LogitLensView
from explorer.inspector._qt.predictions_view import PredictionsPanel
from explorer.inspector._qt.task_output_view import TaskOutputView
from explorer.inspector.state import Change, ExplorerState


class PredictionsSide(QSplitter):
    """The side panel (objectName `predictionsSplitter`) and its toggle (`predictionsToggle`, for a toolbar)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(Qt.Orientation.Vertical, parent)
        self.setObjectName("predictionsSplitter")
        self.has_content = True  # what is shown has predictions or a task output to put beside the attention
        self.wanted = True  # the user's choice, for models that have predictions to show
        self.predictions = PredictionsPanel()
        self.task_output = TaskOutputView()  # in place of the predictions for a fine-tuned model
        self.task_output.hide()
        self.logit_lens = LogitLensView()  # under the predictions; fed by the head lab (head_lab_controller)
        self.addWidget(self.predictions)
        self.addWidget(self.task_output)
        self.addWidget(self.logit_lens)
        # the predictions or the task output (one of them is shown) over the lens; every part gets its share
        self.setSizes([260, 260, 420])
        self.setChildrenCollapsible(False)
        self.toggle_button = QToolButton()
        self.toggle_button.setObjectName("predictionsToggle")
        self.toggle_button.setAccessibleName("Show the predictions")
        self.toggle_button.setText("Predictions")
        self.toggle_button.setCheckable(True)
        self.toggle_button.setChecked(True)
        self.toggle_button.setToolTip("Show the MLM and NSP predictions beside the attention, or hide them "
                                      "to give the heads the room (Ctrl+P)")
        self.toggle_button.toggled.connect(self._on_toggled)

    def follow(self, state: ExplorerState) -> None:
        """Show what `state` shows: its predictions or task output, fitted to the model behind it (a snapshot's
        while one is shown); the lens goes with a fine-tuned live model, which has no MLM head for it to read."""
        self.predictions.follow(state)
        self.task_output.follow(state)
        state.changed.connect(self._on_state_changed)
        self._fit_state(state, Change.MODEL)

    def _on_state_changed(self, state: ExplorerState, what: Change) -> None:
        if what in (Change.MODEL, Change.SNAPSHOT):
            self._fit_state(state, what)

    def _fit_state(self, state: ExplorerState, what: Change) -> None:
        if what is Change.MODEL and state.model_info is not None:
            self.logit_lens.setVisible(state.model_info.task is None)  # a task model's head is not an MLM head
        heads = state.shown_heads()
        if heads is not None:
            has_mlm_or_nsp_head, task = heads
            self.fit(has_mlm_or_nsp_head, task is not None)

    def fit(self, has_mlm_or_nsp_head: bool, is_task: bool) -> None:
        """Show the task output for a task model, else the predictions; with neither head the side folds away
        (and comes back, as the user last left it, for the next model that has one)."""
        self.predictions.setVisible(not is_task)
        self.task_output.setVisible(is_task)
        self.has_content = has_mlm_or_nsp_head or is_task
        self.toggle_button.setChecked(self.wanted and self.has_content)

    def _on_toggled(self, shown: bool) -> None:
        if self.has_content:
            self.wanted = shown
        self.setVisible(shown)
