"""ExplorerState announces each change on `changed(state, what)`, and only what changed (headless)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.inspector.inspect_job import run_inspection
from explorer.inspector.model_info import describe_model
from explorer.inspector.state import Change, ExplorerState, MaskingMode
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS, make_tiny_model, paired_state

SENTENCE_A, SENTENCE_B = "the king is dead", "long live the king"


class Heard:
    """Every (state, what) announced, kept as the list of `what`."""

    def __init__(self, state: ExplorerState):
        self.state, self.whats = state, []
        state.changed.connect(self.hear)

    def hear(self, state: ExplorerState, what: Change) -> None:
        assert state is self.state
        self.whats.append(what)

    def take(self) -> list[Change]:
        whats, self.whats = self.whats, []
        return whats


@pytest.fixture
def state(tiny_model, tokenizer) -> ExplorerState:
    return paired_state(tiny_model, tokenizer, SENTENCE_A, SENTENCE_B)


@pytest.fixture
def heard(state) -> Heard:
    return Heard(state)


def snapshot_of(tokenizer, masked: bool = True):
    from bertcore.analysis.inspection import inspect_encoding
    from bertcore.data.masking import mask_exactly

    encoding = tokenizer.encode("to be or not", "that is")
    masking = mask_exactly(encoding, tokenizer, [2, 3]) if masked else None
    return inspect_encoding(make_tiny_model(tokenizer, seed=5), tokenizer, encoding, masking=masking)


def test_a_model_announces_the_model_then_the_pair_encoded_again(tiny_model, tokenizer):
    state = ExplorerState()
    heard = Heard(state)
    info = describe_model(tiny_model, "tiny", untrained=True)
    state.set_model(tiny_model, tokenizer, info)
    assert heard.take() == [Change.MODEL]  # no pair yet: nothing to encode
    state.set_pair(SENTENCE_A, None)
    state.set_model(tiny_model, tokenizer, info)
    assert heard.take() == [Change.INPUT, Change.MODEL, Change.INPUT]
    assert state.encoding is not None


def test_an_input_that_does_not_encode_announces_nothing(state, heard):
    with pytest.raises(ValueError, match="sentence A is empty"):
        state.set_pair("", None)
    assert heard.take() == [] and state.text_a == SENTENCE_A


def test_each_masking_mutator_announces_the_masking(state, heard):
    state.mask_like_bert(3)
    assert heard.take() == [Change.MASKING] and state.masking_mode is MaskingMode.BERT
    state.reroll()
    assert heard.take() == [Change.MASKING] and state.seed == 4
    state.toggle_mask(1)
    assert heard.take() == [Change.MASKING] and state.masking_mode is MaskingMode.MANUAL
    state.clear_masks()
    assert heard.take() == [Change.MASKING] and state.masking is None
    state.clear_masks()
    assert heard.take() == []  # nothing was masked: nothing changed


def test_the_seed_remasks_only_while_bert_masks(state, heard):
    state.set_seed(7)
    assert heard.take() == [] and state.seed == 7  # nothing shown uses it yet
    state.mask_like_bert()
    assert state.masking.seed == 7
    heard.take()
    state.set_seed(8)
    assert heard.take() == [Change.MASKING] and state.masking.seed == 8
    state.set_seed(8)
    assert heard.take() == []


def test_a_refused_toggle_announces_nothing(state, heard):
    with pytest.raises(ValueError):
        state.toggle_mask(0)  # [CLS]
    assert heard.take() == []


def test_the_head_mask_is_announced_when_it_changes(state, heard):
    mask = np.ones((TINY_LAYERS, TINY_HEADS), np.float32)
    assert not state.set_head_mask(mask)  # all on, as it was
    assert heard.take() == []
    mask[0, 1] = 0
    assert state.set_head_mask(mask)
    assert heard.take() == [Change.HEAD_MASK]
    assert state.heads_on()[0, 1] == 0
    with pytest.raises(ValueError):
        state.set_head_mask(np.ones((1, 1)))
    assert heard.take() == []


def test_an_inspection_newer_than_the_one_shown_is_announced_an_older_one_dropped(state, heard):
    first, second = state.inspect_request(), state.inspect_request()
    assert state.inspection_arrived(second.request_id, run_inspection(second))
    assert heard.take() == [Change.INSPECTION]
    assert not state.inspection_arrived(first.request_id, run_inspection(first))
    assert heard.take() == []


def test_a_snapshot_is_shown_until_the_live_input_changes(state, heard, tokenizer):
    snapshot = snapshot_of(tokenizer)
    in_flight = state.inspect_request()
    state.show_snapshot(snapshot, "step 10")
    assert heard.take() == [Change.SNAPSHOT] and state.shown_inspection() is snapshot
    assert state.shown_input() == (snapshot.encoding, snapshot.masking)
    assert not state.inspection_arrived(in_flight.request_id, run_inspection(in_flight))  # it must not replace it
    state.set_pair(SENTENCE_A, None)
    assert heard.take() == [Change.SNAPSHOT, Change.INPUT] and state.snapshot is None
    for change in (lambda: state.mask_like_bert(1), state.clear_masks, lambda: state.toggle_mask(1),
                   lambda: state.set_head_mask(np.zeros((TINY_LAYERS, TINY_HEADS)))):
        state.show_snapshot(snapshot, "step 10")
        heard.take()
        change()
        assert heard.take()[0] == Change.SNAPSHOT and state.snapshot is None
    state.leave_snapshot()
    assert heard.take() == [] and state.shown_input() == (state.encoding, state.masking)


def test_the_masking_note_describes_the_snapshot_while_it_is_shown(state, tokenizer):
    assert state.masking_summary().startswith("No masking")
    state.show_snapshot(snapshot_of(tokenizer), "step 10")
    assert state.masking_summary() == "Masking (snapshot, by hand): 2 of 6 tokens — 2 → [MASK], 0 → random, 0 kept"
    state.show_snapshot(snapshot_of(tokenizer, masked=False), "step 10")
    assert state.masking_summary() == "No masking in the snapshot's input."
    state.leave_snapshot()
    assert state.masking_summary().startswith("No masking: click a token")


def test_a_new_model_drops_the_snapshot_and_results_in_flight(state, tiny_model, tokenizer):
    in_flight = state.inspect_request()
    state.show_snapshot(snapshot_of(tokenizer), "step 10")
    state.set_model(tiny_model, tokenizer, describe_model(tiny_model, "tiny", untrained=True))
    assert state.snapshot is None and state.inspection is None
    assert not state.inspection_arrived(in_flight.request_id, run_inspection(in_flight))
