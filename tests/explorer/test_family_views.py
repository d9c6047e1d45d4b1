"""The family views of the Inspect tab, driven through qtbot (offscreen): ALBERT's sentence order where BERT shows
NSP, ELECTRA's "replaced?" row that lights up the tokens the masking replaced, and ModernBERT's global and local
layers named in the layer stepper, the head grid and the all-layers view."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QProgressBar

from bertcore.analysis.inspection import inspect
from bertcore.data.masking import MaskDecision, mask_like_bert
from bertcore.models.albert import AlbertConfig, AlbertForPreTraining
from bertcore.models.modernbert import ModernBertConfig, ModernBertForMaskedLM
from explorer.inspector._qt.attention_panel import AttentionPanel
from explorer.inspector._qt.token_table import TokenTable
from explorer.inspector._qt.token_table_model import TOKEN_ROW
from explorer.inspector.family_display import REPLACED_ROW_NAME, layer_kinds
from explorer.inspector.task_display import TagCell
from explorer.window._qt.main_window import MainWindow
from tests.bertcore.test_family_inspection import SEEN, UNSEEN, trained_discriminator, word_tokenizer
from tests.explorer.conftest import open_window

WAIT_MS = 30_000  # a shared two-core machine under load inspects slowly
LONG_TEXT = " ".join(SEEN * 3)


@pytest.fixture
def window(qtbot, settings) -> MainWindow:
    return open_window(qtbot, settings)


@pytest.mark.slow
def test_albert_shows_sentence_order_where_bert_shows_nsp(qtbot, window, tokenizer):
    torch.manual_seed(0)
    albert = AlbertForPreTraining(AlbertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, embedding_size=16,
                                               num_hidden_layers=2, num_attention_heads=2, intermediate_size=48,
                                               max_position_embeddings=64)).eval()
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS) as shown:
        window.set_model(albert, tokenizer, "tiny-albert")
    inspection = shown.args[0]
    assert 1 in inspection.encoding.sequence_ids and inspection.in_order_probability is not None
    title, label = window.inspect_tab.predictions.nsp_title, window.findChild(QLabel, "nspLabel")
    bar = window.findChild(QProgressBar, "nspBar")
    assert "Sentence order (SOP)" in title.text() and "swapped" in title.toolTip()
    in_order = inspection.in_order_probability
    assert label.isVisible() and label.text() == (f"A then B, in order: {100 * in_order:.1f}% · swapped: "
                                                  f"{100 * (1 - in_order):.1f}%")
    assert bar.isVisible() and bar.isEnabled() and bar.value() == round(1000 * in_order)
    assert window.inspect_tab.state.model_info.label.endswith("MLM and sentence-order (SOP) heads")
    # the inspection of the one sentence, not one of the pair still in flight (under load the first signal to
    # arrive may be a re-inspection of the pair: CI saw it once)
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS,
                          check_params_cb=lambda shown: 1 not in shown.encoding.sequence_ids):
        window.inspect_pair("the king is dead long live the king")  # one sentence: no order to judge
    assert "needs a pair" in label.text() and not bar.isEnabled()


@pytest.mark.slow  # trains a tiny discriminator first
def test_electras_replaced_row_lights_up_the_tokens_the_masking_replaced(qtbot, window, monkeypatch):
    tokenizer = word_tokenizer()
    discriminator = trained_discriminator(tokenizer, max_position_embeddings=128)
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.set_model(discriminator, tokenizer, "tiny-electra")
    tab = window.inspect_tab
    assert "replaced?" in tab.info_label.text()
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        window.inspect_pair(LONG_TEXT)
    encoding = tab.state.encoding
    seed = next(seed for seed in range(200) if unseen_random_tokens(mask_like_bert(encoding, tokenizer, seed)))
    tab.mask_like_bert(seed)

    def masked_input_shown() -> bool:  # an inspection of the text before masking may still arrive first
        shown = tab.state.inspection
        return shown is not None and shown.masking is not None and shown.masking.seed == seed

    qtbot.waitUntil(masked_input_shown, timeout=WAIT_MS)
    inspection = tab.state.inspection
    table = tab.token_table.table_model
    row = table.rows.index(REPLACED_ROW_NAME)
    texts = [table.cell_text(row, column) for column in range(len(encoding))]
    assert texts == [f"{100 * p:.0f}%" for p in inspection.replaced_probabilities]
    masking = inspection.masking
    lit = [column for column in range(len(encoding)) if inspection.replaced_probabilities[column] > 0.5]
    found = unseen_random_tokens(masking)
    assert found and set(found) <= set(lit)  # every unseen random token lights up
    assert all(masking.decisions[column] != MaskDecision.NONE for column in lit)  # and no untouched token does
    brush = table.data(table.index(row, found[0]), role=8)  # BackgroundRole: a strong colour where it is found
    assert brush.color().green() < 150
    assert "random token" in table.data(table.index(row, found[0]), role=3)  # ToolTipRole: what the masking did
    asked = []
    monkeypatch.setattr(window.explain_tab, "explain", lambda request: asked.append(request) or True)
    view = tab.token_table
    view.scrollTo(table.index(row, found[0]))
    cell = view.visualRect(table.index(row, found[0])).center()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=cell)
    assert [request.target for request in asked] == [("rtd", found[0])]  # the Explain tab, on the masked input
    assert asked[0].masking.seed == seed and window.tabs.currentWidget() is window.explain_tab


def test_a_click_on_a_replaced_cell_asks_why_where_a_click_on_a_token_masks_it(qtbot, tokenizer):
    table = TokenTable()
    qtbot.addWidget(table)
    table.resize(600, 300)
    table.show()
    encoding = tokenizer.encode("the cat sat")
    table.set_input(encoding, None)
    table.show_tag_row(True, REPLACED_ROW_NAME)
    model = table.table_model
    row = model.rows.index(REPLACED_ROW_NAME)
    asked, clicked = [], []
    table.explainRequested.connect(asked.append)
    table.positionClicked.connect(clicked.append)

    def click(row: int, column: int) -> None:
        qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                         pos=table.visualRect(model.index(row, column)).center())

    click(row, 2)  # no probabilities yet: nothing to explain, and the cell is not a token to mask either
    assert asked == [] and clicked == [2]
    table.set_tags([TagCell(text=f"{10 * column}%", colour=None, tooltip="P(replaced)")
                    for column in range(len(encoding))])
    assert "Explain tab" in model.data(model.index(row, 2), Qt.ItemDataRole.ToolTipRole)
    click(row, 2)
    click(TOKEN_ROW, 1)
    assert asked == [("rtd", 2)] and clicked == [2, 1]
    table.setCurrentIndex(model.index(row, 3))
    qtbot.keyClick(table, Qt.Key.Key_Space)
    assert asked == [("rtd", 2), ("rtd", 3)]


def unseen_random_tokens(masking) -> list[int]:
    """The positions where the masking put a random token that the discriminator never saw in a sentence."""
    return [position for position, (decision, token) in enumerate(zip(masking.decisions, masking.masked_tokens,
                                                                       strict=True))
            if decision == MaskDecision.RANDOM and token in UNSEEN]


def modernbert_inspection(tokenizer, text: str, **sizes):
    config = ModernBertConfig(**{**dict(vocab_size=tokenizer.vocab_size, hidden_size=48, intermediate_size=40,
                                        num_hidden_layers=4, num_attention_heads=12, local_attention=8,
                                        global_attn_every_n_layers=3, max_position_embeddings=128, pad_token_id=0,
                                        bos_token_id=2, cls_token_id=2, eos_token_id=3, sep_token_id=3), **sizes})
    torch.manual_seed(0)
    return inspect(ModernBertForMaskedLM(config).eval(), tokenizer, text)


def test_modernbert_layers_are_marked_global_or_local_in_the_stepper_grid_and_overview(qtbot, tokenizer):
    inspection = modernbert_inspection(tokenizer, "the king is dead long live the king his son shall wear the "
                                                  "crown and all the lords shall bow")
    panel = AttentionPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.show()
    panel.set_inspection(inspection)
    label, kind_label = panel.toolbar.layer_label, panel.head_grid.layer_kind_label
    assert label.text() == "Layer 1 / 4 · global" and kind_label.isVisible()
    assert "Global attention" in kind_label.text() and "the global layers are 1, 4" in kind_label.text()
    assert panel.window_edges.getData()[0].size == 0  # a global layer has no window to draw
    panel.set_layer(1)
    assert label.text() == "Layer 2 / 4 · local ±4" and "Local attention" in kind_label.text()
    xs, _ = panel.window_edges.getData()
    assert xs.size > 0 and xs.max() <= len(inspection.encoding)  # the band's edges over the selected head
    assert "4 positions on each side" in kind_label.text()
    panel.tabs.setCurrentIndex(1)  # all layers: each number carries its kind
    assert [item.textItem.toPlainText() for item in panel.overview.number_items[1:5]] == ["1 G", "2 L", "3 L", "4 G"]
    assert [kind.short for kind in layer_kinds(inspection)] == ["G", "L", "L", "G"]
    # the band: a local layer's heads see nothing beyond the window
    distance = np.abs(np.subtract.outer(np.arange(len(inspection.encoding)), np.arange(len(inspection.encoding))))
    assert inspection.attentions[1][:, distance > 4].max() == 0


def test_a_bert_shows_no_layer_kinds(qtbot, tokenizer, tiny_model):
    panel = AttentionPanel()
    qtbot.addWidget(panel)
    panel.show()
    panel.set_inspection(inspect(tiny_model, tokenizer, "the king is dead"))
    assert panel.toolbar.layer_label.text() == "Layer 1 / 3" and panel.head_grid.layer_kind_label.isHidden()
    panel.tabs.setCurrentIndex(1)
    assert [item.textItem.toPlainText() for item in panel.overview.number_items[1:4]] == ["1", "2", "3"]


def test_the_window_cuts_a_robertas_input_to_its_usable_positions(tokenizer):
    from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM
    from explorer.inspector.model_info import describe_model

    config = RobertaConfig(vocab_size=tokenizer.vocab_size, hidden_size=24, num_hidden_layers=2,
                           num_attention_heads=3, intermediate_size=40, max_position_embeddings=514)
    assert describe_model(RobertaForMaskedLM(config), "roberta").max_positions == 512  # 514 less pad + 1


def test_window_edges_run_along_the_band_even_with_positions_hidden():
    from explorer.inspector.family_display import window_edges

    xs, ys = window_edges(np.arange(10), 2)
    rows = len(np.arange(10))
    first, past_last = xs[:2 * rows:2], xs[4 * rows - 2:6 * rows - 2:2]  # each row's vertical segment
    assert list(first) == [0, 0, 0, 1, 2, 3, 4, 5, 6, 7] and list(past_last) == [3, 4, 5, 6, 7, 8, 9, 10, 10, 10]
    assert list(ys[:4]) == [0, 1, 1, 2]
    hidden = window_edges(np.array([1, 2, 3, 5, 6]), 1)[0]  # [CLS] and one token hidden: columns shift
    assert list(hidden[:10:2]) == [0, 0, 1, 3, 3]  # position 5 sees 4..6: column 3 (position 4 is not shown)
