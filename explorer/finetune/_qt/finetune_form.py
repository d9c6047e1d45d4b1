"""The Fine-tune tab's form: a demo task or the user's own data, where to start from, the loop's settings in; a
validated `explorer.finetune.finetune_run.FinetuneSettings` out.

A view over FinetuneSettings and nothing more, as the Train tab's form is over TrainingSettings: it starts
nothing. Choosing a demo task fills in the settings measured for it (`FinetuneSettings.for_demo`); "My own data
files…" enables the task and the file fields ("Formats…" says what each task reads). The number fields take
anything typed; a value out of range is framed in red with the reason under the form as it is typed
(`problems()`, the checks FinetuneSettings makes; `problemsChanged`).
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from bertcore.tasks.kinds import TASK_KINDS
from bertcore.training.settings import DEMO_SETTINGS
from explorer.common._qt.plain_text import plain_label, plain_tooltip
from explorer.common._qt.signal_blocker import blocked
from explorer.common._qt.widget_names import named
from explorer.finetune.finetune_run import (
    DEFAULT_START,
    FORMATS_HELP,
    LOADED_START,
    TASK_NAMES,
    FinetuneSettings,
    finetune_problems,
)
from explorer.runs._qt.form_fields import (
    DeviceCombo,
    ProblemLabel,
    RunForm,
    default_runs_dir,
    number_spin,
    typed_number,
)
from explorer.runs.form_words import in_form_words

OWN_DATA = ""  # the demo combo's data for "My own data files…"
CHECKPOINT_START = "checkpoint"  # the start combo's data for "a checkpoint folder…"
STEPS, EPOCHS = "steps", "epochs"


def shipped_demos() -> dict:
    """{demo name: its bertcore.tasks.demos.registry.DemoTask}: its task and what its labels are, in one line."""
    from bertcore.tasks.demos.registry import demo_tasks

    return {demo.name: demo for demo in demo_tasks()}


def _optional_int(text: str) -> int | str | None:
    """An optional whole-number field: None when empty, the int typed, else the text (the checks say why)."""
    value = typed_number(text)
    if value == "":
        return None
    return int(value) if isinstance(value, float) and value.is_integer() else value


class FinetuneForm(RunForm):
    """See the module docstring; `stepsChanged` says 0 while the length is a number of epochs."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("finetuneForm")
        self._extras: dict = {}  # not on the form, kept from set_settings() for settings() (eval_every)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._build_task_box())
        layout.addWidget(self._build_run_box())
        self.problem_label = ProblemLabel()
        layout.addWidget(self.problem_label)
        self.demo_combo.currentIndexChanged.connect(self._demo_chosen)
        self.start_combo.currentIndexChanged.connect(self._start_chosen)
        self.length_unit_combo.currentIndexChanged.connect(self._unit_chosen)
        self.steps_spin.valueChanged.connect(lambda _: self.stepsChanged.emit(self.planned_steps()))
        for spin in (self.steps_spin, self.batch_spin, self.seq_len_spin, self.seed_spin, self.checkpoint_spin):
            spin.valueChanged.connect(self._check)
        for edit in (self.epochs_edit, self.lr_edit, self.warmup_edit):
            edit.textChanged.connect(self._check)
        self.device_combo.currentIndexChanged.connect(lambda _: self.deviceChanged.emit(self.device_label()))
        self._demo_chosen()
        self._start_chosen()
        self._unit_chosen()

    # ---- building ----
    def _build_task_box(self) -> QGroupBox:
        box = QGroupBox("Task")
        self.demo_combo = named(QComboBox(), "demoCombo", "Demo task",
                                "A demo task made from the built-in corpus (its settings are filled in), or your "
                                "own data files")
        self.demos = shipped_demos()
        for name in DEMO_SETTINGS:
            self.demo_combo.addItem(f"{name} demo", name)
        self.demo_combo.addItem("My own data files…", OWN_DATA)
        self.demo_label = plain_label(named(QLabel(), "demoDescriptionLabel", "What the task's labels are"))
        self.demo_label.setWordWrap(True)
        self.demo_label.setStyleSheet("color: #555;")
        self.task_combo = named(QComboBox(), "taskCombo", "Task",
                                "What the model learns from your data: a label per text or pair, a tag per word, "
                                "or the span of a context that answers a question")
        for task in TASK_KINDS:
            self.task_combo.addItem(TASK_NAMES[task], task)
        self.train_edit = named(QLineEdit(), "trainFileEdit", "Training file",
                                "Your training file; its format is in Formats…")
        self.train_edit.setPlaceholderText("training file (CSV, TSV, JSONL, CoNLL or SQuAD JSON)")
        self.eval_edit = named(QLineEdit(), "evalFileEdit", "Eval file",
                               "Your eval file, in the training file's format; empty: 10% of the training file is "
                               "held out (seeded)")
        self.eval_edit.setPlaceholderText("none: hold out 10% of the training file")
        self.train_browse = named(QPushButton("File…"), "browseTrainButton", "Pick the training file")
        self.train_browse.clicked.connect(lambda: self._browse_file(self.train_edit, "Training file"))
        self.eval_browse = named(QPushButton("File…"), "browseEvalButton", "Pick the eval file")
        self.eval_browse.clicked.connect(lambda: self._browse_file(self.eval_edit, "Eval file"))
        self.formats_button = named(QPushButton("Formats…"), "formatsButton", "Data formats",
                                    "The file formats each task reads")
        self.formats_button.clicked.connect(self._show_formats)
        grid = QGridLayout(box)
        grid.addWidget(self.demo_combo, 0, 0, 1, 3)
        grid.addWidget(self.demo_label, 1, 0, 1, 3)
        grid.addWidget(QLabel("Task"), 2, 0)
        grid.addWidget(self.task_combo, 2, 1)
        grid.addWidget(self.formats_button, 2, 2)
        grid.addWidget(QLabel("Train"), 3, 0)
        grid.addWidget(self.train_edit, 3, 1)
        grid.addWidget(self.train_browse, 3, 2)
        grid.addWidget(QLabel("Eval"), 4, 0)
        grid.addWidget(self.eval_edit, 4, 1)
        grid.addWidget(self.eval_browse, 4, 2)
        grid.setColumnStretch(1, 1)
        return box

    def _build_run_box(self) -> QGroupBox:
        box = QGroupBox("Run")
        form = QFormLayout(box)
        self.start_combo = named(QComboBox(), "startCombo", "Start from",
                                 "The weights fine-tuning starts from: the shipped default model, the Inspect "
                                 "tab's model, or a checkpoint folder (a pretraining run's, a transformers BERT)")
        self.start_combo.addItem("the default model", DEFAULT_START)
        self.start_combo.addItem("the Inspect tab's model", LOADED_START)
        self.start_combo.addItem("a checkpoint folder…", CHECKPOINT_START)
        self.start_edit = named(QLineEdit(), "startFolderEdit", "Checkpoint folder to start from",
                                "A checkpoint folder (config.json, model.safetensors, the vocabulary)")
        self.start_edit.setPlaceholderText("checkpoint folder")
        self.start_browse = named(QPushButton("Folder…"), "browseStartButton", "Pick the checkpoint folder")
        self.start_browse.clicked.connect(self._browse_start)
        self.start_folder_row = QWidget()  # shown for "a checkpoint folder…" only
        start_row = QHBoxLayout(self.start_folder_row)
        start_row.setContentsMargins(0, 0, 0, 0)
        start_row.addWidget(self.start_edit, 1)
        start_row.addWidget(self.start_browse)
        form.addRow("Start from", self.start_combo)
        form.addRow(self.start_folder_row)

        defaults = FinetuneSettings()  # what each field shows first
        self.steps_spin = number_spin("stepsSpin", defaults.steps, "Optimisation steps in total")
        self.epochs_edit = named(QLineEdit(f"{defaults.epochs:g}"), "epochsEdit", "Epochs",
                                 "Passes over the training data (e.g. 3, or 0.5); the steps follow from its size")
        self.epochs_edit.setMaximumWidth(150)
        self.length_unit_combo = named(QComboBox(), "lengthUnitCombo", "Length in steps or epochs",
                                       "Give the run's length in steps, or in passes over the training data")
        self.length_unit_combo.addItem("steps", STEPS)
        self.length_unit_combo.addItem("epochs", EPOCHS)
        length_row = QHBoxLayout()
        length_row.addWidget(self.steps_spin)
        length_row.addWidget(self.epochs_edit)
        length_row.addWidget(self.length_unit_combo)
        length_row.addStretch(1)
        form.addRow("Length", length_row)
        self.batch_spin = number_spin("batchSizeSpin", defaults.batch_size,
                                      "Examples per step (QA: windows) (1 … 4,096)")
        form.addRow("Batch size", self.batch_spin)
        self.seq_len_spin = number_spin("seqLenSpin", defaults.seq_len, "Longest input in tokens, [CLS] and [SEP] "
                                                                        "included (8 … 512); longer texts are cut, "
                                                                        "QA contexts windowed")
        form.addRow("Sequence length", self.seq_len_spin)
        self.lr_edit = named(QLineEdit(f"{defaults.learning_rate:g}"), "learningRateEdit", "Learning rate",
                             "Peak learning rate: 2e-4 suits the small default model, 2e-5 … 5e-5 BERT-base")
        self.lr_edit.setMaximumWidth(150)
        form.addRow("Learning rate", self.lr_edit)
        self.warmup_edit = named(QLineEdit(), "warmupEdit", "Warm-up steps",
                                 "Steps of linear warm-up before the linear decay; empty: 10% of the steps")
        self.warmup_edit.setPlaceholderText("10% of the steps")
        self.warmup_edit.setMaximumWidth(150)
        form.addRow("Warm-up", self.warmup_edit)
        self.seed_spin = number_spin("seedSpin", defaults.seed, "The new head's initialisation, the held-out split, "
                                                                "the batch order and dropout all follow it: the same "
                                                                "seed, the same run")
        form.addRow("Seed", self.seed_spin)
        self.device_combo = DeviceCombo()
        form.addRow("Device", self.device_combo)
        self.checkpoint_spin = number_spin("checkpointEverySpin", defaults.checkpoint_every,
                                           "Save a checkpoint every N steps (and at the end); 0 = only at the end or "
                                           "on Stop")
        form.addRow("Checkpoint every", self.checkpoint_spin)
        self.out_edit = named(QLineEdit(), "runFolderEdit", "Run folder",
                              "Where the run writes its metrics, checkpoints and final model (the layout "
                              "bert-finetune writes); empty: a new folder for each run")
        self.out_edit.setPlaceholderText(f"new folder under {default_runs_dir()}")
        form.addRow("Run folder", self.out_edit)
        return box

    # ---- what a choice changes ----
    def _own_data(self) -> bool:
        return self.demo_combo.currentData() == OWN_DATA

    def _demo_chosen(self, *_args) -> None:
        """A demo fills in its measured settings; own data enables the task and its files."""
        self._show_demo()
        if not self._own_data():
            measured = FinetuneSettings.for_demo(self.demo_combo.currentData())
            self.length_unit_combo.setCurrentIndex(0)
            self.steps_spin.setValue(measured.steps)
            self.batch_spin.setValue(measured.batch_size)
            self.seq_len_spin.setValue(measured.seq_len)
            self.lr_edit.setText(f"{measured.learning_rate:g}")

    def _show_demo(self) -> None:
        """The chosen demo's task and labels in words, and the data fields enabled for own data only."""
        own = self._own_data()
        demo = self.demos.get(self.demo_combo.currentData())
        if demo is not None:  # the task box shows the demo's own task, greyed: a demo fixes it
            self.task_combo.setCurrentIndex(self.task_combo.findData(demo.task))
        self.demo_label.setText("Your own files: pick the task and the training file (Formats… says what each "
                                "task reads)." if own or demo is None else f"Labels: {demo.description}")
        self.demo_combo.setToolTip(plain_tooltip(self.demo_label.text()))
        self._enable_data_fields(self._editable)

    _editable = True

    def _enable_data_fields(self, editable: bool) -> None:
        own = self._own_data()
        for widget in (self.task_combo, self.train_edit, self.eval_edit, self.train_browse, self.eval_browse):
            widget.setEnabled(editable and own)
        checkpoint = self.start_combo.currentData() == CHECKPOINT_START
        for widget in (self.start_edit, self.start_browse):
            widget.setEnabled(editable and checkpoint)

    def _start_chosen(self, *_args) -> None:
        self.start_folder_row.setVisible(self.start_combo.currentData() == CHECKPOINT_START)
        self._enable_data_fields(self._editable)

    def _unit_chosen(self, *_args) -> None:
        epochs = self.length_unit_combo.currentData() == EPOCHS
        self.steps_spin.setVisible(not epochs)
        self.epochs_edit.setVisible(epochs)
        self._check()
        self.stepsChanged.emit(self.planned_steps())

    # ---- values ----
    def _values(self) -> dict:
        """The fields as typed (a number field's text when it is not a number)."""
        epochs = self.length_unit_combo.currentData() == EPOCHS
        return {"steps": None if epochs else self.steps_spin.value(), "epochs": typed_number(self.epochs_edit.text()),
                "batch_size": self.batch_spin.value(), "seq_len": self.seq_len_spin.value(),
                "learning_rate": typed_number(self.lr_edit.text()), "seed": self.seed_spin.value(),
                "warmup_steps": _optional_int(self.warmup_edit.text()),
                "checkpoint_every": self.checkpoint_spin.value()}

    def problems(self) -> dict[str, str]:
        """{field: why its value cannot be used}, for the number fields as they are now, in the form's words (each
        field by its label, its accessible name; bertcore's wording stays for bert-finetune)."""
        labels = {field: widget.accessibleName() for field, widget in self.problem_fields().items()}
        return in_form_words(finetune_problems(**self._values()), labels)

    def problem_fields(self) -> dict[str, QWidget]:
        return {"steps": self.steps_spin, "epochs": self.epochs_edit, "batch_size": self.batch_spin,
                "seq_len": self.seq_len_spin, "learning_rate": self.lr_edit, "seed": self.seed_spin,
                "warmup_steps": self.warmup_edit, "checkpoint_every": self.checkpoint_spin}

    def settings(self) -> FinetuneSettings:
        """The form as a validated FinetuneSettings (ValueError with the problem)."""
        problems = self.problems()
        if problems:
            raise ValueError(next(iter(problems.values())))
        values = self._values()
        start = self.start_combo.currentData()
        if start == CHECKPOINT_START:
            start = self.start_edit.text().strip()
            if not start:
                raise ValueError("no checkpoint folder to start from is given; type its path, browse, or start "
                                 "from the default model")
        own = self._own_data()
        return FinetuneSettings(
            demo=None if own else self.demo_combo.currentData(),
            task=self.task_combo.currentData() if own else None,
            train=(self.train_edit.text().strip() or None) if own else None,
            eval=(self.eval_edit.text().strip() or None) if own else None,
            init_from=start, steps=values["steps"], epochs=float(values["epochs"]) if values["steps"] is None else 3.0,
            batch_size=values["batch_size"], seq_len=values["seq_len"], learning_rate=values["learning_rate"],
            warmup_steps=values["warmup_steps"], seed=values["seed"], device=self.device_combo.currentData(),
            checkpoint_every=values["checkpoint_every"], out_dir=self.typed_run_folder(), **self._extras)

    def set_settings(self, settings: FinetuneSettings) -> None:
        """Fill the form (the run folder too); ValueError for a device this machine lacks."""
        index = self.device_combo.index_of(settings.device)
        with blocked(self.demo_combo):  # a demo's measured settings must not overwrite the ones given
            self.demo_combo.setCurrentIndex(self.demo_combo.findData(settings.demo or OWN_DATA))
        self._show_demo()
        if settings.demo is None:  # a demo's task was shown by _show_demo (its settings carry none)
            self.task_combo.setCurrentIndex(max(0, self.task_combo.findData(settings.task)))
        self.train_edit.setText(settings.train or "")
        self.eval_edit.setText(settings.eval or "")
        start = settings.init_from
        self.start_combo.setCurrentIndex(self.start_combo.findData(
            start if start in (DEFAULT_START, LOADED_START) else CHECKPOINT_START))
        self.start_edit.setText("" if start in (DEFAULT_START, LOADED_START) else start)
        self.length_unit_combo.setCurrentIndex(1 if settings.steps is None else 0)
        if settings.steps is not None:
            self.steps_spin.setValue(settings.steps)
        self.epochs_edit.setText(f"{settings.epochs:g}")
        self.batch_spin.setValue(settings.batch_size)
        self.seq_len_spin.setValue(settings.seq_len)
        self.lr_edit.setText(f"{settings.learning_rate:g}")
        self.warmup_edit.setText("" if settings.warmup_steps is None else str(settings.warmup_steps))
        self.seed_spin.setValue(settings.seed)
        self.device_combo.setCurrentIndex(index)
        self.checkpoint_spin.setValue(settings.checkpoint_every)
        self.out_edit.setText(settings.out_dir or "")
        self._extras = {"eval_every": settings.eval_every}

    def planned_steps(self) -> int:
        """The run's steps; 0 when it is given in epochs (the steps follow from the data, read at Start)."""
        return 0 if self.length_unit_combo.currentData() == EPOCHS else self.steps_spin.value()

    def set_editable(self, editable: bool) -> None:
        """Lock everything a running run depends on."""
        self._editable = editable
        for widget in (self.demo_combo, self.start_combo, self.steps_spin, self.epochs_edit, self.length_unit_combo,
                       self.batch_spin, self.seq_len_spin, self.lr_edit, self.warmup_edit, self.seed_spin,
                       self.device_combo, self.checkpoint_spin, self.out_edit):
            widget.setEnabled(editable)
        self._enable_data_fields(editable)

    # ---- browsing and help ----
    def _browse_file(self, edit: QLineEdit, title: str) -> None:
        path, _ = QFileDialog.getOpenFileName(self, title, "", "Data files (*.csv *.tsv *.jsonl *.json *.conll "
                                                               "*.txt);;All files (*)")
        if path:
            edit.setText(path)

    def _browse_start(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Checkpoint folder to start from")
        if path:
            self.start_edit.setText(path)

    def _show_formats(self) -> None:
        QMessageBox.information(self, "Fine-tuning data formats", FORMATS_HELP)
