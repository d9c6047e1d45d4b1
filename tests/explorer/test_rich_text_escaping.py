"""Model and user text is shown as the text it is, never read as markup: RoBERTa's pair layout `<s> A </s></s> B </s>`
in the truncation notice, its `<mask>` in the masking line, the predictions and the Explain tab's target, a folder
or a sentence holding `<i>`. A QLabel left to guess its format (Qt's AutoText) takes any of these for HTML and
drops them; a label that is rich text on purpose must escape what it quotes."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import Qt as GuiQt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QAbstractButton, QAbstractItemView, QLabel, QWidget

from tests.explorer.conftest import open_window

WAIT_MS = 20_000
MODEL_MARKUP = ("<s>", "</s>", "<mask>", "<pad>", "<unk>", "<i>", "</i>")  # what model or user text may hold


def shown_as_rich_text(text: str, text_format: Qt.TextFormat) -> bool:
    guessed_rich = text_format == Qt.TextFormat.AutoText and GuiQt.mightBeRichText(text)
    return text_format == Qt.TextFormat.RichText or guessed_rich


def as_read(text: str, text_format: Qt.TextFormat) -> str:
    """What a reader sees of `text` in a label of `text_format`."""
    if not shown_as_rich_text(text, text_format):
        return text
    document = QTextDocument()
    document.setHtml(text)
    return document.toPlainText()


def swallowed_markup(window: QWidget) -> list[str]:
    """Every label, button and tooltip in `window` (and the windows it owns) whose model or user text a reader
    does not see because it was read as markup."""
    problems = []
    texts = []
    for label in window.findChildren(QLabel):
        texts.append((label, label.text(), label.textFormat()))
    for button in window.findChildren(QAbstractButton):
        texts.append((button, button.text(), Qt.TextFormat.PlainText))
    for widget in [window, *window.findChildren(QWidget)]:
        if widget.toolTip():
            texts.append((widget, widget.toolTip(), Qt.TextFormat.AutoText))  # a tooltip guesses, as AutoText does
    for view in window.findChildren(QAbstractItemView):  # the token table's cells, the predictions, the lens
        model = view.model()
        if model is None:
            continue
        for row in range(min(model.rowCount(), 20)):
            for column in range(min(model.columnCount(), 80)):
                tip = model.data(model.index(row, column), Qt.ItemDataRole.ToolTipRole)
                if isinstance(tip, str) and tip:
                    texts.append((view, tip, Qt.TextFormat.AutoText))
    for widget, text, text_format in texts:
        if not shown_as_rich_text(text, text_format):
            continue
        for markup in MODEL_MARKUP:
            if markup in text:  # a tag written into rich text raw: the reader never sees it
                problems.append(f"{widget.objectName() or type(widget).__name__}: {text[:160]!r} "
                                f"reads {as_read(text, text_format)[:160]!r}")
                break
    return problems


@pytest.fixture(scope="module")
def roberta_folder(tmp_path_factory):
    import torch

    from tests.bertcore.test_tokenizer_families import save_roberta, tiny_transformers_model

    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("roberta") / "tiny-<i>roberta"
    save_roberta(folder, transformers)
    torch.manual_seed(0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    tiny_transformers_model("roberta", tokenizer, transformers).save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_robertas_tokens_and_a_folder_named_in_markup_read_as_written_everywhere(qtbot, settings, roberta_folder):
    window = open_window(qtbot, settings, size=(1400, 900))
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.load_checkpoint(str(roberta_folder))
    tab = window.inspect_tab
    long_a = " ".join(["the <i>cat</i> sat on the mat and purred"] * 12)  # far past the model's 64 positions
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.inspect_pair(long_a, "it <i>purred</i> and slept")
    warning = window.findChild(QLabel, "warningLabel")
    assert warning.isVisible() and "<s> A </s></s> B </s>" in as_read(warning.text(), warning.textFormat())
    tab.mask_like_bert(seed=3)
    qtbot.waitUntil(lambda: tab.state.inspection is not None and tab.state.inspection.masking is tab.state.masking,
                    timeout=WAIT_MS)
    inspection = tab.state.inspection
    assert inspection.predictions, "the masking picked no position to predict"
    masked = inspection.predictions[0].position
    window.explain_output(("mlm", masked, inspection.predictions[0].top_ids[0]))
    qtbot.waitUntil(lambda: not window.explain_tab.busy, timeout=60_000)
    explained = window.findChild(QLabel, "explainTarget")
    assert "Explaining" in as_read(explained.text(), explained.textFormat())
    window.show_about().close()

    assert swallowed_markup(window) == []


def test_the_projection_legend_keeps_its_coloured_dots_and_shows_label_names_as_written(qtbot):
    """A legend that is rich text on purpose (coloured dots) escapes the task's label names it quotes."""
    from types import SimpleNamespace

    import numpy as np

    from explorer.embeddings._qt.projection_pane import ProjectionPane

    pane = ProjectionPane()
    qtbot.addWidget(pane)
    sample = SimpleNamespace(labels=np.array(["<i>glad", "sad", "<i>glad"]), segment=np.array([0, 1, 0]),
                             kind=np.array(["word", "word", "word"]))
    projection = SimpleNamespace(sample=sample, points=np.zeros((3, 2), np.float32),
                                 explained_variance_ratio=np.array([0.5, 0.2]))
    pane.set_colour_by("label")
    pane.show_projection(projection, [])
    legend = pane.legend_label
    read = as_read(legend.text(), legend.textFormat())
    assert "● <i>glad" in read and "● sad" in read and "span" not in read, read
