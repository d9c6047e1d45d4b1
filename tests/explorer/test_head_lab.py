"""The head lab in the window, driven through its objectNames (pytest-qt, offscreen, a tiny model).

Each view is checked against the bertcore function called directly on the same input or sample.
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QComboBox, QLabel, QPushButton, QSpinBox, QTableView, QWidget

from bertcore.analysis.embedding_views import (
    nearest_neighbours,
    position_similarity,
    project_hidden_states,
    sample_hidden_states,
)
from bertcore.analysis.importance import (
    head_importance,
    input_head_importance,
    normalize_importance,
    pretraining_sample,
)
from bertcore.analysis.lens import logit_lens
from bertcore.analysis.pruning import pretraining_metric, pruning_curve
from bertcore.analysis.roles import corpus_head_roles, role_sample
from bertcore.data.batches import PretrainingData
from bertcore.data.corpus import read_corpus
from bertcore.files.resources import default_corpus_path
from explorer.embeddings._qt.embedding_view import EmbeddingView
from explorer.embeddings.requests import sample_pairs
from explorer.head_lab._qt.head_marks import score_colour
from explorer.head_lab.analyses import ROLE_BADGES
from explorer.head_lab.corpus_run import CorpusSettings
from explorer.inspector.model_info import LoadedModel, describe_model
from tests.explorer import test_window
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS, make_tiny_model

find = test_window.find

SENTENCE_A = "the king is dead long live the king"
SENTENCE_B = "his son shall wear the crown"
MASKED = [2, 11]
WAIT_MS = 20_000


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    """The first ~400 documents of the built-in corpus: enough for a held-out split, quick to tokenize."""
    text = default_corpus_path().read_text(encoding="utf-8")
    documents = text.split("\n\n")[:400]
    path = tmp_path_factory.mktemp("corpus") / "small.txt"
    path.write_text("\n\n".join(documents), encoding="utf-8")
    return path


def inspect_masked(qtbot, window, positions=MASKED):
    """The pair with `positions` masked by hand, once its inspection and its head-lab analysis are in."""
    tab = window.inspect_tab
    tab.input_form.sentence_a_edit.setText(SENTENCE_A)
    tab.input_form.sentence_b_edit.setText(SENTENCE_B)
    tab.flush_input()
    qtbot.waitUntil(lambda: tab.state.inspection is not None
                    and tab.state.inspection.encoding.tokens == tab.state.encoding.tokens, timeout=WAIT_MS)
    for position in positions:
        tab.toggle_mask(position)
    lab = window.head_lab

    def analysed() -> bool:
        analysis = lab.last_analysis
        inspection = tab.state.inspection
        return (lab.input_analysis_current and inspection.masking is not None
                and inspection.masking.positions == positions and analysis.scores.roles is not None)
    qtbot.waitUntil(analysed, timeout=WAIT_MS)
    return tab.state.inspection


def show_heads_as(qtbot, window, mode: str) -> None:
    combo = find(window, QComboBox, "headModeCombo")
    combo.setCurrentIndex(combo.findData(mode))


# ---- importance and roles of this input ----------------------------------------------------------------------

@pytest.mark.slow
def test_importance_table_shows_this_inputs_importance_and_roles(qtbot, window, tiny_model, tokenizer):
    show_heads_as(qtbot, window, "importance")
    inspection = inspect_masked(qtbot, window)
    expected = input_head_importance(tiny_model, inspection.encoding, inspection.masking, next_sentence="none")
    roles = window.head_lab.input_scores.roles
    table = find(window, QTableView, "importanceTable")
    model = table.model()
    columns = [model.headerData(column, Qt.Horizontal) for column in range(model.columnCount())]
    assert columns[:6] == ["layer", "head", "importance", "normalised", "rank", "role"]
    assert model.rowCount() == TINY_LAYERS * TINY_HEADS
    table.sortByColumn(columns.index("rank"), Qt.AscendingOrder)
    shown = {}
    for row in range(model.rowCount()):
        values = [model.data(model.index(row, column)) for column in range(model.columnCount())]
        layer, head = int(values[0]) - 1, int(values[1]) - 1  # 1-based in the table
        shown[(layer, head)] = values
        assert float(values[2]) == pytest.approx(expected[layer, head], rel=1e-2)
        assert values[5] == roles.labels[layer, head]
    normalized = normalize_importance(expected)
    ranks = [int(model.data(model.index(row, 4))) for row in range(model.rowCount())]
    assert ranks == list(range(1, TINY_LAYERS * TINY_HEADS + 1))  # sorted by rank, most important first
    top = max(shown, key=lambda key: normalized[key])
    assert shown[top][4] == "1" and float(shown[top][3]) == pytest.approx(1.0)
    assert "MLM loss" in find(window, QLabel, "headScoresCaption").text()


@pytest.mark.slow
def test_heads_are_coloured_by_importance_and_badged_by_role(qtbot, window):
    show_heads_as(qtbot, window, "importance")
    inspect_masked(qtbot, window)
    scores = window.head_lab.input_scores
    panel = window.inspect_tab.attention_panel
    panel.set_layer(1)
    grid = panel.head_grid
    badges = [[ROLE_BADGES[str(label)] for label in row] for row in scores.roles.labels]
    for head in range(TINY_HEADS):  # the head's corner: its number, its importance and its role
        assert grid.head_label(head) == f"{head + 1}\n{scores.normalized[1, head]:.2f} {badges[1][head]}"
        if head != panel.selected_head:  # the selected head keeps its orange frame
            assert grid.frames[head].pen().color().name() == score_colour(scores.normalized[1, head]).name()
    marks = find(window, QWidget, "headMarks")
    assert marks.legend.isVisibleTo(window) and marks.legend.bar.isVisibleTo(window)
    assert "this input (MLM loss)" in marks.legend.toolTip()
    panel.tabs.setCurrentIndex(1)
    notes = [item.toPlainText() for item in panel.overview.note_items if item.isVisible()]
    assert notes == [f"{scores.normalized[layer, head]:.2f} {badges[layer][head]}"
                     for layer in range(TINY_LAYERS) for head in range(TINY_HEADS)]  # layer-major, one per cell
    framed = [item.pen().color().name() for item in panel.overview.frame_items if item.isVisible()]
    assert framed == [score_colour(value).name() for value in scores.normalized.ravel()]
    show_heads_as(qtbot, window, "roles")
    assert grid.head_label(0) == f"1\n{badges[1][0]}" and not marks.legend.bar.isVisibleTo(window)
    shown = [item.toPlainText() for item in panel.overview.note_items if item.isVisible()]
    assert shown == [badge for row in badges for badge in row]
    show_heads_as(qtbot, window, "attention")
    assert grid.head_label(0) == "1" and not any(item.isVisible() for item in panel.overview.note_items)


@pytest.mark.slow
def test_switching_off_the_k_least_important_heads_switches_exactly_those(qtbot, window):
    window.tabs.setCurrentWidget(find(window, QWidget, "headLabTab"))  # the lab is looked at: importance is asked
    inspect_masked(qtbot, window)
    scores = window.head_lab.input_scores
    order = np.argsort(scores.normalized, axis=None, kind="stable")
    find(window, QSpinBox, "switchOffCountSpin").setValue(3)
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(find(window, QPushButton, "switchOffLeastButton"), Qt.LeftButton)
    off = np.flatnonzero(window.inspect_tab.attention_panel.head_mask().ravel() == 0)
    assert sorted(off.tolist()) == sorted(order[:3].tolist())
    np.testing.assert_array_equal(np.flatnonzero(blocker.args[0].head_mask.ravel() == 0), np.sort(order[:3]))
    assert all(not window.inspect_tab.attention_panel.head_grid.checkboxes[head].isChecked()
               for layer, head in zip(*np.unravel_index(order[:3], scores.grid_shape), strict=True)
               if layer == window.inspect_tab.attention_panel.layer)
    status = find(window, QLabel, "headLabStatus")
    assert status.text().startswith("Switched off the 3 least important heads")
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        qtbot.mouseClick(find(window, QPushButton, "allHeadsOnButton"), Qt.LeftButton)
    assert window.inspect_tab.state.head_mask is None
    assert status.text() == "All heads are on."  # not still "Switched off the 3 ..."


@pytest.mark.slow
def test_the_objective_defaults_with_its_reason_and_can_be_changed(qtbot, window, tiny_model):
    show_heads_as(qtbot, window, "importance")
    combo = find(window, QComboBox, "objectiveCombo")
    assert combo.currentData() == "mlm" and "no training history" in combo.toolTip()
    inspection = inspect_masked(qtbot, window)
    with qtbot.waitSignal(window.head_lab.inputAnalysed, timeout=WAIT_MS) as blocker:
        combo.setCurrentIndex(combo.findData("mlm+nsp"))
    expected = input_head_importance(tiny_model, inspection.encoding, inspection.masking, next_sentence="predicted")
    np.testing.assert_allclose(blocker.args[0].scores.importance, expected, rtol=1e-5)
    assert "MLM + NSP loss" in find(window, QLabel, "headScoresCaption").text()


@pytest.mark.slow
def test_a_training_snapshot_is_not_read_with_the_live_model(qtbot, window, tokenizer):
    from bertcore.analysis.inspection import inspect

    show_heads_as(qtbot, window, "roles")
    inspect_masked(qtbot, window)
    snapshot = inspect(make_tiny_model(tokenizer, seed=5), tokenizer, SENTENCE_A, SENTENCE_B)
    window.show_external_inspection(snapshot, "step 10")
    assert "training snapshot" in find(window, QLabel, "logitLensNote").text()
    assert not window.head_lab.input_analysis_current  # what was in flight for the live input is dropped
    assert window.inspect_tab.attention_panel.head_grid.head_label(0) == "1"  # no live marks on the snapshot


# ---- the logit lens -----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_logit_lens_shows_the_lens_of_the_inspection(qtbot, window, tiny_model, tokenizer):
    show_heads_as(qtbot, window, "roles")
    lens_view = find(window, QWidget, "logitLens")
    assert "Mask a token" in find(lens_view, QLabel, "logitLensNote").text() or lens_view.lens is None
    inspection = inspect_masked(qtbot, window)
    expected = logit_lens(tiny_model, tokenizer, inspection)
    np.testing.assert_allclose(lens_view.matrix, expected.original_probability)
    assert lens_view.matrix.shape == (TINY_LAYERS + 1, len(MASKED))
    assert lens_view.left_axis.labels[0] == "embeddings" and lens_view.bottom_axis.label_positions == MASKED
    lens_view.select_column(1)
    table = find(lens_view, QTableView, "logitLensTopK")
    assert table.rowCount() == TINY_LAYERS + 1
    assert table.item(TINY_LAYERS, 0).text().startswith(str(expected.top_tokens[-1, 1, 0]))
    assert lens_view.selected_position() == MASKED[1]
    lens_view.value_combo.setCurrentIndex(lens_view.value_combo.findData("rank"))
    worst = max(1.0, np.log10(max(2, expected.original_rank.max())))
    np.testing.assert_allclose(lens_view.matrix, 1 - np.log10(expected.original_rank) / worst, rtol=1e-6)
    with qtbot.waitSignal(window.head_lab.inputAnalysed, timeout=WAIT_MS):
        window.inspect_tab.clear_masks()
    assert "Mask a token (Ctrl+M or click one)" in find(lens_view, QLabel, "logitLensNote").text()
    assert not lens_view.splitter.isVisibleTo(lens_view)


@pytest.mark.slow
def test_a_model_without_an_mlm_head_says_so_in_the_lab(qtbot, window, tokenizer):
    model = make_tiny_model(tokenizer, seed=2)
    model.has_pretraining_heads = False
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(model, tokenizer, "headless")
    show_heads_as(qtbot, window, "importance")
    with qtbot.waitSignal(window.head_lab.inputAnalysed, timeout=WAIT_MS):
        window.inspect_tab.toggle_mask(1)
    assert "no MLM head" in find(window, QLabel, "logitLensNote").text()
    legend = find(window, QWidget, "headMarks").legend
    assert legend.isVisibleTo(window) and "no MLM or NSP head" in legend.toolTip()  # its label may elide it
    assert not legend.bar.isVisibleTo(window)  # a note, no colour scale
    assert not find(window, QPushButton, "pruningCurveButton").isEnabled()
    assert not find(window, QComboBox, "objectiveCombo").isEnabled()


# ---- the corpus sample --------------------------------------------------------------------------------------

def run_to_end(qtbot, window, settings):
    lab_tab = find(window, QWidget, "headLabTab")
    with qtbot.waitSignal(window.head_lab.corpusEnded, timeout=120_000) as blocker:
        assert lab_tab.start_run(settings=settings)
    assert blocker.args[0] == "finished", blocker.args[1]
    return lab_tab


@pytest.mark.slow
def test_pruning_plot_and_table_show_the_corpus_arrays(qtbot, window, tiny_model, tokenizer, small_corpus):
    settings = CorpusSettings(num_pairs=12, seq_len=32, batch_size=4, corpus_path=str(small_corpus), pruning=True)
    lab_tab = run_to_end(qtbot, window, settings)
    data = PretrainingData(read_corpus(small_corpus), tokenizer, seq_len=32, seed=0)
    importance = head_importance(tiny_model, pretraining_sample(data, 12, batch_size=4, objective="mlm"))
    roles = corpus_head_roles(tiny_model, tokenizer, role_sample(data, 12, batch_size=settings.roles_batch_size))
    evaluation = pretraining_sample(data, 24, batch_size=4, objective="mlm+nsp")[3:]
    curve = pruning_curve(normalize_importance(importance), pretraining_metric(tiny_model, evaluation))
    scores = window.head_lab.corpus_scores
    np.testing.assert_allclose(scores.importance, importance, rtol=1e-6)
    np.testing.assert_array_equal(scores.roles.labels, roles.labels)
    assert find(window, QComboBox, "headSourceCombo").currentData() == "corpus"  # switched to the new results
    table = lab_tab.table
    np.testing.assert_allclose(sorted(table.column_values("importance")), sorted(importance.ravel()), rtol=1e-6)
    plot = find(window, QWidget, "pruningPlot")
    for name in ("mlm_accuracy", "nsp_accuracy"):
        for order in ("importance", "random"):
            x, y = plot.line_data(name, order)
            np.testing.assert_allclose(x, 100 * curve.fractions)
            np.testing.assert_allclose(y, curve.metric(name, order))


@pytest.mark.slow
def test_exports_write_what_the_views_show(qtbot, window, tmp_path, small_corpus):
    settings = CorpusSettings(num_pairs=8, seq_len=32, batch_size=4, corpus_path=str(small_corpus), pruning=True)
    lab_tab = run_to_end(qtbot, window, settings)
    import csv

    with open(lab_tab.plot.write_csv(tmp_path / "curve.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == window.head_lab.curve.num_steps and "importance_mlm_accuracy" in rows[0]
    with open(lab_tab.table.write_csv(tmp_path / "heads.csv"), newline="") as handle:
        assert len(list(csv.reader(handle))) == TINY_LAYERS * TINY_HEADS + 1
    arrays = np.load(lab_tab.table.write_npz(tmp_path / "heads.npz"))
    np.testing.assert_allclose(arrays["importance"], window.head_lab.corpus_scores.importance)
    assert lab_tab.plot.export_png(tmp_path / "curve.png").stat().st_size > 0
    assert lab_tab.plot.export_svg(tmp_path / "curve.svg").read_text().lstrip().startswith("<?xml")


@pytest.mark.slow
def test_cancel_stops_a_sample_run(qtbot, window, small_corpus):
    lab_tab = find(window, QWidget, "headLabTab")
    progress = []
    window.head_lab.corpusProgress.connect(progress.append)
    settings = CorpusSettings(num_pairs=4000, seq_len=32, batch_size=2, corpus_path=str(small_corpus))
    assert lab_tab.start_run(settings=settings)
    qtbot.waitUntil(lambda: any(p.stage == "importance" for p in progress), timeout=WAIT_MS)
    worker = window.head_lab.corpus_worker
    assert find(window, QPushButton, "cancelSampleButton").isEnabled()
    with qtbot.waitSignal(window.head_lab.corpusEnded, timeout=WAIT_MS) as blocker:
        qtbot.mouseClick(find(window, QPushButton, "cancelSampleButton"), Qt.LeftButton)
    assert blocker.args[0] == "stopped"
    assert worker.wait(WAIT_MS) and not worker.is_running
    last = progress[-1]
    assert last.stage == "importance" and last.done < last.total == 2000
    assert window.head_lab.corpus_scores is not None  # the results so far stay
    assert find(window, QPushButton, "runSampleButton").isEnabled()
    assert "cancel" in lab_tab.progress.format()


@pytest.mark.slow
def test_a_headless_model_gets_roles_but_no_importance_from_the_corpus(qtbot, window, tokenizer, small_corpus):
    model = make_tiny_model(tokenizer, seed=3)
    model.has_pretraining_heads = False
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(model, tokenizer, "headless")
    run_to_end(qtbot, window, CorpusSettings(num_pairs=8, seq_len=32, batch_size=4, corpus_path=str(small_corpus)))
    scores = window.head_lab.corpus_scores
    assert scores.importance is None and scores.roles is not None
    assert "no MLM or NSP head" in find(window, QLabel, "headLabStatus").text()


# ---- embeddings ---------------------------------------------------------------------------------------------

@pytest.fixture
def embedding_view(qtbot, tiny_model, tokenizer):
    view = EmbeddingView()
    qtbot.addWidget(view)
    view.resize(1200, 800)
    view.points_spin.setValue(300)
    view.positions_spin.setValue(40)
    view.on_model_changed(LoadedModel(tiny_model, tokenizer, describe_model(tiny_model, "tiny", untrained=True)))
    with qtbot.waitSignal(view.worker.done, timeout=WAIT_MS):
        view.show()
    yield view
    view.shutdown()


@pytest.mark.slow
def test_embedding_view_shows_the_computed_arrays(qtbot, embedding_view, tiny_model, tokenizer):
    view = embedding_view
    assert view.objectName() == "embeddingView"
    np.testing.assert_allclose(view.positions_image.image, position_similarity(tiny_model, 40))
    pairs = sample_pairs(read_corpus(default_corpus_path()), 30)
    layer = TINY_LAYERS  # after the last layer, the default
    sample = sample_hidden_states(tiny_model, tokenizer, pairs, max_points=300)
    expected = project_hidden_states(sample, layer)
    shown = view.projection_pane.scatter.getData()
    np.testing.assert_allclose(np.stack(shown, axis=1), expected.points, rtol=1e-5, atol=1e-5)
    assert len(view.projection_pane.scatter.data) == 300  # one item, one record per point
    with qtbot.waitSignal(view.worker.done, timeout=WAIT_MS):
        view.layer_combo.setCurrentIndex(1)
    np.testing.assert_allclose(view.result.projection.points, project_hidden_states(sample, 1).points,
                               rtol=1e-5, atol=1e-5)
    view.colour_combo.setCurrentIndex(view.colour_combo.findData("kind"))
    colours = set(view.projection_pane.colours)
    assert colours <= {"#7f7f7f", "#1f77b4", "#2ca02c", "#d62728"} and len(colours) >= 2
    label_item = view.colour_combo.model().item(view.colour_combo.findData("label"))
    assert not label_item.isEnabled()  # corpus text has no task labels


def test_hovering_a_point_shows_its_sentence_and_a_click_inspects_it(qtbot, embedding_view):
    view, pane = embedding_view, embedding_view.projection_pane
    pane.scatter_plot.getPlotItem().vb.autoRange()
    qtbot.wait(50)
    index = 5
    point = view.result.projection.points[index]
    scene = pane.scatter_plot.getPlotItem().vb.mapViewToScene(QPointF(float(point[0]), float(point[1])))
    found = pane.point_at(scene)
    assert found >= 0 and np.allclose(view.result.projection.points[found], point, atol=1e-3)
    pane._on_scatter_moved(scene)
    sample = view.result.projection.sample
    assert "«" in pane.projection_hover.text() and str(sample.tokens[found]).removeprefix("##") in \
        pane.projection_hover.text()
    with qtbot.waitSignal(view.inspectPair) as blocker:  # the pane's request, passed on by the tab
        pane.inspect_point(found)
    assert tuple(blocker.args) == view.result.pairs[int(sample.sentence_index[found])]
    view.colour_combo.setCurrentIndex(view.colour_combo.findData("kind"))  # redrawn: the hover marker is gone
    assert len(pane.hover_marker.data) == 0
    pane._on_scatter_moved(scene)  # the same point again is marked again
    assert len(pane.hover_marker.data) == 1


@pytest.mark.slow
def test_token_neighbours_are_bertcores(qtbot, embedding_view, tiny_model, tokenizer):
    view = embedding_view
    view.neighbour_edit.setText("king")
    with qtbot.waitSignal(view.worker.done, timeout=WAIT_MS):
        qtbot.mouseClick(view.neighbour_button, Qt.LeftButton)
    expected = nearest_neighbours(tiny_model, tokenizer, "king", k=10)
    shown = [view.neighbour_list.item(row).text().split()[0] for row in range(view.neighbour_list.count())]
    assert shown == expected.tokens
    view.neighbour_edit.setText("kingdomness")
    with qtbot.waitSignal(view.worker.done, timeout=WAIT_MS):
        view.request()
    assert "not one token" in view.neighbour_list.item(0).text()


@pytest.mark.slow
def test_a_point_sent_to_the_inspector_is_typed_into_it(qtbot, window):
    embeddings = find(window, QWidget, "embeddingView")
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        embeddings.inspectPair.emit("to be or not to be", "that is the question")
    assert window.current_pair() == ("to be or not to be", "that is the question")
    assert window.tabs.currentWidget() is window.inspect_tab


@pytest.mark.slow
def test_closing_the_window_during_a_corpus_run_stops_and_joins_it(qtbot, window, small_corpus):
    progress = []
    window.head_lab.corpusProgress.connect(progress.append)
    settings = CorpusSettings(num_pairs=4000, seq_len=32, batch_size=2, corpus_path=str(small_corpus))
    assert find(window, QWidget, "headLabTab").start_run(settings=settings)
    qtbot.waitUntil(lambda: any(p.stage == "importance" for p in progress), timeout=WAIT_MS)
    worker = window.head_lab.corpus_worker
    window.close()
    assert not worker.is_running and not window.head_lab.input_worker.is_running


def test_a_new_inspection_s_lens_is_asked_for_after_the_window_s_posted_paint(qtbot, window, monkeypatch):
    """The lens' worker holds the GIL while it computes: asked for from a posted call, it could start before the
    window's paint of the inspection (itself a posted event) and slow it. A timer runs after posted events."""
    from PySide6.QtCore import QCoreApplication

    from explorer.inspector.state import Change

    lab = window.head_lab
    asked = []
    monkeypatch.setattr(lab, "request_input_analysis", lambda: asked.append(1))
    lab._on_state_changed(window.inspect_tab.state, Change.INSPECTION)
    QCoreApplication.sendPostedEvents()  # what the event loop does first: the paint request among them
    assert asked == []
    qtbot.waitUntil(lambda: asked == [1], timeout=1000)


@pytest.mark.slow
def test_the_analysis_held_is_not_current_once_a_new_inspection_is_shown(qtbot, window):
    """Between a new inspection and the lens' request (a timer later), the analysis held is the previous input's:
    it must not pass for current, or a reader takes the old marks for the new input's (a flaky test did)."""
    from explorer.inspector.state import Change

    lab = window.head_lab
    show_heads_as(qtbot, window, "importance")
    inspect_masked(qtbot, window)
    assert lab.input_analysis_current
    lab._on_state_changed(window.inspect_tab.state, Change.INSPECTION)
    assert not lab.input_analysis_current
    qtbot.waitUntil(lambda: lab.input_analysis_current, timeout=WAIT_MS)
