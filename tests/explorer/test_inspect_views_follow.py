"""Each view of the Inspect tab follows ExplorerState on its own: built against a state alone (no tab) it redraws
when the state announces an inspection, a snapshot or another model; inside the tab nothing else refreshes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.analysis.inspection import inspect_encoding
from bertcore.data.masking import mask_exactly
from bertcore.models.task_heads import BertForTokenClassification
from bertcore.tasks.kinds import TOKEN_TASK
from explorer.inspector._qt.attention_panel import AttentionPanel
from explorer.inspector._qt.predictions_side import PredictionsSide
from explorer.inspector._qt.token_table import TokenTable
from explorer.inspector.inspect_job import run_inspection
from explorer.inspector.model_info import describe_model
from explorer.inspector.state import ExplorerState
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS, make_tiny_model, paired_state
from tests.tiny_configs import explorer_bert

WAIT_MS = 10_000


def arrive(state: ExplorerState):
    """The worker's part, done here: inspect the state's request and hand the result back."""
    request = state.inspect_request()
    inspection = run_inspection(request)
    assert state.inspection_arrived(request.request_id, inspection)
    return inspection


def snapshot_of(tokenizer):
    """A training snapshot: another model's inspection of another input, masked at two positions."""
    encoding = tokenizer.encode("to be or not", "that is")
    return inspect_encoding(make_tiny_model(tokenizer, seed=5), tokenizer, encoding,
                            masking=mask_exactly(encoding, tokenizer, [2, 3]))


def seeded(model_class, config):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return model_class(config).eval()


@pytest.fixture
def state(tiny_model, tokenizer) -> ExplorerState:
    state = paired_state(tiny_model, tokenizer, "the king is dead", "long live the king")
    state.mask_like_bert(2)
    return state


@pytest.fixture
def views(qtbot, state):
    """The attention panel, the predictions side (predictions, task output, lens) and the token table, each
    following `state`, with no InspectTab anywhere."""
    panel, side, table = AttentionPanel(), PredictionsSide(), TokenTable()
    for view in (panel, side, table):
        qtbot.addWidget(view)
        view.follow(state)
    return panel, side, table


def test_the_views_show_an_inspection_the_state_announces(state, views):
    panel, side, _ = views
    assert panel.inspection is None and side.predictions.note_label.text() == "No inspection yet."
    inspection = arrive(state)
    assert panel.inspection is inspection
    shown = [(row.position, row.top_tokens) for row in side.predictions.model.predictions]
    assert shown == [(row.position, row.top_tokens) for row in inspection.predictions] and shown
    assert side.task_output.kind is None


def test_the_views_show_a_snapshot_then_the_live_inspection_again(state, views, tokenizer):
    panel, side, table = views
    live = arrive(state)
    snapshot = snapshot_of(tokenizer)
    state.show_snapshot(snapshot, "step 40")
    assert panel.inspection is snapshot
    assert [row.position for row in side.predictions.model.predictions] == [2, 3]
    assert table.table_model.encoding.tokens == snapshot.encoding.tokens
    state.leave_snapshot()
    assert panel.inspection is live
    assert [row.position for row in side.predictions.model.predictions] == [row.position for row in live.predictions]
    assert table.table_model.encoding.tokens == live.encoding.tokens


def test_another_model_empties_every_view_until_its_inspection_arrives(state, views, tokenizer):
    panel, side, _ = views
    arrive(state)
    other = make_tiny_model(tokenizer, seed=9)
    state.set_model(other, tokenizer, describe_model(other, "other", untrained=True))
    assert panel.inspection is None and not panel.tabs.isVisibleTo(panel)
    assert side.predictions.model.predictions == [] and side.predictions.note_label.text() == "No inspection yet."
    assert arrive(state) is panel.inspection


def test_the_panel_draws_the_head_mask_the_state_announces_without_sending_it_back(qtbot, state, views):
    panel, _, _ = views
    arrive(state)
    mask = np.ones((TINY_LAYERS, TINY_HEADS), np.float32)
    mask[panel.layer, 1] = 0
    with qtbot.assertNotEmitted(panel.headMaskChanged):
        state.set_head_mask(mask)
    np.testing.assert_array_equal(panel.head_mask(), mask)
    assert not panel.head_grid.checkboxes[1].isChecked()


def test_the_pictures_the_worker_drew_come_with_the_live_inspection_only(state, views, tokenizer):
    from explorer.inspector.attention_images import draw_panel

    panel, _, _ = views
    arrive(state)  # the panel knows the model's heads now: the spec a worker would draw with
    state.mask_like_bert(3)
    request = state.inspect_request()
    inspection = run_inspection(request)
    pictures = draw_panel(inspection, panel.picture_spec())
    state.inspection_arrived(request.request_id, inspection, pictures)
    assert state.shown_pictures() is pictures and panel.layer_view() is pictures.layer.view  # not drawn again
    state.show_snapshot(snapshot_of(tokenizer), "step 40")
    assert state.shown_pictures() is None
    other = make_tiny_model(tokenizer, seed=9)
    state.set_model(other, tokenizer, describe_model(other, "other", untrained=True))
    assert state.pictures is None and state.shown_pictures() is None


def test_the_heads_shown_are_the_snapshots_while_one_is_shown(state, tokenizer):
    assert ExplorerState().shown_heads() is None  # no model: nothing to fit the views to yet
    assert state.shown_heads() == (True, None)
    bare = make_tiny_model(tokenizer, seed=2)
    bare.has_pretraining_heads = False
    state.set_model(bare, tokenizer, describe_model(bare, "bare encoder"))
    assert state.shown_heads() == (False, None)
    state.show_snapshot(snapshot_of(tokenizer), "step 40")
    assert state.shown_heads() == (True, None)
    state.leave_snapshot()
    assert state.shown_heads() == (False, None)


def test_the_side_fits_the_model_shown_and_folds_away_for_one_without_heads(state, views, tokenizer):
    _, side, _ = views
    assert side.toggle_button.isChecked() and side.predictions.isVisibleTo(side)
    bare = make_tiny_model(tokenizer, seed=2)
    bare.has_pretraining_heads = False  # as a checkpoint without heads (MiniLM) loads
    state.set_model(bare, tokenizer, describe_model(bare, "bare encoder"))
    assert not side.toggle_button.isChecked() and side.isHidden()  # nothing to put beside the attention
    arrive(state)
    assert side.predictions.nsp_label.text().startswith("This model has no MLM or NSP head")  # said once
    assert side.predictions.note_label.text() == ""
    state.show_snapshot(snapshot_of(tokenizer), "a pretraining run's step 40")  # a snapshot with its own heads
    assert side.toggle_button.isChecked() and not side.isHidden()
    state.leave_snapshot()
    assert not side.toggle_button.isChecked() and side.isHidden()


def test_a_token_classifier_shows_its_tags_in_the_table_and_its_output_beside(state, views, tokenizer):
    _, side, table = views
    config = explorer_bert(tokenizer.vocab_size, num_hidden_layers=TINY_LAYERS, num_attention_heads=TINY_HEADS,
                           architectures=("BertForTokenClassification",), num_labels=3,
                           id2label={0: "O", 1: "B-PER", 2: "I-PER"})
    tagger = seeded(BertForTokenClassification, config)
    state.set_model(tagger, tokenizer, describe_model(tagger, "tagger"))
    assert table.table_model.rows[-1] == "tag" and side.task_output.isVisibleTo(side)
    assert side.logit_lens.isHidden()  # a task head is not an MLM head for the lens to read
    assert all(table.table_model.cell_text(len(table.table_model.rows) - 1, column) == ""
               for column in range(table.table_model.columnCount()))
    inspection = arrive(state)
    assert side.task_output.kind == TOKEN_TASK
    tags = [table.table_model.cell_text(len(table.table_model.rows) - 1, column)
            for column in range(table.table_model.columnCount())]
    assert len(tags) == len(inspection.encoding) and any(tags)


@pytest.mark.slow
def test_the_tab_refreshes_none_of_its_views_by_hand(qtbot, window, tokenizer):
    """Cut each view of an inspection off the state: the tab still shows the snapshot (caption, signal), and
    every view still shows what it showed, because nothing but its own subscription redraws it."""
    tab = window.inspect_tab
    live = tab.state.shown_inspection()
    cut_off = (tab.attention_panel, tab.predictions, tab.task_output, tab.predictions_side, tab.token_table)
    for callback in tab.state.changed.callbacks():
        if getattr(callback, "__self__", None) in cut_off:
            tab.state.changed.disconnect(callback)
    predictions_before = list(tab.predictions.model.predictions)
    table_before = tab.token_table.table_model.encoding
    snapshot = snapshot_of(tokenizer)
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as shown:
        window.show_external_inspection(snapshot, "training step 1200")
    assert shown.args[0] is snapshot and tab.caption_label.isVisibleTo(tab)
    assert tab.attention_panel.inspection is live
    assert tab.predictions.model.predictions == predictions_before
    assert tab.token_table.table_model.encoding is table_before
