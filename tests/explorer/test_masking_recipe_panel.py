"""The Inspect tab's masking panel offers the pretraining recipes (token, whole-word, SpanBERT spans): the state
keeps the recipe and draws with it, the form shows it, and the masked positions feed the predictions as before."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QComboBox, QLabel

from bertcore.data.masking import MaskDecision, mask_like_bert
from explorer.inspector.state import Change, ExplorerState
from explorer.window._qt.main_window import MainWindow
from tests.explorer.conftest import paired_state

WAIT_MS = 10_000
SENTENCE_A = "the unbelievably enormous kingdom of denmark perished, long live the king"
SENTENCE_B = "his son shall take the crown tomorrow"


@pytest.fixture
def state(tiny_model, tokenizer) -> ExplorerState:
    return paired_state(tiny_model, tokenizer, SENTENCE_A, SENTENCE_B)


def test_the_recipe_is_drawn_with_the_seed(state, tokenizer):
    masking = state.mask_like_bert(3, recipe="span")
    assert masking == mask_like_bert(state.encoding, tokenizer, seed=3, recipe="span")
    assert state.masking_recipe == "span"
    assert state.masking_summary().startswith(f"Masking (SpanBERT spans, seed 3): {len(masking.positions)} of ")
    assert f"in {masking.num_units} span" in state.masking_summary()
    state.reroll()  # the next seed, the same recipe
    assert state.masking == mask_like_bert(state.encoding, tokenizer, seed=4, recipe="span")
    state.set_pair("long live the queen", None)  # an edit keeps the recipe
    assert state.masking.recipe == "span"


def test_a_recipe_chosen_while_nothing_is_masked_waits_for_the_next_masking(state):
    heard = []
    state.changed.connect(lambda _, what: heard.append(what))
    state.set_masking_recipe("whole-word")
    assert heard == [] and state.masking is None and state.masking_recipe == "whole-word"
    state.mask_like_bert(0)
    assert heard == [Change.MASKING] and state.masking.recipe == "whole-word"
    assert "whole-word recipe, seed 0" in state.masking_summary() and " in " in state.masking_summary()
    state.set_masking_recipe("token")  # while a recipe masks the input: drawn again with the new one
    assert heard == [Change.MASKING, Change.MASKING] and state.masking.recipe == "token"
    assert state.masking_summary().startswith("Masking (BERT recipe, seed 0)")
    state.set_masking_recipe("token")
    assert len(heard) == 2  # unchanged: nothing announced


def test_an_unknown_recipe_is_refused_and_nothing_changes(state):
    state.mask_like_bert(1)
    before = state.masking
    with pytest.raises(ValueError, match="not one of token, whole-word, span"):
        state.set_masking_recipe("words")
    with pytest.raises(ValueError, match="not one of"):
        state.mask_like_bert(2, recipe="words")
    assert state.masking is before and state.masking_recipe == "token" and state.seed == 1


def test_whole_words_stay_whole_in_the_panel(state):
    tokens = state.encoding.tokens
    for seed in range(20):
        masking = state.mask_like_bert(seed, recipe="whole-word")
        for position, token in enumerate(tokens):
            if token.startswith("##"):
                assert masking.units[position] == masking.units[position - 1]
                assert masking.decisions[position] == masking.decisions[position - 1]


@pytest.fixture
def window(qtbot, window) -> MainWindow:
    """The conftest's window with the sentence pair typed in and inspected."""
    form = window.inspect_tab.input_form
    form.sentence_a_edit.setText(SENTENCE_A)
    form.sentence_b_edit.setText(SENTENCE_B)
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.inspect_tab.flush_input()
    return window


@pytest.mark.slow
def test_picking_a_recipe_masks_with_it_and_feeds_the_predictions(qtbot, window, tokenizer):
    combo = window.findChild(QComboBox, "maskingRecipeCombo")
    assert [combo.itemData(i) for i in range(combo.count())] == ["token", "whole-word", "span"]
    assert combo.currentData() == "token" and "SpanBERT" in combo.toolTip()
    window.inspect_tab.input_form.seed_spin.setValue(5)
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as shown:
        combo.setCurrentIndex(combo.findData("span"))
    inspection = shown.args[0]
    expected = mask_like_bert(window.inspect_tab.state.encoding, tokenizer, seed=5, recipe="span")
    assert inspection.masking == expected
    assert [p.position for p in inspection.predictions] == expected.positions  # as for BERT's recipe
    assert [p.decision for p in inspection.predictions] == [expected.decisions[p] for p in expected.positions]
    note = window.findChild(QLabel, "maskingLabel").text()
    assert note.startswith("Masking (SpanBERT spans, seed 5)") and f"in {expected.num_units} span" in note
    table = window.inspect_tab.token_table
    assert table.model().masking == expected  # the table colours the same decisions
    first = expected.positions[0]
    assert f"span {expected.units[first]} of {expected.num_units}: " in table.model().tooltip(first)


@pytest.mark.slow
def test_the_combo_follows_the_state_without_echoing(qtbot, window):
    combo = window.findChild(QComboBox, "maskingRecipeCombo")
    state = window.inspect_tab.state
    heard = []
    state.changed.connect(lambda _, what: heard.append(what))
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        state.mask_like_bert(2, recipe="whole-word")
    assert combo.currentData() == "whole-word"
    assert heard.count(Change.MASKING) == 1  # shown, not reported back as the user's pick
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.inspect_tab.mask_like_bert()  # the button: the recipe in the combo
    assert state.masking.recipe == "whole-word"
    picked = [d for d in state.masking.decisions if d != MaskDecision.NONE]
    assert picked and state.masking.num_units <= len(picked)
