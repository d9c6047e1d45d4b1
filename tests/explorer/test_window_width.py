"""The window keeps the width it is given while what it shows grows (it widened itself from 1410 to 1527 px as a run
went on, and kept that width at the next start), the status bar's passing message stops short of the permanent
labels, and ModernBERT's layer label is shown whole ("· global", not "· globa")."""

from __future__ import annotations

import re

import pytest
from PySide6.QtWidgets import QApplication, QComboBox, QLabel, QPushButton

from tests.explorer.conftest import open_window, show_model

WIDTH, HEIGHT = 1400, 900  # the window's default size
LONG = ("a sentence as long as any status a run, a model or an explanation may write: " * 6).strip()
LONG_NAME = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2-finetuned-on-a-long-dataset-name"
NUMBER = re.compile(r"[-+0-9.,:%\s]+")  # a spin's or a slider's value beside it: never long


@pytest.fixture
def window(qtbot, settings, tiny_model, tokenizer):
    from explorer.finetune._qt.finetune_panel import FinetunePanel
    from explorer.train._qt.training_panel import TrainingPanel

    window = open_window(qtbot, settings, size=(WIDTH, HEIGHT))
    show_model(qtbot, window, tiny_model, tokenizer, LONG_NAME)
    window.add_tab(TrainingPanel(), "Train")
    window.add_tab(FinetunePanel(), "Fine-tune")
    yield window
    window.close()


def may_grow(label: QLabel) -> bool:
    """A label whose text may run long: named (what a view writes into), one line, and not a number ("0.600")."""
    return bool(label.objectName()) and not label.wordWrap() and not NUMBER.fullmatch(label.text())


def needed(window) -> int:
    """The least width the window's layout asks for now, once the layouts have taken in every change."""
    QApplication.sendPostedEvents()  # the layout requests a new text posted
    window.layout().activate()
    return max(window.minimumSizeHint().width(), window.minimumSize().width())


def widest_needed(window, qtbot) -> int:
    """The least width the window's layout asks for with every tab shown in turn."""
    widest = 0
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        qtbot.wait(30)
        widest = max(widest, needed(window))
    return widest


@pytest.mark.slow
def test_no_text_a_view_shows_makes_the_window_wider(qtbot, window):
    assert widest_needed(window, qtbot) <= WIDTH
    pushing = []
    for label in window.findChildren(QLabel):
        if not may_grow(label):
            continue
        before = label.text()
        label.setText(LONG)
        pages = [window.tabs.widget(index) for index in range(window.tabs.count())]
        page = next((page for page in pages if page.isAncestorOf(label)), None)
        if page is not None:
            window.tabs.setCurrentWidget(page)
        qtbot.wait(10)
        width = needed(window)
        if width > WIDTH:
            pushing.append(f"{label.objectName()}: {width} px")
        label.setText(before)
        qtbot.wait(10)
    assert pushing == [], "\n".join(pushing)
    window.statusBar().showMessage(LONG, 0)
    qtbot.wait(30)
    assert window.width() == WIDTH


@pytest.mark.slow
def test_the_width_kept_for_the_next_start_is_the_one_the_user_gave(qtbot, window):
    """The window saves its geometry as it closes: after a long name, long statuses and every tab shown, that is
    still the width it was given."""
    from explorer.window._qt.main_window import GEOMETRY_KEY

    window.show_status(LONG, 0)
    for label in window.findChildren(QLabel):
        if may_grow(label):
            label.setText(LONG)
    widest_needed(window, qtbot)
    widths = []
    window.closing.connect(lambda: widths.append(window.width()))
    window.close()
    assert widths == [WIDTH] and window.settings.value(GEOMETRY_KEY) is not None


@pytest.mark.slow
def test_the_passing_message_stops_short_of_the_permanent_labels(qtbot, window):
    window.show_status(f"Loaded {LONG_NAME} · 22.7M parameters · 12 layers × 12 heads · cpu · no MLM or NSP head", 0)
    qtbot.wait(30)
    bar = window.statusBar()
    shown = bar.currentMessage()
    room = window.timing_label.x() - 8  # where the first permanent label begins, less the message's margins
    assert bar.fontMetrics().horizontalAdvance(shown) <= room, (shown, room)
    assert shown.endswith("…") and LONG_NAME[:20] in shown
    assert window.model_label.text().startswith(LONG_NAME)  # the whole name, shown as far as it fits
    assert window.model_label.geometry().right() <= bar.width()


def test_a_modernbert_layer_label_is_shown_whole(qtbot):
    from explorer.inspector._qt.attention_toolbar import AttentionToolbar
    from explorer.inspector.family_display import LayerKind
    from tests.explorer.conftest import shown

    toolbar = AttentionToolbar()
    toolbar.add_tool(QPushButton("Predictions"))  # what the Inspect tab and the head lab add, as in the window
    modes = QComboBox()
    modes.addItem("Heads: importance")
    toolbar.add_tool(modes)
    shown(qtbot, toolbar, (toolbar.minimumSizeHint().width(), 40))  # as narrow as the panel beside the predictions
    for kind in (LayerKind(False, "G", "global", "every token sees every token", "#7b3294"),
                 LayerKind(True, "L", "local ±64", "each token sees 64 to each side", "#008837")):
        toolbar.show_layer(21, 22, kind)
        qtbot.wait(10)
        label = toolbar.layer_label
        needed = label.fontMetrics().horizontalAdvance(label.text())
        assert label.width() >= needed, (label.text(), label.width(), needed)
