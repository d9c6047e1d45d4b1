"""The Explain tab's views draw the results they are given; a click on an output in the Inspect tab reaches the
Explain tab with the right target; Cancel stops the work; a newer request wins (pytest-qt, offscreen)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt

from bertcore.data.masking import mask_exactly
from explorer.explain._qt.attribution_view import AttributionColumn, AttributionView
from explorer.explain._qt.explain_tab import ExplainTab
from explorer.explain._qt.faithfulness_plot import FaithfulnessPlot
from explorer.explain._qt.mixing_view import MixingView
from explorer.explain._qt.patching_view import PatchingView
from explorer.explain.jobs import JobRecord
from explorer.explain.state import ExplainRequest, mixing_maps
from explorer.inspector.model_info import LoadedModel, describe_model

WAIT_MS = 10_000
TOKENS = ["[CLS]", "the", "[MASK]", "sat", "[SEP]"]


def test_attribution_view_colours_each_token_on_its_method_scale(qtbot):
    view = AttributionView()
    qtbot.addWidget(view)
    view.resize(600, 300)
    view.show()
    ig = np.array([0.0, 2.0, -1.0, 0.5, 0.0], np.float32)
    norm = np.array([0.1, 0.2, 0.4, 0.1, 0.0], np.float32)
    view.show_attributions(TOKENS, [AttributionColumn("integrated gradients", "±2", ig),
                                    AttributionColumn("gradient norm", "±0.4", norm)], marked=[2], specials=[0, 4])
    assert view.scales == [2.0, pytest.approx(0.4)]
    strongest, zero, negative = view.chip_colour_at(0, 1), view.chip_colour_at(0, 0), view.chip_colour_at(0, 2)
    assert strongest.red() > 150 and strongest.blue() < 100  # red: pushed the logit up
    assert min(zero.red(), zero.green(), zero.blue()) > 200  # white at 0
    assert negative.blue() > negative.red()  # blue: pulled it down
    assert view.chip_colour_at(1, 2).name() == view.chip_colour_at(0, 1).name()  # each column's own scale
    assert len(view.canvas.chips) == 2 * len(TOKENS)
    assert view.describe(1) == "position 1: 'the'\nintegrated gradients: +2\ngradient norm: +0.2"
    column, position, rect = view.canvas.chips[6]
    assert view.canvas.chip_at(rect.center()) == (column, position) == (1, 1)
    with pytest.raises(ValueError, match="has 2 scores for 5 tokens"):
        view.show_attributions(TOKENS, [AttributionColumn("x", "", np.zeros(2, np.float32))])


def faithfulness_result(seed: int):
    rng = np.random.default_rng(seed)
    fractions = np.linspace(0, 1, 6)
    return SimpleNamespace(fractions=fractions, deletion=rng.random(6), insertion=rng.random(6), deletion_auc=0.25,
                           insertion_auc=0.75, comprehensiveness=0.5, sufficiency=0.125)


def test_faithfulness_plot_draws_a_deletion_and_an_insertion_curve_per_method(qtbot):
    plot = FaithfulnessPlot()
    qtbot.addWidget(plot)
    ig, gxi = faithfulness_result(0), faithfulness_result(1)
    plot.show_curves({"integrated_gradients": ig, "gradient_x_input": gxi})
    x, y = plot.line_data("gradient_x_input", "insertion")
    np.testing.assert_allclose(x, gxi.fractions)
    np.testing.assert_allclose(y, gxi.insertion)
    assert "comprehensiveness 0.5, sufficiency 0.125" in plot.caption.text()
    assert "integrated gradients</b>: area 0.25 deleting, 0.75 inserting" in plot.caption.text()
    plot.show_curves({"integrated_gradients": ig})  # a method unticked: its lines go
    assert set(plot.lines) == {("integrated_gradients", "deletion"), ("integrated_gradients", "insertion")}
    plot.show_curves({}, "nothing yet")
    assert plot.caption.text() == "nothing yet" and plot.lines == {}


def test_mixing_view_draws_four_maps_on_one_scale(qtbot):
    view = MixingView()
    qtbot.addWidget(view)
    rng = np.random.default_rng(2)
    layers, tokens = 3, len(TOKENS)
    globenc = SimpleNamespace(method="globenc", per_layer=rng.random((layers, tokens, tokens)),
                              rollout=rng.random((layers, tokens, tokens)))
    attention = SimpleNamespace(method="attention", per_layer=rng.random((layers, tokens, tokens)),
                                rollout=rng.random((layers, tokens, tokens)))
    maps = mixing_maps(globenc, attention, 2)
    view.set_choices("globenc", 2, layers)
    view.show_maps(TOKENS, maps, 2, layers)
    for slot in range(4):
        top = view.levels[1]
        np.testing.assert_allclose(view.image_data(slot), np.minimum(maps[slot][2], top), rtol=1e-5)
        assert tuple(view.images[slot].levels) == (0, 1)  # one scale for the four: fractions of view.levels
    assert view.levels[1] == pytest.approx(max(float(np.percentile(matrix, 99)) for _, _, matrix in maps))
    assert view.method_combo.currentData() == "globenc" and view.layer_spin.value() == 3  # shown 1..L
    with qtbot.waitSignal(view.layerChosen) as chosen:
        view.layer_spin.setValue(2)
    assert chosen.args == [1]
    view.show_maps(TOKENS, maps[:2], 1, layers)
    assert view.image_data(3) is None


def patching_result(scores):
    return SimpleNamespace(scores=np.asarray(scores, np.float32), clean_value=3.0, corrupted_value=-1.0)


def test_patching_view_draws_both_maps_and_a_clicked_layer_shows_its_heads(qtbot):
    view = PatchingView()
    qtbot.addWidget(view)
    view.resize(900, 600)
    view.show()
    layers = 3
    residual = patching_result(np.linspace(-0.2, 1.4, (layers + 1) * len(TOKENS)).reshape(layers + 1, len(TOKENS)))
    per_head = patching_result([[0.1, 0.9], [0.3, 0.2], [1.0, 0.0]])
    view.show_patching(TOKENS, layers, residual, per_head)
    np.testing.assert_allclose(view.residual_image.image, residual.scores)
    np.testing.assert_allclose(view.heads_image.image, per_head.scores)
    assert view.levels == (pytest.approx(-1.4), pytest.approx(1.4))  # symmetric, at least ±1
    assert view.residual_rows.labels[:2] == ["embeddings", "layer 1"]  # layers read 1..L
    assert "clean 3, corrupted -1" in view.caption.text()
    assert view.layer_of_row("residual", 0) is None and view.layer_of_row("residual", 2) == 1
    # a click on the residual map's row of layer 1 (its third row: the embeddings come first)
    qtbot.waitUntil(lambda: view.residual_plot.vb.width() > 10, timeout=WAIT_MS)
    scene_point = view.residual_plot.vb.mapViewToScene(QPointF(1.5, 2.5))
    widget_point = view.canvas.mapFromScene(scene_point)
    with qtbot.waitSignal(view.layerClicked) as clicked:
        qtbot.mouseClick(view.canvas.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(widget_point))
    assert clicked.args == [1]
    view.show_layer(1)
    np.testing.assert_allclose(view.layer_heights(), [0.3, 0.2])
    assert view.frame.isVisible()


# ---------------------------------------------------------------- the tab and its work


def slow_steps(job, *, steps=400, pause=0.005):
    """A stand-in for the real work: many quick steps, each a point to stop at, then a result naming its job."""
    for step in range(steps):
        time.sleep(pause)
        yield JobRecord(job.kind, job.request_id, step / steps, f"step {step}")
    if job.kind == "attribution":
        scores = np.full(len(job.encoding), float(job.request_id), np.float32)
        for method in job.methods:
            result = SimpleNamespace(method=method, scores=scores, delta=0.0, steps=steps)
            yield JobRecord(job.kind, job.request_id, 1.0, "done", ("attribution", method, result))


@pytest.fixture
def tab(qtbot, monkeypatch, tiny_model, tokenizer):
    import explorer.explain._qt.job_runner as job_runner

    monkeypatch.setattr(job_runner, "job_steps", slow_steps)
    tab = ExplainTab(torch_threads=1)
    qtbot.addWidget(tab)
    tab.on_model_changed(LoadedModel(tiny_model, tokenizer, describe_model(tiny_model, "tiny")))  # as the window does
    yield tab
    assert tab.shutdown(30_000)


def request(tokenizer, position=2, text="the cat sat on the mat"):
    encoding = tokenizer.encode(text)
    masking = mask_exactly(encoding, tokenizer, [position])
    return ExplainRequest(("mlm", position, encoding.input_ids[position]), encoding, masking, text, None)


@pytest.mark.slow
def test_cancel_stops_the_work_and_keeps_the_tab_usable(qtbot, tab, tokenizer):
    assert tab.explain(request(tokenizer))
    qtbot.waitUntil(lambda: tab.progress.isVisibleTo(tab), timeout=WAIT_MS)
    assert tab.cancel_button.isEnabled() and tab.status_label.text().startswith("attribution")
    qtbot.waitUntil(lambda: tab.jobs.worker is not None and tab.jobs.worker.steps_done > 0, timeout=WAIT_MS)
    worker = tab.jobs.worker
    with qtbot.waitSignal(worker.stopped, timeout=WAIT_MS):
        qtbot.mouseClick(tab.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not tab.busy, timeout=WAIT_MS)
    assert tab.state.work == {} and tab.state.attributions == {}
    assert not tab.progress.isVisibleTo(tab) and not tab.cancel_button.isEnabled()
    assert "Cancelled" in tab.message_label.text() and tab.message_label.isVisibleTo(tab)


@pytest.mark.slow
def test_a_newer_request_stops_the_running_one_and_only_its_results_show(qtbot, monkeypatch, tab, tokenizer):
    import explorer.explain._qt.job_runner as job_runner

    monkeypatch.setattr(job_runner, "job_steps", lambda job: slow_steps(job, pause=0.002))
    assert tab.explain(request(tokenizer, position=2))
    qtbot.waitUntil(lambda: tab.jobs.worker is not None and tab.jobs.worker.steps_done > 0, timeout=WAIT_MS)
    first = tab.jobs.worker
    with qtbot.waitSignal(first.stopped, timeout=WAIT_MS):
        assert tab.explain(request(tokenizer, position=3))
    newest = tab.state._latest["attribution"]
    qtbot.waitUntil(lambda: "integrated_gradients" in tab.state.attributions, timeout=30_000)
    assert tab.state.target[1] == 3
    assert tab.state.attributions["integrated_gradients"].scores[0] == newest
    assert tab.attribution_view.marked == {3}
    assert [column.title for column in tab.attribution_view.columns][:1] == ["integrated gradients"]


def test_a_failure_is_a_sentence_in_the_tab(qtbot, monkeypatch, tab, tokenizer):
    import explorer.explain._qt.job_runner as job_runner

    def failing(job):
        yield JobRecord(job.kind, job.request_id, 0.0, "starting")
        raise ValueError("the input is too long for this test")

    monkeypatch.setattr(job_runner, "job_steps", failing)
    assert tab.explain(request(tokenizer))
    qtbot.waitUntil(lambda: "too long" in tab.message_label.text(), timeout=WAIT_MS)
    assert "could not be computed: the input is too long for this test" in tab.message_label.text()
    assert "Traceback" not in tab.message_label.text()


def test_an_unusable_corrupted_input_is_said_and_patching_stays_off(qtbot, tab, tokenizer):
    assert tab.explain(request(tokenizer))
    assert not tab.patch_button.isEnabled()
    qtbot.keyClicks(tab.corrupted_a, " big")
    assert "more than the clean input's" in tab.corrupted_note.text() and not tab.patch_button.isEnabled()
    tab.corrupted_a.clear()
    qtbot.keyClicks(tab.corrupted_a, "the cat lay on the mat")
    assert tab.corrupted_note.text().startswith("Ready: 1 position(s) differ (3 'lay')")
    assert tab.patch_button.isEnabled()


@pytest.mark.slow
def test_a_click_on_a_guess_in_the_inspect_tab_explains_it_in_the_explain_tab(qtbot, monkeypatch, settings,
                                                                                 tiny_model, tokenizer):
    import explorer.explain._qt.job_runner as job_runner
    from tests.explorer.conftest import open_window, show_model

    monkeypatch.setattr(job_runner, "job_steps", lambda job: slow_steps(job, steps=2, pause=0.0))
    window = open_window(qtbot, settings)
    show_model(qtbot, window, tiny_model, tokenizer)
    state = window.inspect_tab.state
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.inspect_pair("the cat sat on the mat", "")
    state.toggle_mask(3)
    qtbot.waitUntil(lambda: state.inspection is not None and len(state.inspection.predictions) == 1,
                    timeout=WAIT_MS)
    table = window.findChild(object, "predictionsView")
    prediction = state.inspection.predictions[0]
    index = table.model().index(0, 3 + 1)  # the second guess
    table.scrollTo(index)
    with qtbot.waitSignal(window.explain_tab.explainShown, timeout=WAIT_MS) as shown:
        qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=table.visualRect(index).center())
    assert shown.args == [("mlm", 3, prediction.top_ids[1])]
    assert window.tabs.currentWidget() is window.explain_tab
    explain_state = window.explain_tab.state
    assert explain_state.encoding.tokens[3] == "[MASK]"  # explained on what the model saw
    assert repr(prediction.top_tokens[1]) in window.explain_tab.target_label.text()
    qtbot.waitUntil(lambda: len(explain_state.attributions) == len(explain_state.methods), timeout=WAIT_MS)
    assert explain_state.message == ""
    heads = np.ones((3, 2), np.float32)
    heads[0, 1] = 0
    state.set_head_mask(heads)
    qtbot.waitUntil(lambda: state.inspection is not None and not state.inspection.head_mask.all(), timeout=WAIT_MS)
    window.explain_output(("mlm", 3, prediction.top_ids[0]))
    assert "the heads switched off in the Inspect tab are on here" in window.explain_tab.message_label.text()
    window.close()


@pytest.mark.slow
def test_a_click_on_a_label_bar_asks_for_that_class(qtbot, tokenizer):
    from bertcore.analysis.inspection import inspect_encoding
    from bertcore.models.task_heads import BertForSequenceClassification
    from explorer.inspector._qt.task_output_view import TaskOutputView
    from tests.tiny_configs import explorer_bert

    config = explorer_bert(tokenizer.vocab_size, num_labels=3, id2label={0: "a", 1: "b", 2: "c"},
                           label2id={"a": 0, "b": 1, "c": 2})
    model = BertForSequenceClassification(config).eval()
    inspection = inspect_encoding(model, tokenizer, tokenizer.encode("what a day"))
    view = TaskOutputView()
    qtbot.addWidget(view)
    view.resize(400, 300)
    view.show()
    view.show_inspection(inspection)
    bars = view.bars
    with qtbot.waitSignal(view.explainRequested) as asked:
        qtbot.mouseClick(bars, Qt.MouseButton.LeftButton, pos=QPoint(50, 2 + 2 * bars.ROW_HEIGHT + 5))
    assert asked.args == [("class", 2)]


@pytest.mark.slow
def test_the_qa_buttons_ask_for_the_best_spans_start_and_end(qtbot, tokenizer):
    from bertcore.analysis.inspection import inspect_encoding
    from bertcore.models.task_heads import BertForQuestionAnswering
    from explorer.inspector._qt.task_output_view import TaskOutputView
    from tests.tiny_configs import explorer_bert

    model = BertForQuestionAnswering(explorer_bert(tokenizer.vocab_size)).eval()
    inspection = inspect_encoding(model, tokenizer, tokenizer.encode("who sat", "the cat sat on the mat"))
    view = TaskOutputView()
    qtbot.addWidget(view)
    view.show_inspection(inspection)
    output = inspection.task_output
    first, last = output.span if output.span is not None and output.null_score <= output.span_score else (0, 0)
    for key, expected in (("start", ("start", first)), ("end", ("end", last))):
        with qtbot.waitSignal(view.explainRequested) as asked:
            view.why_buttons[key].click()
        assert asked.args == [expected]
    assert not view.why_buttons["why"].isVisibleTo(view)


def test_what_the_work_sends_is_drawn_at_most_once_per_interval(qtbot, monkeypatch, tab, tokenizer):
    """Twenty layers of patching arriving at once make one redraw, not twenty: each redraw costs the GUI thread the
    GIL while the worker runs."""
    import explorer.explain._qt.explain_tab as explain_tab
    import explorer.explain._qt.job_runner as job_runner

    monkeypatch.setattr(job_runner, "job_steps", lambda job: iter(()))
    assert tab.explain(request(tokenizer))
    drawn = []
    monkeypatch.setattr(tab, "_show_patching", lambda: drawn.append(time.perf_counter()))
    job = tab.state.patching_job() or SimpleNamespace(request_id=tab.state._new_id("patching"))
    for layer in range(20):
        result = patching_result(np.full((3, 8), layer / 20))
        tab.state.arrived(JobRecord("patching", job.request_id, layer / 20, "going", ("patching", "residual", result)))
    assert drawn == []
    qtbot.waitUntil(lambda: len(drawn) == 1, timeout=WAIT_MS)
    qtbot.wait(2 * explain_tab.REDRAW_INTERVAL_MS)
    assert len(drawn) == 1
    last = patching_result(np.ones((3, 8)))
    tab.state.arrived(JobRecord("patching", job.request_id, 1.0, "done", ("patching", "heads", last)))
    tab.state.job_ended("patching", job.request_id, "finished")  # the end draws what is still waiting, at once
    assert len(drawn) == 2 and tab.state.work == {}


@pytest.mark.slow
def test_a_click_on_a_words_bar_asks_for_its_tag_at_its_first_piece(qtbot, tokenizer):
    from bertcore.analysis.inspection import inspect_encoding
    from bertcore.models.task_heads import BertForTokenClassification
    from explorer.inspector._qt.task_output_view import TaskOutputView
    from explorer.inspector.task_display import tagged_words
    from tests.tiny_configs import explorer_bert

    labels = {0: "O", 1: "B-PER", 2: "I-PER"}
    config = explorer_bert(tokenizer.vocab_size, num_labels=3, id2label=labels,
                           label2id={name: index for index, name in labels.items()})
    model = BertForTokenClassification(config).eval()
    inspection = inspect_encoding(model, tokenizer, tokenizer.encode("the dog barked at the rug"))
    view = TaskOutputView()
    qtbot.addWidget(view)
    view.resize(400, 400)
    view.show()
    view.show_inspection(inspection)
    output = inspection.task_output
    words = tagged_words(output, list(inspection.encoding.tokens))
    word, position = words[-1]  # 'rug': two pieces, its tag read at the first
    assert word == "rug" and inspection.encoding.tokens[position + 1] == "##g"
    with qtbot.waitSignal(view.explainRequested) as asked:
        qtbot.mouseClick(view.bars, Qt.MouseButton.LeftButton,
                         pos=QPoint(50, 2 + (len(words) - 1) * view.bars.ROW_HEIGHT + 5))
    assert asked.args == [("tag", position, int(output.predicted_ids[position]))]


@pytest.mark.slow
def test_albert_sentence_order_why_is_explained_as_sop(qtbot, monkeypatch, settings, tokenizer):
    import torch

    import explorer.explain._qt.job_runner as job_runner
    from bertcore.models.albert import AlbertConfig, AlbertForPreTraining
    from explorer.window._qt.main_window import MainWindow

    monkeypatch.setattr(job_runner, "job_steps", lambda job: iter(()))
    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    window.show()
    torch.manual_seed(0)
    albert = AlbertForPreTraining(AlbertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, embedding_size=16,
                                               num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
                                               max_position_embeddings=64)).eval()
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(albert, tokenizer, "tiny-albert")
    button = window.findChild(object, "explainNspButton")
    assert button.isVisible()
    with qtbot.waitSignal(window.explain_tab.explainShown, timeout=WAIT_MS) as shown:
        button.click()
    assert shown.args == [("sop", 0)] and "SOP" in window.explain_tab.target_label.text()
    window.close()


def test_the_mixing_maps_titles_stay_clear_of_the_colour_bar(qtbot):
    """A newcomer's 457 tokens at 1400 × 900: "value norm rolled out to layer 6" ran under the colour bar and
    "attention rollout to layer 6" into its label. A title wider than its map now ends at the map's right end and
    runs out to the left."""
    view = MixingView()
    qtbot.addWidget(view)
    view.resize(680, 680)
    view.show()
    qtbot.waitExposed(view)
    rng = np.random.default_rng(3)
    layers, length = 6, 120
    results = [SimpleNamespace(method=method, per_layer=rng.random((layers, length, length)),
                               rollout=rng.random((layers, length, length))) for method in ("value_norm", "attention")]
    tokens = [f"tok{i}" for i in range(length)]
    view.set_choices("value_norm", 5, layers)
    view.show_maps(tokens, mixing_maps(*results, 5), 5, layers)
    qtbot.wait(50)  # the canvas lays its four plots out
    bar_left = view.bar.sceneBoundingRect().left()
    for slot in (1, 3):  # the right-hand maps, beside the bar
        title = view.plots[slot].titleLabel.item.sceneBoundingRect()
        assert title.right() <= bar_left, (slot, title.right(), bar_left)
