"""The Train tab's form: what it shows is what a run gets, and what it refuses it says why."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from explorer.runs.form_words import in_form_words
from explorer.runs.training_run import CONTINUE_LOADED, TrainingSettings
from explorer.train._qt.training_form import TrainingForm
from explorer.train._qt.training_panel import TrainingPanel


@pytest.fixture
def form(qtbot) -> TrainingForm:
    form = TrainingForm()
    qtbot.addWidget(form)
    form.show()
    return form


def test_defaults_are_the_settings_defaults(form):
    assert form.settings() == TrainingSettings()


def test_settings_round_trip_including_the_fields_not_on_the_form(form, tmp_path):
    chosen = TrainingSettings(corpus=str(tmp_path / "book.txt"), preset=CONTINUE_LOADED, steps=1234,
                              batch_size=7, seq_len=96, learning_rate=3e-4, seed=42, probe_every=0,
                              checkpoint_every=17, eval_every=5, out_dir=str(tmp_path / "run"), masking="span",
                              mlm_probability=0.3)
    form.set_settings(chosen)
    assert form.settings() == chosen
    assert form.custom_corpus_radio.isChecked() and form.planned_steps() == 1234


def test_the_masking_recipe_and_probability_are_the_configs_fields_with_its_messages(form, qtbot):
    from bertcore.data.masking_recipes import RECIPE_DESCRIPTIONS
    from bertcore.training.settings import TrainingConfig

    offered = [form.masking_combo.itemData(index) for index in range(form.masking_combo.count())]
    assert offered == list(RECIPE_DESCRIPTIONS)
    assert RECIPE_DESCRIPTIONS["span"] in form.masking_combo.itemText(offered.index("span"))
    form.masking_combo.setCurrentIndex(offered.index("whole-word"))
    form.mlm_probability_edit.clear()
    qtbot.keyClicks(form.mlm_probability_edit, "0.3")
    assert (form.settings().masking, form.settings().mlm_probability) == ("whole-word", 0.3)
    for typed in ("1.5", "0.l5"):
        form.mlm_probability_edit.setText(typed)
        with pytest.raises(ValueError) as refused:
            TrainingConfig(mlm_probability=float(typed) if typed == "1.5" else typed)
        # TrainingConfig's check, in the form's words (its label for the field)
        assert form.problems() == in_form_words({"mlm_probability": str(refused.value)},
                                                {"mlm_probability": "MLM probability"})
        shown = form.problem_label.text()
        assert form.problem_label.isVisible() and shown == form.problems()["mlm_probability"]
        assert form.mlm_probability_edit.styleSheet() and not form.steps_spin.styleSheet()
        with pytest.raises(ValueError, match="MLM probability"):
            form.settings()
    form.mlm_probability_edit.setText("0.15")
    assert form.problems() == {} and not form.problem_label.isVisible()
    form.set_editable(False)
    assert not form.masking_combo.isEnabled() and not form.mlm_probability_edit.isEnabled()


def test_a_chosen_file_corpus_without_a_path_is_refused_with_the_reason(form, qtbot):
    form.custom_corpus_radio.click()
    with pytest.raises(ValueError, match="no corpus file or folder is given"):
        form.settings()
    assert form.settings_or_none() is None
    qtbot.keyClicks(form.corpus_edit, "  ")
    assert form.settings_or_none() is None  # blanks are no path


def test_typing_a_path_picks_the_file_corpus(form, qtbot, tmp_path):
    qtbot.keyClicks(form.corpus_edit, "corpus.txt")
    assert form.settings().corpus == "corpus.txt"


def test_a_device_this_machine_lacks_is_refused_and_the_form_is_unchanged(form):
    with pytest.raises(ValueError, match="'cuda:7' is not available here"):
        form.set_settings(TrainingSettings(device="cuda:7", steps=99))
    assert form.settings() == TrainingSettings()


def test_locked_while_running_but_probe_every_stays_live(form, qtbot):
    steps, probe_every = [], []
    form.stepsChanged.connect(steps.append)
    form.probeEveryChanged.connect(probe_every.append)
    form.set_editable(False)
    assert not form.steps_spin.isEnabled() and not form.corpus_edit.isEnabled()
    assert not form.device_combo.isEnabled() and form.probe_every_spin.isEnabled()
    form.probe_every_spin.setValue(5)
    form.set_editable(True)
    form.steps_spin.setValue(50)
    assert (steps, probe_every) == ([50], [5])
    assert "CPU" in form.device_label("cpu")


def test_start_with_a_refused_form_says_why_and_starts_nothing(qtbot):
    panel = TrainingPanel(torch_threads=1)
    qtbot.addWidget(panel)
    panel.show()
    panel.form.custom_corpus_radio.setChecked(True)
    qtbot.mouseClick(panel.buttons.start_button, Qt.MouseButton.LeftButton)
    assert "Cannot start: no corpus file or folder is given" in panel.status.status_label.text()
    assert panel.runner.worker is None and panel.buttons.start_button.isEnabled() and panel.form.steps_spin.isEnabled()


def test_runs_go_to_one_app_folder_and_runs_where_earlier_versions_put_them_stay_found(qapp, tmp_path, monkeypatch):
    """Qt's app folder is organisation/application, both "bert-explorer": runs went to …/bert-explorer/bert-explorer/
    runs. They now go to …/bert-explorer/runs, unless only the earlier folder exists (nothing is moved)."""
    from PySide6.QtCore import QCoreApplication

    from explorer import APP_NAME
    from explorer.runs._qt.form_fields import default_runs_dir

    names = QCoreApplication.organizationName(), QCoreApplication.applicationName()
    QCoreApplication.setOrganizationName(APP_NAME)  # as explorer.app names them
    QCoreApplication.setApplicationName(APP_NAME)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    try:
        assert default_runs_dir() == tmp_path / "bert-explorer" / "runs"
        earlier = tmp_path / "bert-explorer" / "bert-explorer" / "runs"
        earlier.mkdir(parents=True)
        assert default_runs_dir() == earlier  # only the earlier folder: it stays the default
        (tmp_path / "bert-explorer" / "runs").mkdir()
        assert default_runs_dir() == tmp_path / "bert-explorer" / "runs"
    finally:
        QCoreApplication.setOrganizationName(names[0])
        QCoreApplication.setApplicationName(names[1])
