"""Switching from a masked LM with masked positions to a fine-tuned classifier: the classifier reads the input as
typed (its prediction is never shown on [MASK]s drawn for the model before), and the masking line says the masks
were cleared for it and why; masking it by hand afterwards still works."""

from __future__ import annotations

import pytest
import torch

from bertcore.analysis.inspection import inspect_encoding
from bertcore.models.task_heads import BertForSequenceClassification, start_from_pretrained
from explorer.inspector.model_info import describe_model
from explorer.inspector.state import MaskingMode
from tests.explorer.conftest import make_tiny_model, paired_state, show_model

SENTENCE_A, SENTENCE_B = "the king is dead long live the king", "his son shall wear the crown"
WAIT_MS = 10_000


def classifier(tokenizer):
    source = make_tiny_model(tokenizer, seed=1)
    config = source.config.replace(architectures=("BertForSequenceClassification",), num_labels=2,
                                   id2label={0: "sad", 1: "glad"}, label2id={"sad": 0, "glad": 1})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model, _ = start_from_pretrained(BertForSequenceClassification, config, source)
    return model.eval()


def test_a_classifier_takes_over_an_unmasked_input_and_the_masking_line_says_why(tiny_model, tokenizer):
    state = paired_state(tiny_model, tokenizer, SENTENCE_A, SENTENCE_B)
    state.mask_like_bert(seed=2)
    assert state.masking is not None and state.masking.positions
    model = classifier(tokenizer)
    state.set_model(model, tokenizer, describe_model(model, "mood/final"))
    assert state.masking is None and state.masking_mode is MaskingMode.NONE
    request = state.inspect_request()
    assert request.masking is None and request.encoding.input_ids == tokenizer.encode(SENTENCE_A, SENTENCE_B).input_ids
    line = state.masking_summary()
    assert "cleared" in line and "mood/final" in line and "as typed" in line, line
    state.toggle_mask(2)  # the user may still ask what [MASK] does to the classifier
    assert state.masking is not None and list(state.masking.positions) == [2]
    assert "cleared" not in state.masking_summary()


def test_a_masked_lm_after_a_masked_lm_keeps_its_recipe_redrawn(tiny_model, tokenizer):
    state = paired_state(tiny_model, tokenizer, SENTENCE_A, SENTENCE_B)
    state.mask_like_bert(seed=2)
    other = make_tiny_model(tokenizer, seed=9)
    state.set_model(other, tokenizer, describe_model(other, "other", untrained=True))
    assert state.masking is not None and state.masking_mode is MaskingMode.BERT
    assert "cleared" not in state.masking_summary()


@pytest.mark.slow
def test_the_window_shows_the_classifiers_output_for_the_input_as_typed(qtbot, window, tokenizer):
    tab = window.inspect_tab
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.inspect_pair(SENTENCE_A, SENTENCE_B)
    tab.mask_like_bert(seed=2)
    qtbot.waitUntil(lambda: tab.state.inspection.masking is not None, timeout=WAIT_MS)
    model = classifier(tokenizer)
    show_model(qtbot, window, model, tokenizer, "mood/final")
    qtbot.waitUntil(lambda: tab.state.inspection is not None, timeout=WAIT_MS)
    shown = tab.state.inspection
    assert shown.masking is None
    expected = inspect_encoding(model, tokenizer, tokenizer.encode(SENTENCE_A, SENTENCE_B)).task_output
    assert shown.task_output.probabilities == pytest.approx(expected.probabilities, abs=1e-6)
    assert "cleared" in tab.input_form.masking_label.text()
