"""The Train tab and the pretraining objectives (bertcore.training.objectives): a curve for each objective's metric,
an objective run's metrics file read back with its metrics, and an Objective / Architecture choice in the form
that shows the config's own messages."""

from __future__ import annotations

import json

import pytest

from bertcore.training.objectives import OBJECTIVE_CLASSES
from explorer.runs.curve_layout import LOSS_PLOT, METRIC_PLOT, PRETRAINING, is_held_out, record_values
from explorer.runs.run_watch import read_curve
from explorer.runs.training_run import TrainingSettings
from explorer.train._qt.training_form import TrainingForm


@pytest.mark.parametrize("name", list(OBJECTIVE_CLASSES))
def test_every_metric_of_every_objective_has_a_curve(name):
    curves = {curve.key: curve for curve in PRETRAINING.train}
    for metric in OBJECTIVE_CLASSES[name].metric_names:
        if metric == "discriminator_accuracy":  # the replaced / original split says more; kept in the file
            continue
        assert metric in curves, f"{name}'s {metric} has no curve"
        assert curves[metric].plot == (LOSS_PLOT if metric.endswith("_loss") else METRIC_PLOT)
        assert PRETRAINING.held_out_curve(metric) is not None


def test_an_rtd_run_folder_reads_back_with_its_metrics(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_config.json").write_text(json.dumps({"training": {"objective": "rtd"}, "objective": "rtd"}))
    step = {"kind": "step", "step": 1, "total_steps": 4, "loss": 20.5, "learning_rate": 1e-3, "grad_norm": 2.0,
            "tokens": 100, "tokens_per_second": 50.0, "elapsed_seconds": 2.0, "generator_loss": 3.0,
            "discriminator_loss": 0.35, "generator_accuracy": 0.2, "discriminator_accuracy": 0.88,
            "replaced_accuracy": 0.25, "original_accuracy": 0.99}
    evaluation = {"kind": "eval", "step": 1, "loss": 21.0, "generator_loss": 3.1, "discriminator_loss": 0.36,
                  "generator_accuracy": 0.19, "replaced_accuracy": 0.2, "original_accuracy": 0.98, "num_examples": 8}
    (run / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in (step, evaluation)))
    read_step, read_eval = read_curve(run)
    assert not is_held_out(read_step) and is_held_out(read_eval)
    values = record_values(read_step)
    assert values["replaced_accuracy"] == 0.25 and values["learning_rate"] == 1e-3 and values["loss"] == 20.5
    assert record_values(read_eval)["generator_accuracy"] == 0.19


@pytest.fixture
def form(qtbot) -> TrainingForm:
    form = TrainingForm()
    qtbot.addWidget(form)
    return form


def test_the_form_offers_objectives_and_architectures_and_shows_the_configs_message(form):
    form.objective_combo.setCurrentIndex(form.objective_combo.findData("rtd"))
    assert form.settings() == TrainingSettings(objective="rtd", learning_rate=2e-4)  # rtd's own (learning_rate.py)
    form.arch_combo.setCurrentIndex(form.arch_combo.findData("roberta"))
    problems = form.problems()
    assert "roberta supports mlm" in problems["objective"]
    assert "roberta supports mlm" in form.problem_label.text()
    with pytest.raises(ValueError, match="roberta supports mlm"):
        form.settings()
    form.objective_combo.setCurrentIndex(form.objective_combo.findData("mlm"))
    assert form.problems() == {} and form.settings().arch == "roberta"
    form.set_settings(TrainingSettings(objective="mlm+sop", arch="albert"))
    assert (form.objective_combo.currentData(), form.arch_combo.currentData()) == ("mlm+sop", "albert")


def test_a_watched_runs_description_names_its_objective():
    from explorer.runs.run_descriptions import describe_run_config

    config = {"training": {"preset": "tiny", "steps": 400, "batch_size": 16, "seq_len": 64, "lr": 0.002},
              "model": {"model_type": "electra", "num_hidden_layers": 2, "hidden_size": 128}, "objective": "rtd"}
    assert describe_run_config(config) == "tiny preset L2/H128, rtd on electra, 400 steps of 16 × 64, lr 0.002"
    del config["objective"]  # a run from before the objectives: BERT's, said as before
    assert describe_run_config(config) == "tiny preset L2/H128, 400 steps of 16 × 64, lr 0.002"
