"""A fine-tuned model in the Inspect tab: `taskOutput` shows what its head says, checked against the model's own
logits computed here; a token-classification model adds a tag row to the token table; a pretraining model shows
no task output; the model label names the task and its labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtWidgets import QLabel

from bertcore.models.checkpoint import load_pretrained, save_pretrained
from bertcore.models.task_heads import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    start_from_pretrained,
)
from explorer.inspector._qt.task_output_view import TaskOutputView
from explorer.window._qt.main_window import MainWindow
from tests.explorer.conftest import make_tiny_model

WAIT_MS = 20_000
SEQUENCE_LABELS = {0: "sad", 1: "glad"}
TOKEN_LABELS = {0: "O", 1: "B-PER", 2: "I-PER"}
QUESTION, CONTEXT = "who rules the land?", "the old king rules the land from his castle"


def task_checkpoint(tokenizer, folder, model_class, seed: int, **task_fields):
    """A task model started from a tiny pretraining model, its head initialised from `seed`, saved to `folder`."""
    source = make_tiny_model(tokenizer, seed=1)
    config = source.config.replace(architectures=(model_class.__name__,), **task_fields)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model, _ = start_from_pretrained(model_class, config, source)
        with torch.no_grad():  # a head that prefers some labels, so the test's numbers are not all alike
            for parameter in model.parameters():
                if parameter.dim() == 1 and parameter.shape[0] <= 3:
                    parameter.add_(torch.randn(parameter.shape))
    return save_pretrained(model.eval(), tokenizer, folder)


@pytest.fixture(scope="module")
def task_folders(tmp_path_factory):
    from bertcore.files.resources import default_vocab_path
    from bertcore.tokenization.wordpiece import BertTokenizer

    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    root = tmp_path_factory.mktemp("tasks")
    return {
        "sequence": task_checkpoint(tokenizer, root / "mood", BertForSequenceClassification, 11,
                                    num_labels=2, id2label=SEQUENCE_LABELS),
        "token": task_checkpoint(tokenizer, root / "names", BertForTokenClassification, 12,
                                 num_labels=3, id2label=TOKEN_LABELS),
        "qa": task_checkpoint(tokenizer, root / "squad", BertForQuestionAnswering, 13),
    }


@pytest.fixture
def window(qtbot, settings):
    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    window.resize(1300, 850)
    window.show()
    return window


def open_and_inspect(qtbot, window, folder, text_a: str, text_b: str = ""):
    """Load the checkpoint, type the pair and wait until its inspection is on screen; that inspection."""
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.load_checkpoint(str(folder))

    expected = window.inspect_tab.loaded_model().tokenizer.encode(text_a, text_b or None).tokens

    def shown():
        inspection = window.inspect_tab.state.inspection
        return inspection is not None and inspection.encoding.tokens == expected

    window.inspect_pair(text_a, text_b)
    qtbot.waitUntil(shown, timeout=WAIT_MS)
    return window.inspect_tab.state.inspection


def logits_of(folder, text_a: str, text_b: str | None = None):
    """The saved model's output on the pair, computed here from the folder."""
    model, tokenizer = load_pretrained(folder)
    encoding = tokenizer.encode(text_a, text_b or None)
    with torch.no_grad():
        output = model(input_ids=torch.tensor([encoding.input_ids]),
                       token_type_ids=torch.tensor([encoding.segment_ids]),
                       attention_mask=torch.tensor([encoding.attention_mask]))
    return output, encoding


def task_view(window) -> TaskOutputView:
    view = window.findChild(TaskOutputView, "taskOutput")
    assert view is not None
    return view


@pytest.mark.slow
def test_a_classification_checkpoint_shows_its_label_names_and_probabilities(qtbot, window, task_folders):
    folder = task_folders["sequence"]
    open_and_inspect(qtbot, window, folder, "what a lovely day")
    view = task_view(window)
    assert view.isVisibleTo(window) and view.kind == "sequence"
    output, _ = logits_of(folder, "what a lovely day")
    expected = torch.softmax(output.logits[0].double(), -1).numpy()
    rows = view.bars.rows
    assert [row.label for row in rows] == ["sad", "glad"]
    shown = np.array([row.value for row in rows])
    np.testing.assert_allclose(shown, expected, atol=1e-5)
    assert shown.sum() == pytest.approx(1.0, abs=1e-5)
    best = SEQUENCE_LABELS[int(expected.argmax())]
    assert [row.label for row in rows if row.chosen] == [best]
    assert f"Predicted: {best}" in view.text() and "sad" in view.text() and "glad" in view.text()
    # the model label names the task and its labels
    info = window.inspect_tab.loaded_model().info
    assert info.task == "sequence" and info.task_labels == ("sad", "glad")
    assert "sequence classification: sad, glad" in window.findChild(QLabel, "modelLabel").text()
    assert not window.inspect_tab.predictions.isVisibleTo(window)  # the task output takes the MLM/NSP place


@pytest.mark.slow
def test_a_token_classification_checkpoint_adds_a_tag_row_with_its_label_names(qtbot, window, task_folders):
    folder = task_folders["token"]
    inspection = open_and_inspect(qtbot, window, folder, "alice met bob in paris")
    view = task_view(window)
    assert view.isVisibleTo(window) and view.kind == "token"
    table_model = window.inspect_tab.token_table.table_model
    assert table_model.rows[-1] == "tag"
    tag_row = len(table_model.rows) - 1
    output, encoding = logits_of(folder, "alice met bob in paris")
    predicted = output.logits[0].argmax(-1).numpy()
    tokens = inspection.encoding.tokens
    assert tokens == encoding.tokens
    for position, token in enumerate(tokens):
        text = table_model.cell_text(tag_row, position)
        if token in ("[CLS]", "[SEP]") or token.startswith("##"):
            assert text == ""
        else:
            assert text == TOKEN_LABELS[int(predicted[position])], (position, token)
    assert set(TOKEN_LABELS.values()) <= set(view.legend_label.text().split("&nbsp;"))
    info = window.inspect_tab.loaded_model().info
    assert info.task == "token" and info.task_labels == ("O", "B-PER", "I-PER")


@pytest.mark.slow
def test_a_qa_checkpoint_shows_start_and_end_curves_and_a_span_inside_sentence_b(qtbot, window, task_folders):
    folder = task_folders["qa"]
    inspection = open_and_inspect(qtbot, window, folder, QUESTION, CONTEXT)
    view = task_view(window)
    assert view.isVisibleTo(window) and view.kind == "qa"
    assert view.pages.currentWidget() is view.qa_curves
    output, encoding = logits_of(folder, QUESTION, CONTEXT)
    start, end = view.qa_curves.curve_data()
    np.testing.assert_allclose(start, torch.softmax(output.start_logits[0].double(), -1).numpy(), atol=1e-5)
    np.testing.assert_allclose(end, torch.softmax(output.end_logits[0].double(), -1).numpy(), atol=1e-5)
    context = np.flatnonzero(np.array([sequence == 1 for sequence in encoding.sequence_ids]))
    span = inspection.task_output.span
    assert span is not None and context[0] <= span[0] <= span[1] <= context[-1]
    assert view.qa_curves.span_region.isVisible()
    low, high = view.qa_curves.span_region.getRegion()
    assert (low, high) == (span[0], span[1] + 1)
    assert "sentence B the context" in view.text()
    answer = inspection.task_output.answer
    assert (answer and answer in CONTEXT and answer in view.headline_label.text()) or "No answer" in view.text()
    assert window.inspect_tab.loaded_model().info.task == "qa"


@pytest.mark.slow
def test_a_pretraining_model_shows_no_task_output(qtbot, window, tiny_checkpoint):
    inspection = open_and_inspect(qtbot, window, tiny_checkpoint, "the cat sat")
    assert inspection.task_output is None
    assert not task_view(window).isVisibleTo(window)
    assert window.inspect_tab.predictions.isVisibleTo(window)
    assert "tag" not in window.inspect_tab.token_table.table_model.rows
    assert window.inspect_tab.loaded_model().info.task is None


@pytest.mark.slow
def test_the_tag_row_goes_when_a_pretraining_model_follows_a_tagger(qtbot, window, task_folders, tiny_checkpoint):
    open_and_inspect(qtbot, window, task_folders["token"], "alice met bob")
    assert "tag" in window.inspect_tab.token_table.table_model.rows
    open_and_inspect(qtbot, window, tiny_checkpoint, "the cat sat")
    assert "tag" not in window.inspect_tab.token_table.table_model.rows
    assert not task_view(window).isVisibleTo(window)


@pytest.mark.slow
def test_the_logit_lens_and_the_task_output_each_get_room(qtbot, window, task_folders, tiny_checkpoint):
    """The predictions side holds the predictions or the task output, over the logit lens: whichever is shown
    has a real height, also after switching model kinds (the lens once got a height of 0)."""
    window.resize(1600, 1000)
    side = window.inspect_tab
    open_and_inspect(qtbot, window, tiny_checkpoint, "the cat sat")
    qtbot.waitUntil(lambda: side.logit_lens.height() >= 150)
    assert side.predictions.height() >= 150
    open_and_inspect(qtbot, window, task_folders["sequence"], "the cat sat")
    qtbot.waitUntil(lambda: task_view(window).height() >= 150)
    open_and_inspect(qtbot, window, tiny_checkpoint, "the cat sat")
    qtbot.waitUntil(lambda: side.logit_lens.height() >= 150 and side.predictions.height() >= 150)
