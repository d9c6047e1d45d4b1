"""The "Fine-tune" tab: fine-tune a BERT on a demo task or the user's own data, in a worker thread, and watch
its loss and the task's held-out metric.

What every run tab does (start, pause, stop, resume exactly as `bert-finetune --resume`, watch a run folder,
refuse a pretraining folder with the tab to open it in, keep what is on screen when a Start fails, faults in
words, "use this model in the inspector") is `RunPanel`'s. What is fine-tuning's own is here:
- The run is `bertcore.training.finetuning.Finetuner`'s step generator
  (`explorer.finetune.finetune_run.make_finetune_run`); its `TaskStepStats`, with a `TaskEvalStats` on the steps
  that evaluated, cross to the plots as they are, drawn in the fine-tuning layout: the loss, the task's held-out
  metrics (accuracy / macro_f1, entity_f1, exact_match / f1, pearson / spearman), the learning rate.
  The newest evaluation is also said in words.
- "Start from the Inspect tab's model" fine-tunes the inspector's model (`on_model_changed`): its folder when it
  came from one, else a copy saved into the run folder first; the inspector keeps its own.
- "What changed…" asks, through `compareCheckpoints`, to compare the run's starting checkpoint with the chosen
  one (or the newest); the window hands both folders to the tab that compares them.

The form is `FinetuneForm`; what it drives is plain Python in `explorer.finetune.finetune_run`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QPushButton, QScrollArea, QSplitter, QVBoxLayout, QWidget

from bertcore.files.run_folder import read_run_config
from explorer.common._qt.plain_text import plain_label
from explorer.common._qt.widget_names import named
from explorer.finetune._qt.finetune_form import FinetuneForm
from explorer.finetune.finetune_run import (
    DEFAULT_START,
    LOADED_START,
    FinetuneSettings,
    make_finetune_run,
    settings_for_resume,
    warm_up_finetuning,
)
from explorer.runs._qt.run_panel import RunPanel
from explorer.runs.curve_layout import FINETUNING, is_held_out
from explorer.runs.run_descriptions import describe_evaluation, run_start
from explorer.runs.training_run import EngineFactory

FIRST_STATUS = "Pick a demo task or your own data, and where to start from, then Start."
NO_EVALUATION = ("No held-out evaluation yet: the task's metrics appear after the first one (once an epoch, and "
                 "at the end).")


class FinetunePanel(RunPanel):
    """The fine-tuning tab; see the module docstring."""

    def __init__(self, parent: QWidget | None = None, *, engine_factory: EngineFactory | None = None,
                 torch_threads: int | None = None, niceness: int = 5, poll_interval_ms: int = 250):
        super().__init__(FinetuneForm(), engine_factory or make_finetune_run, warm_up_finetuning, layout=FINETUNING,
                         torch_threads=torch_threads, niceness=niceness, poll_interval_ms=poll_interval_ms,
                         idle_text=FIRST_STATUS, parent=parent)
        self.setObjectName("finetunePanel")
        self._inspector_model: tuple[Any, Any, str | None] | None = None
        self.eval_label = plain_label(named(QLabel(NO_EVALUATION), "finetuneEvalLabel", "Latest held-out evaluation"))
        self.eval_label.setWordWrap(True)
        self.eval_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._show_evaluation_text(NO_EVALUATION)
        self.runner.step.connect(self._show_evaluations)
        self.watcher.statsArrived.connect(self._show_evaluations)

        self.compare_button = named(
            QPushButton("What changed…"), "compareButton", "Compare with the starting model",
            "Compare the chosen checkpoint with the model the run started from, head by head, in the What "
            "changed tab")
        self.compare_button.clicked.connect(self.request_compare)
        self.checkpoints.layout().addWidget(self.compare_button)
        self.checkpoints.combo.currentIndexChanged.connect(self._update_compare_button)
        self._update_compare_button()

        scroll = QScrollArea()
        scroll.setObjectName("finetuneFormScroll")
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setWidget(self._left_column())
        scroll.setMinimumWidth(360)
        right = QWidget()
        right_column = QVBoxLayout(right)
        right_column.setContentsMargins(0, 0, 0, 0)
        right_column.addWidget(self.eval_label)
        right_column.addWidget(self.plots, 1)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(scroll)
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([400, 900])
        QVBoxLayout(self).addWidget(splitter)
        self._show_planned_steps(self.form.planned_steps())

    # ---- what the window tells the tab ----
    def on_model_changed(self, loaded: Any) -> None:
        """The inspector's model: what "start from the Inspect tab's model" fine-tunes."""
        super().on_model_changed(loaded)
        self._inspector_model = (loaded.model, loaded.tokenizer, loaded.info.path)

    # ---- RunPanel's hooks ----
    def _initial_model(self, settings: FinetuneSettings) -> Any:
        """The inspector's (model, tokenizer, folder) when the run starts from it; None otherwise."""
        if settings.init_from != LOADED_START or settings.resume_from is not None:
            return None
        if self._inspector_model is None:
            raise ValueError("the Inspect tab has no model loaded; start from the default model or a checkpoint "
                             "folder instead")
        return self._inspector_model

    def _settings_for_resume(self, folder: Path) -> FinetuneSettings:
        return settings_for_resume(folder, self.form.device_combo.devices())

    def _new_run_name(self, settings: FinetuneSettings) -> str:
        return f"finetune-{settings.what}-{super()._new_run_name(settings)}"

    def _run_shown(self, run_dir: Path | None) -> None:
        self._show_evaluation_text(NO_EVALUATION)
        self._update_compare_button()

    # ---- the newest evaluation, in words ----
    def _show_evaluations(self, records: Any) -> None:
        """From a step record (its `eval`, when it evaluated) or a list of records read from a metrics file."""
        records = records if isinstance(records, list) else [records]
        evaluations = [record if is_held_out(record) else getattr(record, "eval", None) for record in records]
        evaluations = [evaluation for evaluation in evaluations if evaluation is not None]
        if evaluations:
            self._show_evaluation_text(describe_evaluation(evaluations[-1]))

    def _show_evaluation_text(self, text: str) -> None:
        """The newest evaluation in bold; the placeholder before one, plain."""
        self.eval_label.setText(text)
        self.eval_label.setStyleSheet("padding: 2px;" + ("" if text == NO_EVALUATION else " font-weight: bold;"))

    # ---- comparing ----
    def _update_compare_button(self, *_args) -> None:
        self.compare_button.setEnabled(self.checkpoints.combo.count() > 0)

    def start_checkpoint(self) -> Path | None:
        """The checkpoint folder the run shown started from: its run_config.json's, else the form's choice (the
        default model for "the default model")."""
        from bertcore.files.resources import default_checkpoint_dir

        if self.run_dir is not None:
            try:
                start = run_start(read_run_config(self.run_dir))
            except (ValueError, OSError):
                start = None
            if start is not None:
                return start
        settings = self._settings or self.form.settings_or_none()
        if settings is None or settings.init_from == DEFAULT_START:
            return default_checkpoint_dir()
        if settings.init_from == LOADED_START:
            folder = self._inspector_model[2] if self._inspector_model else None
            return Path(folder) if folder else None
        return Path(settings.init_from)

    def request_compare(self) -> tuple[str, str] | None:
        """Emit `compareCheckpoints(start, chosen)`: the run's starting checkpoint and the selected one (the newest
        when none is selected). None, with the reason in the status line, when either is missing."""
        chosen = self.checkpoints.combo.currentData() or self.checkpoints.latest(self.last_checkpoint)
        start = self.start_checkpoint()
        if not chosen:
            self.lifecycle.say("No checkpoint to compare yet: wait for the first one, or for the end of the run.",
                               "error")
            return None
        if start is None:
            self.lifecycle.say("The run does not say which model it started from, so there is nothing to "
                               "compare with.", "error")
            return None
        self.compareCheckpoints.emit(str(start), str(chosen))
        return str(start), str(chosen)
