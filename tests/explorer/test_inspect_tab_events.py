"""The Inspect tab redraws from ExplorerState's announcements: what the state says is what every view shows."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtWidgets import QLabel, QSpinBox

from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS, make_tiny_model

WAIT_MS = 10_000


def masked_snapshot(tokenizer):
    from bertcore.analysis.inspection import inspect_encoding
    from bertcore.data.masking import mask_exactly

    encoding = tokenizer.encode("to be or not", "that is")
    return inspect_encoding(make_tiny_model(tokenizer, seed=5), tokenizer, encoding,
                            masking=mask_exactly(encoding, tokenizer, [2, 3]))


def test_the_masking_note_describes_the_snapshot_shown_not_the_live_input(qtbot, window, tokenizer):
    note = window.findChild(QLabel, "maskingLabel")
    assert note.text().startswith("No masking")  # the live input is not masked
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.show_external_inspection(masked_snapshot(tokenizer), "training step 1200")
    assert note.text().startswith("Masking (snapshot"), note.text()
    assert "2 of 6 tokens" in note.text()
    assert "[CLS], [SEP] and padding are never masked" in note.toolTip()  # what the count leaves out
    window.inspect_tab.input_form.sentence_a_edit.setText("back to the live model")
    assert note.text().startswith("No masking: click a token"), note.text()


@pytest.mark.slow
def test_the_state_is_the_one_place_views_follow(qtbot, window):
    """Masking and head switches written to the state reach the views with no call to the tab."""
    tab = window.inspect_tab
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as shown:
        tab.state.mask_like_bert(4)
    assert shown.args[0].masking is not None and shown.args[0].masking.seed == 4
    assert window.findChild(QLabel, "maskingLabel").text().startswith("Masking (BERT recipe, seed 4)")
    assert window.findChild(QSpinBox, "seedSpin").value() == 4
    mask = np.ones((TINY_LAYERS, TINY_HEADS), np.float32)
    mask[tab.attention_panel.layer, 1] = 0
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as shown:
        tab.state.set_head_mask(mask)
    np.testing.assert_array_equal(tab.attention_panel.head_mask(), mask)
    assert not tab.attention_panel.head_grid.checkboxes[1].isChecked()
    assert shown.args[0].head_mask[tab.attention_panel.layer, 1] == 0


def test_a_head_switched_in_the_panel_is_written_once_to_the_state(qtbot, window):
    tab = window.inspect_tab
    heard = []
    tab.state.changed.connect(lambda state, what: heard.append(what))
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        tab.attention_panel.head_grid.checkboxes[0].click()
    assert [what.value for what in heard] == ["head_mask", "inspection"]
    assert tab.state.head_mask[tab.attention_panel.layer, 0] == 0


def test_the_seed_spin_writes_the_seed_the_next_masking_uses(qtbot, window):
    tab = window.inspect_tab
    window.findChild(QSpinBox, "seedSpin").setValue(9)
    assert tab.state.seed == 9 and tab.state.masking is None  # nothing masked yet: nothing redrawn
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as shown:
        tab.mask_like_bert()
    assert shown.args[0].masking.seed == 9
