"""What a new user's walk through the Train tab found: each test holds one of the fixes."""

from __future__ import annotations

import pytest

from explorer.runs.probe_history import ProbePair
from explorer.runs.snapshot_probe import SnapshotProber, WeightsJob


def test_a_roberta_run_probes_a_pair_longer_than_it_takes_truncated_as_the_inspector_does(tokenizer):
    from bertcore.analysis.inspection import max_input_length
    from bertcore.models.roberta import RobertaConfig
    from bertcore.models.task_heads import model_class_for

    config = RobertaConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1,
                           num_attention_heads=2, intermediate_size=48, max_position_embeddings=34)
    model = model_class_for(config)(config).eval()
    long_pair = ProbePair(" ".join(["the king is dead"] * 12), " ".join(["long live the queen"] * 12))
    shown = SnapshotProber()(WeightsJob(model.state_dict(), config, tokenizer, (long_pair,)))[long_pair]
    assert len(shown.input_ids) == max_input_length(config) == 32  # the position table's 34 less the padding offset


def test_the_probe_pane_shows_nothing_of_a_previous_run_nor_of_another_pair(qtbot, tiny_model, tokenizer):
    from bertcore.analysis.inspection import inspect
    from explorer.train._qt.probe_box import ProbeBox

    first, second = ProbePair("the king is dead.", "long live the king."), ProbePair("the queen hears.", None)
    box = ProbeBox(first)
    qtbot.addWidget(box)
    view = box.snapshot_view
    box.add_snapshot(80, {first: inspect(tiny_model, tokenizer, first.text_a, first.text_b)})
    assert "P(B follows A)" in view.readout.text() and view.current_matrix() is not None

    box.clear()  # a new run (an MLM alone, say: no NSP head) is shown
    assert "P(B follows A)" not in view.readout.text() and "step 80" not in view.readout.text()
    assert view.current_matrix() is None and box.step_label.text() == "snapshot: none"

    box.add_snapshot(8, {first: inspect(tiny_model, tokenizer, first.text_a, first.text_b)})
    box.set_current_pair(second.text_a, None)  # the inspector's pair changed: the list selects it
    assert box.selected_pair() == second
    assert view.current_matrix() is None and "not probed yet" in view.readout.text()
    shown = inspect(tiny_model, tokenizer, second.text_a, None)
    box.add_snapshot(16, {second: shown})
    assert "step 16" in view.readout.text() and view.current_matrix().shape == shown.attentions.shape[2:]


def test_a_pause_asked_while_the_corpus_is_prepared_hides_the_preparation_bar():
    from pathlib import Path

    from bertcore.data.prepare import PreparationProgress
    from explorer.runs.lifecycle import RunLifecycle, RunState
    from explorer.runs.status_lines import progress_line, status_line

    lifecycle = RunLifecycle(idle_text="Start.", command="bert-train")
    lifecycle.start(Path("/runs/run-1"), 80)
    lifecycle.preparing_data(PreparationProgress("tokenizing", 20_000_000, 20_000_000, 5.0))
    assert progress_line(lifecycle).text.startswith("Preparing corpus")
    lifecycle.request_pause()
    lifecycle.paused()  # the run holds at its first yield: the corpus is prepared by then
    lifecycle.begin_showing()  # its step-0 probe arrives
    assert lifecycle.state == RunState.PAUSED
    assert status_line(lifecycle).text == "Paused before the first step. Resume continues the same run."
    assert "Preparing" not in progress_line(lifecycle).text and "MB" not in progress_line(lifecycle).text


def test_the_forms_messages_use_its_labels_and_advise_for_the_model_chosen(qtbot):
    from explorer.train._qt.training_form import TrainingForm

    form = TrainingForm()
    qtbot.addWidget(form)
    form.mlm_probability_edit.setText("abc")
    assert form.problems()["mlm_probability"] == "MLM probability must be a number, got 'abc'"
    form.mlm_probability_edit.setText("1.5")
    assert form.problems()["mlm_probability"].startswith("MLM probability must be above 0 and below 1, got 1.5")
    form.mlm_probability_edit.setText("0.15")
    form.lr_edit.setText("0")
    said = form.problems()["learning_rate"]
    assert said.startswith("Learning rate must be a positive number, got 0")
    assert "BERT-mini" not in said and "this form suggests 0.001 for a new tiny model" in said
    assert form.problem_label.text() == said
    with pytest.raises(ValueError, match=r"^Learning rate must be"):
        form.settings()
    form.steps_spin.setValue(0)
    assert form.problems()["steps"].startswith("Steps must be a positive integer, got 0")


def test_the_corpus_browse_buttons_are_locked_with_the_field_while_a_run_goes(qtbot):
    from explorer.train._qt.training_form import TrainingForm

    form = TrainingForm()
    qtbot.addWidget(form)
    form.set_editable(False)  # a run prepares its corpus
    assert not form.corpus_edit.isEnabled()
    assert not form.browse_file_button.isEnabled() and not form.browse_folder_button.isEnabled()
    form.set_editable(True)
    assert form.browse_file_button.isEnabled() and form.browse_folder_button.isEnabled()


def test_the_corpus_hints_and_the_file_dialog_name_every_format_a_run_reads(qtbot, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    from bertcore.data.sources import FORMATS
    from explorer.train._qt.training_form import TrainingForm

    form = TrainingForm()
    qtbot.addWidget(form)
    asked = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda *args: asked.append(args) or ("/data/shards/part-0.parquet", ""))
    form.browse_file_button.click()
    offered = asked[0][3].split(";;")[0]
    for suffix in FORMATS:
        assert f"*{suffix}" in offered and suffix in form.browse_file_button.toolTip()
        assert suffix in form.corpus_edit.toolTip() or suffix in (".parquet", ".arrow")
    assert "Parquet" in form.corpus_edit.placeholderText() and ".jsonl" in form.corpus_edit.placeholderText()
    assert form.settings().corpus == "/data/shards/part-0.parquet"


def test_continue_the_loaded_model_is_disabled_up_front_for_a_model_without_heads(qtbot, tiny_model, tokenizer):
    from explorer.inspector.model_info import LoadedModel, describe_model
    from explorer.runs.training_run import CONTINUE_LOADED
    from explorer.train._qt.training_panel import TrainingPanel

    panel = TrainingPanel(torch_threads=1)
    qtbot.addWidget(panel)
    combo = panel.form.model_combo
    item = combo.model().item(combo.findData(CONTINUE_LOADED))
    bare = make_bare(tokenizer)  # how MiniLM loads: an encoder whose pretraining heads were not in its weights
    panel.on_model_changed(LoadedModel(bare, tokenizer, describe_model(bare, "MiniLM")))
    assert not item.isEnabled() and "no MLM/NSP heads" in item.toolTip() and "new model" in item.toolTip()

    combo.setCurrentIndex(combo.findData(CONTINUE_LOADED))  # chosen before the model came (or by a script)
    assert "no MLM/NSP heads" in panel.form.problem_label.text() and panel.form.problem_label.isVisibleTo(panel)
    assert "no MLM/NSP heads" in panel.buttons.start_button.toolTip()
    assert not panel.start_run() and "pick a new model instead" in panel.status.status_label.text()

    panel.on_model_changed(LoadedModel(tiny_model, tokenizer, describe_model(tiny_model, "tiny")))
    assert item.isEnabled() and not panel.form.problems() and "no MLM" not in panel.buttons.start_button.toolTip()
    assert panel.shutdown()


def make_bare(tokenizer):
    from bertcore.models.bert import BertForPreTraining
    from tests.tiny_configs import explorer_bert

    bare = BertForPreTraining(explorer_bert(tokenizer.vocab_size, num_hidden_layers=1))
    bare.has_pretraining_heads = False
    return bare
