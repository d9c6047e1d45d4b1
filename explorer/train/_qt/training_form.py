"""The Train tab's form: corpus and run settings in, a validated `TrainingSettings` out.

A view over `explorer.runs.training_run.TrainingSettings` and nothing more: it starts nothing and knows no
worker. The panel reads `settings()` when Start is pressed, fills it back with `set_settings()` when a run
was started with explicit settings, and locks it with `set_editable(False)` while a run goes ("probe every"
stays live: it may change mid-run).

Nothing typed is silently clamped or refused: the number fields take any number (the learning rate any
text), and a value out of range is framed in red with the reason under the form as it is typed
(`problems()`, from the same checks TrainingSettings makes; `problemsChanged`).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from bertcore.data.masking_recipes import RECIPE_DESCRIPTIONS
from bertcore.data.sources import FORMATS
from bertcore.models.families import family_names
from bertcore.training.settings import new_model_family, new_model_objective
from explorer.common.message_text import sentence_case
from explorer.runs._qt.form_fields import (
    DeviceCombo,
    ProblemLabel,
    RunForm,
    default_runs_dir,
    number_spin,
    typed_number,
)
from explorer.runs.form_words import in_form_words
from explorer.runs.training_run import (
    CONTINUE_LOADED,
    OBJECTIVE_CHOICES,
    PRESET_NAMES,
    TrainingSettings,
    field_problems,
)
from explorer.train.learning_rate import suggested_learning_rate

# The corpus formats a run reads (bertcore.data.sources.FORMATS), as the hints and the File… dialog name them.
CORPUS_SUFFIXES = tuple(FORMATS)
CORPUS_KINDS = "a .txt, .txt.gz, .jsonl, .jsonl.gz, Parquet or Arrow file, or a folder of them"
CORPUS_FILE_FILTER = f"Corpus files ({' '.join('*' + suffix for suffix in CORPUS_SUFFIXES)});;All files (*)"


class TrainingForm(RunForm):
    probeEveryChanged = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("trainingForm")
        # Not on the form (the engine's defaults suit the app) but kept from set_settings() for settings().
        self._extras: dict[str, int] = {}
        # Until a rate is typed (or filled in by set_settings), the field follows the objective chosen.
        self._learning_rate_is_chosen = False
        self._continue_refusal: str | None = None  # why the inspector's model cannot be trained further, if it cannot
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._build_corpus_box())
        layout.addWidget(self._build_run_box())
        self.problem_label = ProblemLabel()
        layout.addWidget(self.problem_label)
        self.steps_spin.valueChanged.connect(self.stepsChanged)
        self.probe_every_spin.valueChanged.connect(lambda value: value >= 0 and self.probeEveryChanged.emit(value))
        for spin in (self.steps_spin, self.batch_spin, self.seq_len_spin, self.seed_spin, self.probe_every_spin,
                     self.analysis_every_spin):
            spin.valueChanged.connect(self._check)
        self.lr_edit.textChanged.connect(self._check)
        self.mlm_probability_edit.textChanged.connect(self._check)
        self.masking_combo.currentIndexChanged.connect(self._check)
        self.objective_combo.currentIndexChanged.connect(self._check)
        self.arch_combo.currentIndexChanged.connect(self._check)
        self.model_combo.currentIndexChanged.connect(self._check)  # a loaded model takes no architecture
        for combo in (self.objective_combo, self.arch_combo, self.model_combo):
            combo.currentIndexChanged.connect(self._suggest_learning_rate)
            combo.currentIndexChanged.connect(self._name_the_automatic_choices)
        self._name_the_automatic_choices()
        self.lr_edit.textEdited.connect(lambda _: setattr(self, "_learning_rate_is_chosen", True))
        self.device_combo.currentIndexChanged.connect(lambda _: self.deviceChanged.emit(self.device_label()))
        for widget, name in ((self.corpus_edit, "Corpus file or folder"), (self.model_combo, "Model to train"),
                             (self.objective_combo, "Objective"), (self.arch_combo, "Architecture"),
                             (self.masking_combo, "Masking recipe"), (self.mlm_probability_edit, "MLM probability"),
                             (self.steps_spin, "Steps"), (self.batch_spin, "Batch size"),
                             (self.seq_len_spin, "Sequence length"), (self.lr_edit, "Learning rate"),
                             (self.device_combo, "Device"), (self.seed_spin, "Seed"),
                             (self.probe_every_spin, "Probe every N steps"),
                             (self.analysis_every_spin, "Analyse every N steps"), (self.out_edit, "Run folder")):
            widget.setAccessibleName(name)

    def _name_the_automatic_choices(self, *_) -> None:
        """The boxes' first items say what they stand for now (each follows the other box): "the architecture's own"
        over "the objective's own" named neither."""
        objective, arch = self.objective_combo.currentData(), self.arch_combo.currentData()
        self.arch_combo.setItemText(0, f"{new_model_family(None, objective)} (the objective's own)" if objective
                                    else f"{new_model_family(None, None)} (the default)")
        self.objective_combo.setItemText(
            0, "what the loaded model was trained for" if self.model_combo.currentData() == CONTINUE_LOADED
            else f"{new_model_objective(arch, None)} ({new_model_family(arch, None)}'s own)")

    def _build_corpus_box(self) -> QGroupBox:
        box = QGroupBox("Corpus")
        self.default_corpus_radio = QRadioButton("Default corpus (tiny Shakespeare)")
        self.default_corpus_radio.setObjectName("defaultCorpusRadio")
        self.default_corpus_radio.setToolTip("Train on Tiny Shakespeare (about 1 MB), with the shipped vocabulary")
        self.custom_corpus_radio = QRadioButton("File or folder:")
        self.custom_corpus_radio.setObjectName("customCorpusRadio")
        self.custom_corpus_radio.setToolTip(f"Train on your own text: {CORPUS_KINDS}. In .txt, blank lines separate "
                                            "documents; a .jsonl line, a Parquet or Arrow row is one (its 'text')")
        self.default_corpus_radio.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.default_corpus_radio)
        group.addButton(self.custom_corpus_radio)
        self.corpus_edit = QLineEdit()
        self.corpus_edit.setObjectName("corpusEdit")
        self.corpus_edit.setPlaceholderText("a .txt, .jsonl, Parquet, Arrow file or folder")
        self.corpus_edit.setToolTip(f"The path of your corpus: {CORPUS_KINDS}")
        self.corpus_edit.textEdited.connect(lambda _: self.custom_corpus_radio.setChecked(True))
        self.browse_file_button = browse_file = QPushButton("File…")
        browse_file.setObjectName("browseCorpusFileButton")
        browse_file.setToolTip(f"Pick a corpus file to train on ({', '.join(CORPUS_SUFFIXES)})")
        browse_file.clicked.connect(self._browse_corpus_file)
        self.browse_folder_button = browse_folder = QPushButton("Folder…")
        browse_folder.setObjectName("browseCorpusFolderButton")
        browse_folder.setToolTip("Pick a folder of corpus files to train on (any mix of the formats File… takes)")
        browse_folder.clicked.connect(self._browse_corpus_folder)
        grid = QGridLayout(box)
        grid.addWidget(self.default_corpus_radio, 0, 0, 1, 3)
        grid.addWidget(self.custom_corpus_radio, 1, 0, 1, 3)
        grid.addWidget(self.corpus_edit, 2, 0)
        grid.addWidget(browse_file, 2, 1)
        grid.addWidget(browse_folder, 2, 2)
        return box

    def _build_run_box(self) -> QGroupBox:
        box = QGroupBox("Run")
        form = QFormLayout(box)
        defaults = TrainingSettings()  # what each field shows first
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("presetCombo")
        for name in PRESET_NAMES:
            self.model_combo.addItem(f"new {name} model", name)
        self.model_combo.addItem(CONTINUE_LOADED.capitalize(), CONTINUE_LOADED)
        self.model_combo.setToolTip("A new, randomly initialised model of a preset size (tiny trains in about "
                                    "a minute on a CPU), or the Inspect tab's model, trained further")
        form.addRow("Model", self.model_combo)
        self.objective_combo = QComboBox()
        self.objective_combo.setObjectName("objectiveCombo")
        self.objective_combo.addItem("automatic", None)  # named by _name_the_automatic_choices
        for name, description in OBJECTIVE_CHOICES:
            self.objective_combo.addItem(f"{name} · {description}", name)
        self.objective_combo.setToolTip("What the model learns: BERT's masked LM + next-sentence prediction, RoBERTa's "
                                        "masked LM on full sentences, ALBERT's sentence order, or ELECTRA's "
                                        "replaced-token detection (a small generator trained beside it)")
        form.addRow("Objective", self.objective_combo)
        self.arch_combo = QComboBox()
        self.arch_combo.setObjectName("archCombo")
        self.arch_combo.addItem("automatic", None)  # named by _name_the_automatic_choices
        for name in family_names():  # the family registry, as it is now
            self.arch_combo.addItem(name, name)
        self.arch_combo.setToolTip("The new model's family, at the chosen size, saved in its transformers layout; "
                                   "a loaded model keeps its own")
        form.addRow("Architecture", self.arch_combo)
        self.masking_combo = QComboBox()
        self.masking_combo.setObjectName("maskingCombo")
        for name, description in RECIPE_DESCRIPTIONS.items():
            self.masking_combo.addItem(f"{name} · {description}", name)
            self.masking_combo.setItemData(self.masking_combo.count() - 1, description, Qt.ItemDataRole.ToolTipRole)
        # The span recipe's line is long: it may be cut at the form's width rather than widen the whole form.
        self.masking_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.masking_combo.setMinimumContentsLength(24)
        self.masking_combo.setToolTip("What is masked for the masked LM (and ELECTRA's generator): single tokens "
                                      "(BERT), every piece of a word together, or SpanBERT's spans of words")
        form.addRow("Masking", self.masking_combo)
        self.mlm_probability_edit = QLineEdit(f"{defaults.mlm_probability:g}")
        self.mlm_probability_edit.setObjectName("mlmProbabilityEdit")
        self.mlm_probability_edit.setMaximumWidth(150)
        self.mlm_probability_edit.setToolTip("The share of tokens masked, whatever the recipe, above 0 and below 1: "
                                             "BERT masks 0.15, MosaicBERT 0.3")
        form.addRow("MLM probability", self.mlm_probability_edit)
        self.steps_spin = number_spin("stepsSpin", defaults.steps, "Optimisation steps in total (at least 1)")
        form.addRow("Steps", self.steps_spin)
        self.batch_spin = number_spin("batchSizeSpin", defaults.batch_size, "Sentence pairs per step (1 … 4,096)")
        form.addRow("Batch size", self.batch_spin)
        self.seq_len_spin = number_spin("seqLenSpin", defaults.seq_len,
                                        "Longest sequence, [CLS] and [SEP] included (8 … 512)")
        form.addRow("Sequence length", self.seq_len_spin)
        self.lr_edit = QLineEdit(f"{defaults.learning_rate:g}")
        self.lr_edit.setObjectName("learningRateEdit")
        self.lr_edit.setMaximumWidth(150)
        self.lr_edit.setToolTip("Peak learning rate, above 0: e.g. 1e-3 for tiny and mini, 1e-4 for base. Choosing "
                                f"rtd suggests {suggested_learning_rate('rtd', None):g}: at 1e-3 a tiny ELECTRA's "
                                "discriminator settles on 'always original'")
        form.addRow("Learning rate", self.lr_edit)
        self.device_combo = DeviceCombo()
        form.addRow("Device", self.device_combo)
        self.seed_spin = number_spin("seedSpin", defaults.seed, "Model initialisation, data order, masks and dropout "
                                                                "all follow it: the same seed, the same run")
        form.addRow("Seed", self.seed_spin)
        self.probe_every_spin = number_spin("probeEverySpin", defaults.probe_every, "Re-inspect the probe pairs "
                                                                                    "every N steps (0 = off); can be "
                                                                                    "changed while a run goes")
        form.addRow("Probe every", self.probe_every_spin)
        self.analysis_every_spin = number_spin(
            "analysisEverySpin", defaults.analysis_every,
            "Measure what the model has learned every N steps, and at step 0 and the last step, on the step's weights "
            "and off the training thread: syntax in its heads, what each layer knows (POS probes), BLiMP and "
            "representation health (the Syntax, Probes and Health tabs). 0 = off. Every 100 steps costs the quick "
            "run about 4% of its time")
        form.addRow("Analyse every", self.analysis_every_spin)
        self.out_edit = QLineEdit()
        self.out_edit.setObjectName("runFolderEdit")
        self.out_edit.setPlaceholderText(f"new folder under {default_runs_dir()}")
        self.out_edit.setToolTip("Where the run writes its metrics, checkpoints and final weights (the layout "
                                 "bert-train writes); empty: a new folder for each run")
        form.addRow("Run folder", self.out_edit)
        return box

    # ---- values ----
    def _number_values(self) -> dict:
        """The number fields as typed (the learning rate as a float, or its text when it is not a number)."""
        return {"steps": self.steps_spin.value(), "batch_size": self.batch_spin.value(),
                "seq_len": self.seq_len_spin.value(), "learning_rate": typed_number(self.lr_edit.text()),
                "seed": self.seed_spin.value(), "probe_every": self.probe_every_spin.value(),
                "analysis_every": self.analysis_every_spin.value(),
                "masking": self.masking_combo.currentData(),
                "mlm_probability": typed_number(self.mlm_probability_edit.text()), **self._family_values()}

    def _family_values(self) -> dict:
        """The objective and architecture (None: the other's own); a loaded model takes no architecture."""
        arch = None if self.model_combo.currentData() == CONTINUE_LOADED else self.arch_combo.currentData()
        return {"objective": self.objective_combo.currentData(), "arch": arch}

    def _suggest_learning_rate(self) -> None:
        """The objective's own rate (explorer.train.learning_rate), unless the user chose one."""
        if not self._learning_rate_is_chosen:
            self.lr_edit.setText(f"{suggested_learning_rate(**self._family_values()):g}")

    def problems(self) -> dict[str, str]:
        """{field: why its value cannot be used}, for the number fields as they are now, in the form's words: its
        labels (each field's accessible name), and the rate this form suggests instead of bertcore's hint."""
        labels = {field: widget.accessibleName() for field, widget in self.problem_fields().items()}
        advice = {"learning_rate": ""}  # bertcore's hint names BERT-mini, whatever the model chosen
        if self.model_combo.currentData() != CONTINUE_LOADED:
            rate = suggested_learning_rate(**self._family_values())
            advice["learning_rate"] = f"this form suggests {rate:g} for a new {self.model_combo.currentData()} model"
        problems = in_form_words(field_problems(**self._number_values()), labels, advice=advice)
        if self.model_combo.currentData() == CONTINUE_LOADED and self._continue_refusal:
            problems = {"preset": self._continue_refusal, **problems}
        return problems

    def set_continue_refusal(self, reason: str | None) -> None:
        """The inspector's model changed: `reason` (training_run.continue_refusal) says why "continue the loaded
        model" cannot train it, and the choice is disabled with that reason as its tooltip; None offers it again.
        A form already set to it says the reason under the form (Start stays off) rather than change the choice."""
        self._continue_refusal = reason
        item = self.model_combo.model().item(self.model_combo.findData(CONTINUE_LOADED))
        item.setEnabled(reason is None)
        item.setToolTip(sentence_case(reason) if reason else "Train the Inspect tab's model further")
        self._check()

    def problem_fields(self) -> dict[str, QWidget]:
        return {"preset": self.model_combo, "steps": self.steps_spin, "batch_size": self.batch_spin,
                "seq_len": self.seq_len_spin,
                "learning_rate": self.lr_edit, "seed": self.seed_spin, "probe_every": self.probe_every_spin,
                "analysis_every": self.analysis_every_spin,
                "objective": self.objective_combo, "arch": self.arch_combo, "masking": self.masking_combo,
                "mlm_probability": self.mlm_probability_edit}

    def settings(self) -> TrainingSettings:
        """The form as a validated TrainingSettings (ValueError with the problem)."""
        problems = self.problems()
        if problems:
            raise ValueError(next(iter(problems.values())))
        corpus = None
        if self.custom_corpus_radio.isChecked():
            corpus = self.corpus_edit.text().strip()
            if not corpus:
                raise ValueError("no corpus file or folder is given; type a path, browse, or pick the default")
        return TrainingSettings(
            corpus=corpus,
            preset=self.model_combo.currentData(),
            steps=self.steps_spin.value(),
            batch_size=self.batch_spin.value(),
            seq_len=self.seq_len_spin.value(),
            learning_rate=float(self.lr_edit.text()),
            device=self.device_combo.currentData(),
            seed=self.seed_spin.value(),
            probe_every=self.probe_every_spin.value(),
            analysis_every=self.analysis_every_spin.value(),
            out_dir=self.typed_run_folder(),
            masking=self.masking_combo.currentData(),
            mlm_probability=float(self.mlm_probability_edit.text()),
            **self._family_values(),
            **self._extras,
        )

    def set_settings(self, settings: TrainingSettings) -> None:
        """Fill the form (the run folder too); ValueError for a device this machine lacks."""
        index = self.device_combo.index_of(settings.device)
        self.custom_corpus_radio.setChecked(settings.corpus is not None)
        self.default_corpus_radio.setChecked(settings.corpus is None)
        self.corpus_edit.setText(settings.corpus or "")
        self.model_combo.setCurrentIndex(max(0, self.model_combo.findData(settings.preset)))
        self.objective_combo.setCurrentIndex(max(0, self.objective_combo.findData(settings.objective)))
        self.arch_combo.setCurrentIndex(max(0, self.arch_combo.findData(settings.arch)))
        self.masking_combo.setCurrentIndex(max(0, self.masking_combo.findData(settings.masking)))
        self.mlm_probability_edit.setText(f"{settings.mlm_probability:g}")
        self.steps_spin.setValue(settings.steps)
        self.batch_spin.setValue(settings.batch_size)
        self.seq_len_spin.setValue(settings.seq_len)
        self.lr_edit.setText(f"{settings.learning_rate:g}")
        self._learning_rate_is_chosen = settings.learning_rate != suggested_learning_rate(**self._family_values())
        self.device_combo.setCurrentIndex(index)
        self.seed_spin.setValue(settings.seed)
        self.probe_every_spin.setValue(settings.probe_every)
        self.analysis_every_spin.setValue(settings.analysis_every)
        self.out_edit.setText(settings.out_dir or "")
        self._extras = {"checkpoint_every": settings.checkpoint_every, "eval_every": settings.eval_every}

    def planned_steps(self) -> int:
        return self.steps_spin.value()

    def set_editable(self, editable: bool) -> None:
        """Lock everything a running run depends on; "probe every" stays live."""
        for widget in (self.model_combo, self.objective_combo, self.arch_combo, self.masking_combo,
                       self.mlm_probability_edit, self.steps_spin, self.batch_spin,
                       self.seq_len_spin, self.lr_edit, self.analysis_every_spin,
                       self.device_combo, self.seed_spin, self.corpus_edit, self.out_edit,
                       self.default_corpus_radio, self.custom_corpus_radio, self.browse_file_button,
                       self.browse_folder_button):
            widget.setEnabled(editable)

    # ---- browsing ----
    def _browse_corpus_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Corpus file", "", CORPUS_FILE_FILTER)
        if path:
            self.corpus_edit.setText(path)
            self.custom_corpus_radio.setChecked(True)

    def _browse_corpus_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder of corpus files")
        if path:
            self.corpus_edit.setText(path)
            self.custom_corpus_radio.setChecked(True)
