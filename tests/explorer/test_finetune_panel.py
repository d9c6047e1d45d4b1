"""The Fine-tune tab driven through qtbot: real tiny fine-tuning runs of a small pretrained checkpoint made here,
on the generated keyword task of the engine's tests (does the text name "romeo"?).

Every wait is a qtbot wait on a signal or a condition with a timeout; no fixed sleeps.
"""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bertcore.files.run_folder import list_checkpoints
from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import load_pretrained, save_pretrained
from bertcore.models.task_heads import BertForSequenceClassification
from bertcore.tokenization.wordpiece import SPECIAL_TOKENS, BertTokenizer
from explorer.app import _add_training_tab
from explorer.finetune._qt.finetune_panel import NO_EVALUATION, FinetunePanel
from explorer.finetune.finetune_run import LOADED_START, FinetuneSettings
from explorer.window._qt.main_window import MainWindow
from explorer.window.startup import load_checkpoint
from tests.bertcore.test_finetune import WORDS, keyword_rows, write_csv
from tests.tiny_configs import training_bert

RUN_TIMEOUT_MS = 60_000
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> Path:
    """A tiny BertForPreTraining checkpoint over one token per word."""
    tokenizer = BertTokenizer([*SPECIAL_TOKENS, ".", *WORDS], lowercase=True)
    config = training_bert(tokenizer.vocab_size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertForPreTraining(config)
    return save_pretrained(model, tokenizer, tmp_path_factory.mktemp("pretrained") / "model")


@pytest.fixture(scope="module")
def keyword_task(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("keyword")
    return write_csv(folder / "train.csv", keyword_rows(96, 0)), write_csv(folder / "eval.csv", keyword_rows(32, 1))


def tiny(pretrained, keyword_task, out_dir, **changes) -> FinetuneSettings:
    train, eval_ = keyword_task
    values = dict(demo=None, task="sequence", train=str(train), eval=str(eval_), init_from=str(pretrained),
                  steps=12, batch_size=8, seq_len=16, learning_rate=5e-3, seed=0, device="cpu", checkpoint_every=4,
                  eval_every=6, out_dir=str(out_dir))
    values.update(changes)
    return FinetuneSettings(**values)


@pytest.fixture
def panel(qtbot):
    panel = FinetunePanel(torch_threads=1)
    qtbot.addWidget(panel)
    yield panel
    panel.shutdown()


def run_to_end(qtbot, panel, settings) -> str:
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        assert panel.start_run(settings), panel.status.status_label.text()
    return ended.args[0]


def status(panel) -> str:
    return panel.status.status_label.text()


# ---------------------------------------------------------------- a run in the tab
@pytest.mark.slow
def test_a_run_draws_its_loss_and_task_metric_and_ends_with_a_task_model(qtbot, panel, pretrained, keyword_task,
                                                                         tmp_path):
    out = tmp_path / "run"
    assert run_to_end(qtbot, panel, tiny(pretrained, keyword_task, out)) == "finished"
    panel.plots.flush()
    assert panel.plots.point_count("loss") == 12
    assert panel.plots.eval_point_count("accuracy") == 2  # steps 6 and 12
    assert panel.plots.eval_point_count("macro_f1") == 2
    assert "accuracy (held-out)" in panel.plots.legend_names()
    assert status(panel).startswith("Finished at step 12")
    assert (out / "final" / "config.json").is_file()
    assert panel.eval_label.text().startswith("Held-out at step 12 (32 examples): accuracy ")
    assert not panel.form.problems() and panel.form.batch_spin.isEnabled()  # unlocked

    # "Use this model in the inspector": the chosen folder loads as a task model
    with qtbot.waitSignal(panel.openCheckpoint) as opened:
        assert panel.use_selected_checkpoint() == out / "final"
    assert isinstance(load_pretrained(opened.args[0])[0], BertForSequenceClassification)
    assert load_checkpoint(opened.args[0]).info.task == "sequence"

    # "What changed…": the run's start and the chosen checkpoint
    assert panel.compare_button.isEnabled()
    with qtbot.waitSignal(panel.compareCheckpoints) as compared:
        panel.compare_button.click()
    assert compared.args == [str(pretrained), str(out / "final")]
    panel.checkpoints.combo.setCurrentIndex(panel.checkpoints.combo.count() - 1)  # the oldest checkpoint
    with qtbot.waitSignal(panel.compareCheckpoints) as compared:
        panel.compare_button.click()
    assert compared.args == [str(pretrained), str(list_checkpoints(out)[0][1])]


@pytest.mark.slow
def test_pause_resume_and_stop(qtbot, panel, pretrained, keyword_task, tmp_path):
    settings = tiny(pretrained, keyword_task, tmp_path / "run", steps=400, checkpoint_every=0, eval_every=0)
    assert panel.start_run(settings)
    qtbot.waitUntil(lambda: panel.steps_received >= 2, timeout=RUN_TIMEOUT_MS)
    panel.pause()
    qtbot.waitUntil(lambda: status(panel).startswith("Paused"), timeout=RUN_TIMEOUT_MS)
    paused_at = panel.steps_received
    qtbot.wait(300)
    assert panel.steps_received == paused_at  # held
    assert panel.buttons.resume_button.isEnabled() and not panel.buttons.pause_button.isEnabled()
    panel.resume()
    qtbot.waitUntil(lambda: panel.steps_received > paused_at, timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS) as ended:
        panel.stop()
    assert ended.args == ["stopped"]
    last = panel.plots.last_step()
    assert last < 400
    assert status(panel).startswith(f"Stopped after step {last}") and "Checkpoint:" in status(panel)
    assert panel.buttons.resume_button.isEnabled()  # the stopped run can be continued

    # Resume continues the stopped run from its checkpoint, on the same curve
    steps_before = panel.plots.point_count("loss")
    with qtbot.waitSignal(panel.stepCompleted, timeout=RUN_TIMEOUT_MS) as first:
        assert panel.resume_run(), status(panel)
    assert first.args == [last + 1]
    assert panel.plots.point_count("loss") >= steps_before  # the curve read back, then continued
    with qtbot.waitSignal(panel.runEnded, timeout=RUN_TIMEOUT_MS):
        panel.stop()
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [record["step"] for record in records if record.get("kind") == "step"]
    assert steps == list(range(1, steps[-1] + 1))  # one run, no step twice, none lost


@pytest.mark.parametrize("train_text, expected", [
    ("text,mood\nthe king,yes\nthe queen,no\n", "label"),
    ("", "empty"),
])
@pytest.mark.slow
def test_bad_data_is_a_message_and_keeps_the_previous_curves(qtbot, panel, pretrained, keyword_task, tmp_path,
                                                             train_text, expected):
    assert run_to_end(qtbot, panel, tiny(pretrained, keyword_task, tmp_path / "good", steps=6)) == "finished"
    panel.plots.flush()
    shown = panel.plots.point_count("loss")
    bad = tmp_path / "bad.csv"
    bad.write_text(train_text, encoding="utf-8")
    ended = run_to_end(qtbot, panel, tiny(pretrained, keyword_task, tmp_path / "bad-run", train=str(bad)))
    assert ended == "failed"
    message = status(panel)
    assert expected in message.lower() and "bad.csv" in message, message
    assert "Traceback" not in message and "still showing the run in" in message
    panel.plots.flush()
    assert panel.plots.point_count("loss") == shown and panel.run_dir == tmp_path / "good"
    assert panel.form.batch_spin.isEnabled() and panel.buttons.start_button.isEnabled()


@pytest.mark.slow
def test_the_loaded_model_is_fine_tuned_and_a_missing_one_is_a_message(qtbot, panel, pretrained, keyword_task,
                                                                       tmp_path):
    settings = tiny(pretrained, keyword_task, tmp_path / "run", init_from=LOADED_START, steps=2)
    assert not panel.start_run(settings)
    assert "no model loaded" in status(panel)
    panel.on_model_changed(load_checkpoint(pretrained))
    assert run_to_end(qtbot, panel, settings) == "finished"
    assert panel.start_checkpoint() == pretrained


# ---------------------------------------------------------------- run folders written elsewhere
@pytest.mark.slow
def test_watching_a_bert_finetune_run_folder_shows_its_curves(qtbot, panel, pretrained, keyword_task, tmp_path):
    out = tmp_path / "cli-run"
    train, eval_ = keyword_task
    done = subprocess.run([sys.executable, "-m", "bertcore.cli.finetune", "--task", "sequence", "--train", str(train),
                           "--eval", str(eval_), "--init-from", str(pretrained), "--out", str(out), "--steps", "8",
                           "--eval-every", "4", "--batch-size", "8", "--seq-len", "16", "--lr", "5e-3",
                           "--num-threads", "1", "--no-progress"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert panel.watch_run_folder(out)
    qtbot.waitUntil(lambda: panel.plots.point_count("loss") == 8, timeout=RUN_TIMEOUT_MS)
    qtbot.waitUntil(lambda: panel.plots.eval_point_count("accuracy") == 2, timeout=RUN_TIMEOUT_MS)
    assert panel.eval_label.text().startswith("Held-out at step 8")
    qtbot.waitUntil(lambda: "finished" in status(panel), timeout=RUN_TIMEOUT_MS)
    with qtbot.waitSignal(panel.compareCheckpoints) as compared:
        panel.compare_button.click()
    assert compared.args == [str(pretrained), str(out / "final")]


def test_a_pretraining_run_folder_is_refused_with_the_tab_to_open_it_in(qtbot, panel, tmp_path):
    folder = tmp_path / "pretraining"
    folder.mkdir()
    (folder / "run_config.json").write_text(json.dumps({"training": {"steps": 10, "preset": "tiny"}}))
    assert not panel.watch_run_folder(folder)
    assert "pretraining run (bert-train); open it in the Train tab" in status(panel)
    assert not panel.resume_run(folder)
    assert "open it in the Train tab" in status(panel)
    assert panel.eval_label.text() == NO_EVALUATION


# ---------------------------------------------------------------- the form
def test_a_demo_fills_its_measured_settings_and_own_data_enables_the_files(qtbot):
    panel = FinetunePanel(torch_threads=1)
    qtbot.addWidget(panel)
    form = panel.form
    try:
        assert form.settings() == FinetuneSettings()  # the mood demo from the default model
        assert not form.train_edit.isEnabled() and "question, exclamation or statement" in form.demo_label.text()
        form.demo_combo.setCurrentIndex(form.demo_combo.findData("names"))
        assert form.settings() == FinetuneSettings.for_demo("names")
        form.demo_combo.setCurrentIndex(form.demo_combo.count() - 1)  # my own data files
        assert form.train_edit.isEnabled() and form.task_combo.isEnabled()
        with pytest.raises(ValueError, match="needs a task and a training file"):  # FinetuneConfig's words
            form.settings()
        form.train_edit.setText("train.csv")
        assert form.settings().train == "train.csv" and form.settings().demo is None
        form.warmup_edit.setText("1000")
        assert "warmup_steps" in form.problems() and form.problem_label.isVisibleTo(form)
        assert form.problems()["warmup_steps"].startswith("Warm-up steps is 1000")  # the form's label, not the field
        form.lr_edit.setText("abc")
        assert form.problems()["learning_rate"].startswith("Learning rate must be a positive number, got 'abc'")
        form.lr_edit.setText("0.0002")
        assert not panel.buttons.start_button.toolTip().startswith("Start")
        form.warmup_edit.setText("")
        form.length_unit_combo.setCurrentIndex(1)  # epochs
        form.epochs_edit.setText("0")
        assert "epochs" in form.problems()
        form.epochs_edit.setText("2")
        assert form.settings().steps is None and form.settings().epochs == 2.0 and form.planned_steps() == 0
        settings = replace(FinetuneSettings(), init_from="/some/checkpoint", warmup_steps=5, out_dir="/tmp/x")
        form.set_settings(settings)
        assert form.settings() == settings
    finally:
        panel.shutdown()


# ---------------------------------------------------------------- in the window
@pytest.mark.slow
def test_in_the_main_window_closing_mid_run_stops_and_joins(qtbot, settings, pretrained, keyword_task, tmp_path):
    window = MainWindow(settings)
    qtbot.addWidget(window)
    _add_training_tab(window)  # as the app adds them, once its window is up
    titles = [window.tabs.tabText(index) for index in range(window.tabs.count())]
    assert titles[-2:] == ["Train", "Fine-tune"]
    panel = window.tabs.widget(window.tabs.count() - 1)
    assert isinstance(panel, FinetunePanel)
    assert panel.start_run(tiny(pretrained, keyword_task, tmp_path / "run", steps=400, checkpoint_every=0,
                                eval_every=0))
    qtbot.waitUntil(lambda: panel.steps_received >= 1, timeout=RUN_TIMEOUT_MS)
    window.close()
    assert not panel.is_running
    assert list_checkpoints(tmp_path / "run")  # stopping saved a checkpoint
