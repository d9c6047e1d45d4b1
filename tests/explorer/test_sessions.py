"""Sessions (.bertx) and the recent-models menu: a session read and written headless, a file that is not one said
clearly, and a saved session reopened in a new window as it was (model, pair, tab, layer, head, zoom, the Runs
tab's folders, ticks, smoothing, axes and filters); a session whose model or runs are gone said, the rest restored;
Model ▸ Open recent listing, greying and clearing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings

from explorer.runs.workbench.state import RunsView
from explorer.window.recent_models import MAX_RECENT, RecentModel, from_text, menu_labels, remembered, to_text
from explorer.window.session import VERSION, ModelRef, Session, SessionError, read_session, save_session
from tests.explorer.conftest import WINDOW_WAIT_MS, open_window
from tests.explorer.test_workbench import write_bert_run

SENTENCE_A, SENTENCE_B = "the king is dead long live the king", "his son shall wear the crown"


# ---------------------------------------------------------------- the file, headless
def a_session(tmp_path: Path) -> Session:
    return Session(model=ModelRef(name="tiny-bert", path=str(tmp_path / "tiny-bert")), sentence_a="a cat",
                   sentence_b="a dog", tab="Runs", layer=2, head=1, zoom=((1.5, 6.0), (0.5, 4.0)),
                   runs=RunsView(folders=(str(tmp_path / "runs"),), ticked=(str(tmp_path / "runs" / "lr-0.001"),),
                                 smoothing=0.9, axis="tokens", log_y=True, run_filter="lr", metric_filter="loss"))


def test_a_session_written_reads_back_the_same(tmp_path):
    session = a_session(tmp_path)
    path = save_session(session, tmp_path / "work")
    assert path.name == "work.bertx"
    values = json.loads(path.read_text())
    assert values["format"] == "bert-explorer session" and values["version"] == VERSION
    assert read_session(path) == session


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfe not text", "it is not JSON"),
    (b"[1, 2]", "is not a bert-explorer session"),
    (b'{"format": "something else", "version": 1}', "is not a bert-explorer session"),
    (b'{"format": "bert-explorer session"}', "has no version number"),
    (b'{"format": "bert-explorer session", "version": 99}', "version 99 session, written by a newer bert-explorer"),
])
def test_a_file_that_is_no_session_is_said(tmp_path, content, message):
    path = tmp_path / "x.bertx"
    path.write_bytes(content)
    with pytest.raises(SessionError, match=message):
        read_session(path)
    with pytest.raises(SessionError, match="does not exist"):
        read_session(tmp_path / "missing.bertx")


def test_fields_of_the_wrong_kind_are_noted_and_the_rest_kept(tmp_path):
    values = a_session(tmp_path).to_json()
    values["attention"]["layer"] = "three"
    values["runs"]["smoothing"] = 7
    values["runs"]["axis"] = "epochs"
    values["runs"]["log_y"] = 1
    values["attention"]["zoom"] = [[5, 1], [0, 1]]
    path = tmp_path / "odd.bertx"
    path.write_text(json.dumps(values))
    session = read_session(path)
    assert (session.layer, session.runs.smoothing, session.runs.axis, session.runs.log_y, session.zoom) == (
        0, 0.6, "step", False, None)
    assert (session.head, session.sentence_a, session.runs.metric_filter) == (1, "a cat", "loss")
    assert len(session.notes) == 5 and any("the layer is \"three\"" in note for note in session.notes)


def test_the_recent_models_list():
    models: list[RecentModel] = []
    for index in range(MAX_RECENT + 2):
        models = remembered(models, f"/m/{index}", f"model {index}")
    assert [model.path for model in models] == [f"/m/{index}" for index in range(MAX_RECENT + 1, 1, -1)]
    models = remembered(models, "/m/5", "model 5")
    assert models[0].path == "/m/5" and len(models) == MAX_RECENT and len({m.path for m in models}) == MAX_RECENT
    assert from_text(to_text(models)) == models
    assert from_text("not json") == from_text(None) == from_text('{"a": 1}') == []
    twins = [RecentModel("/a/run1/final", "final"), RecentModel("/b/run2/final", "final"), RecentModel("/c", "c")]
    assert menu_labels(twins) == ["final (/a/run1)", "final (/b/run2)", "c"]
    assert "no longer there" in RecentModel("/nowhere/at/all", "x").problem()


# ---------------------------------------------------------------- the window
@pytest.fixture
def runs_folder(tmp_path) -> Path:
    root = tmp_path / "runs"
    for index, lr in enumerate((1e-3, 3e-3, 1e-2)):
        write_bert_run(root / f"lr-{lr:g}", lr, start=index)
    return root


def ini(tmp_path: Path, name: str) -> QSettings:
    return QSettings(str(tmp_path / f"{name}.ini"), QSettings.IniFormat)


def loaded(qtbot, window, folder: Path) -> None:
    """Open a checkpoint folder in the window and wait until its inspection shows."""
    with qtbot.waitSignal(window.modelChanged, timeout=WINDOW_WAIT_MS):
        window.load_checkpoint(str(folder))
    qtbot.waitUntil(lambda: window.inspect_tab.state.inspection is not None, timeout=WINDOW_WAIT_MS)


def typed(qtbot, window, text_a: str, text_b: str) -> None:
    form = window.inspect_tab.input_form
    form.sentence_a_edit.setText(text_a)
    form.sentence_b_edit.setText(text_b)
    window.inspect_tab.flush_input()
    state = window.inspect_tab.state
    qtbot.waitUntil(lambda: state.inspection is not None and state.inspection.encoding is state.encoding
                    and state.text_a == text_a, timeout=WINDOW_WAIT_MS)


def runs_found(qtbot, window, count: int) -> None:
    qtbot.waitUntil(lambda: sum(1 for entry in window.runs_tab.state.runs.values() if entry.curves) >= count,
                    timeout=20_000)


@pytest.mark.slow
def test_a_saved_session_reopens_as_it_was_in_a_new_window(qtbot, tmp_path, tiny_checkpoint, runs_folder):
    first = open_window(qtbot, ini(tmp_path, "first"))
    loaded(qtbot, first, tiny_checkpoint)
    typed(qtbot, first, SENTENCE_A, SENTENCE_B)
    panel = first.inspect_tab.attention_panel
    panel.select_head(2, 1)
    panel.head_detail.plot.vb.user_moved = True  # as the wheel does: a later resize keeps the view
    panel.head_detail.plot.vb.setRange(xRange=(2.0, 9.0), yRange=(1.0, 8.0), padding=0)
    runs = first.runs_tab
    runs.add_folder(str(runs_folder))
    first.tabs.setCurrentWidget(runs)
    runs_found(qtbot, first, 3)
    ticked = sorted(str(entry.folder) for entry in runs.state.runs.values() if entry.name != "lr-0.003")
    runs.state.tick_only(ticked)
    runs.set_smoothing(0.9)
    runs.log_y_check.setChecked(True)
    runs.axis_box.setCurrentIndex(runs.axis_box.findData("relative"))
    runs.metric_filter.setText("loss")
    runs.run_filter.setText("lr")
    saved = first.current_session()
    assert saved.zoom is not None and (saved.layer, saved.head) == (2, 1)
    path = first.save_session(tmp_path / "work.bertx")
    first.close()

    second = open_window(qtbot, ini(tmp_path, "second"))
    assert second.inspect_tab.state.model is None
    with qtbot.waitSignal(second.modelChanged, timeout=WINDOW_WAIT_MS):
        second.open_session(path)
    qtbot.waitUntil(lambda: second._session_waiting is None, timeout=WINDOW_WAIT_MS)
    state = second.inspect_tab.state
    assert state.model_info.path == str(tiny_checkpoint) and (state.text_a, state.text_b) == (SENTENCE_A, SENTENCE_B)
    assert second.tabs.currentWidget() is second.runs_tab
    panel = second.inspect_tab.attention_panel
    assert (panel.layer, panel.selected_head) == (2, 1)
    # The head view keeps its cells square: the region saved is shown whole, about the same centre, one axis exact.
    (x0, x1), (y0, y1) = panel.head_detail.plot.vb.viewRange()
    (saved_x0, saved_x1), (saved_y0, saved_y1) = saved.zoom
    assert ((x0 + x1) / 2, (y0 + y1) / 2) == pytest.approx(((saved_x0 + saved_x1) / 2, (saved_y0 + saved_y1) / 2))
    assert x0 <= saved_x0 + 1e-6 and x1 >= saved_x1 - 1e-6 and y0 <= saved_y0 + 1e-6 and y1 >= saved_y1 - 1e-6
    assert min(abs((x1 - x0) - (saved_x1 - saved_x0)), abs((y1 - y0) - (saved_y1 - saved_y0))) < 1e-6
    assert panel.head_detail.plot.vb.is_zoomed()
    runs = second.runs_tab
    runs_found(qtbot, second, 3)
    assert sorted(str(entry.folder) for entry in runs.state.runs.values() if entry.ticked) == ticked
    assert (runs.state.smoothing, runs.state.mode.axis, runs.state.mode.log_y, runs.state.mode.log_x) == (
        0.9, "relative", True, False)
    assert (runs.metric_filter.text(), runs.run_filter.text(), runs.log_y_check.isChecked()) == ("loss", "lr", True)
    assert second.current_session().runs == saved.runs
    assert str(runs_folder.resolve()) in [str(folder) for folder in runs.state.folders]
    assert second.error_box is None  # nothing to say: everything came back


@pytest.mark.slow
def test_a_session_whose_model_and_runs_are_gone_says_so_and_restores_the_rest(qtbot, tmp_path, tiny_checkpoint,
                                                                               tiny_model, tokenizer, runs_folder):
    moved = tmp_path / "moved-checkpoint"
    shutil.copytree(tiny_checkpoint, moved)
    session = Session(model=ModelRef(name="moved", path=str(moved)), sentence_a=SENTENCE_A, tab="Runs", layer=1,
                      head=1, runs=RunsView(folders=(str(runs_folder), str(tmp_path / "gone-runs")),
                                            ticked=(str(runs_folder / "lr-0.01"),), smoothing=0.3))
    path = save_session(session, tmp_path / "old.bertx")
    shutil.rmtree(moved)
    window = open_window(qtbot, ini(tmp_path, "window"))
    from tests.explorer.conftest import show_model

    show_model(qtbot, window, tiny_model, tokenizer)
    window.open_session(path)
    message = window.error_box.text()
    assert f"its model {moved} is no longer there; still showing tiny test" in message
    assert f"the runs folder {tmp_path / 'gone-runs'} is not here" in message
    qtbot.waitUntil(lambda: window._session_waiting is None, timeout=WINDOW_WAIT_MS)
    assert window.inspect_tab.state.text_a == SENTENCE_A
    assert (window.inspect_tab.attention_panel.layer, window.inspect_tab.attention_panel.selected_head) == (1, 1)
    assert window.runs_tab.state.smoothing == 0.3 and "gone-runs" in window.runs_tab.message_label.text()
    runs_found(qtbot, window, 3)
    assert [entry.name for entry in window.runs_tab.state.runs.values() if entry.ticked] == ["lr-0.01"]


@pytest.mark.slow
def test_a_file_that_is_no_session_changes_nothing_and_says_why(qtbot, tmp_path, window):
    path = tmp_path / "notes.bertx"
    path.write_text("just some notes")
    before = window.current_session()
    assert window.open_session(path) is None
    assert "is not a bert-explorer session: it is not JSON" in window.error_box.text()
    assert window.current_session() == before


@pytest.mark.slow
def test_open_recent_lists_the_models_opened_greys_the_missing_and_clears(qtbot, tmp_path, tiny_checkpoint):
    window = open_window(qtbot, ini(tmp_path, "recent"))
    other = tmp_path / "other-bert"
    shutil.copytree(tiny_checkpoint, other)
    loaded(qtbot, window, other)
    loaded(qtbot, window, tiny_checkpoint)
    window.fill_recent_menu()
    actions = [action for action in window.recent_menu.actions() if action.data()]
    assert [action.data() for action in actions] == [str(tiny_checkpoint), str(other)]
    assert actions[0].text() == "&1 tiny-bert" and all(action.isEnabled() for action in actions)
    shutil.rmtree(other)
    window.fill_recent_menu()
    missing = next(action for action in window.recent_menu.actions() if action.data() == str(other))
    assert not missing.isEnabled() and missing.text().endswith("(missing)")
    assert "is no longer there" in missing.toolTip()
    with qtbot.waitSignal(window.modelChanged, timeout=WINDOW_WAIT_MS):
        next(action for action in window.recent_menu.actions() if action.data() == str(tiny_checkpoint)).trigger()
    assert ini(tmp_path, "recent").value("model/recent")  # kept in the settings, for the next start
    window.findChild(type(missing), "clearRecentModels").trigger()
    window.fill_recent_menu()
    assert next(action.text() for action in window.recent_menu.actions() if not action.isSeparator()) == \
        "No models opened yet"
