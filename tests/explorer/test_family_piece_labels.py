"""Other families' pieces as the Inspect tab's views show them: attention axes, the predictions table and the logit
lens label RoBERTa's "Ġcat" as "␣cat" (the raw piece stays in the hover)."""

from __future__ import annotations

import numpy as np

from explorer.inspector._qt.token_heatmap import TokenHeatmap

TOKENS = ["<s>", "The", "Ġcat", "Ġsat", "</s>"]


def test_heatmap_axes_show_readable_pieces_and_the_hover_keeps_the_raw_one(qtbot):
    heatmap = TokenHeatmap("head")
    qtbot.addWidget(heatmap)
    heatmap.set_matrix(np.full((5, 5), 0.2, np.float32), TOKENS, np.arange(5), (0.0, 1.0), piece_style="byte_level")
    assert heatmap.left_axis.labels == ["<s>", "The", "\u2423cat", "\u2423sat", "</s>"]
    assert heatmap.bottom_axis.labels == heatmap.left_axis.labels
    assert "Ġcat" in heatmap.describe_cell(2, 3)


def test_predictions_cells_show_readable_pieces_and_tooltips_the_raw_ones():
    from types import SimpleNamespace

    from PySide6.QtCore import Qt

    from explorer.inspector._qt.predictions_table import PredictionsModel

    prediction = SimpleNamespace(position=2, decision=0, input_token="<mask>", original_token="Ġcat",
                                 top_tokens=["Ġdog", "Ġcat"], top_probabilities=np.array([0.6, 0.3]),
                                 top_ids=np.array([7, 8]))
    model = PredictionsModel()
    model.set_predictions([prediction], "byte_level")
    assert model.data(model.index(0, 2)) == "\u2423cat"
    assert model.data(model.index(0, 3)).startswith("\u2423dog")
    assert "'Ġcat'" in model.data(model.index(0, 3), Qt.ItemDataRole.ToolTipRole)


def test_the_logit_lens_labels_its_columns_and_top_tokens_readably(qtbot):
    from bertcore.analysis.lens import LogitLens
    from explorer.inspector._qt.logit_lens_view import LogitLensView

    top_tokens = np.array([[["Ġdog", "Ġcat"]], [["Ġcat", "Ġdog"]]])
    lens = LogitLens(positions=np.array([2]), original_ids=np.array([8]), original_tokens=["Ġcat"],
                     input_tokens=["<mask>"], layer_names=["embeddings", "layer 1"], top_ids=np.array([[[7, 8]]] * 2),
                     top_tokens=top_tokens, top_probabilities=np.full((2, 1, 2), 0.4, np.float32),
                     original_probability=np.array([[0.4], [0.4]], np.float32), original_rank=np.array([[2], [1]]),
                     piece_style="byte_level")
    view = LogitLensView()
    qtbot.addWidget(view)
    view.show_lens(lens)
    view.select_column(0)
    assert view.bottom_axis.labels == ["\u2423cat"]
    assert view.top_table.item(0, 0).text().startswith("\u2423dog")
    assert "Ġdog" in view.top_table.item(0, 0).toolTip()


def test_the_position_row_shows_the_models_own_positions(qtbot):
    from bertcore.models.families import model_position_ids
    from bertcore.models.roberta import RobertaConfig, RobertaForMaskedLM
    from bertcore.tokenization.encoding import Encoding
    from explorer.inspector._qt.token_table import TokenTable
    from explorer.inspector._qt.token_table_model import ROWS

    roberta = RobertaForMaskedLM(RobertaConfig(vocab_size=40, hidden_size=24, num_hidden_layers=1,
                                               num_attention_heads=3, intermediate_size=40, pad_token_id=1))
    assert model_position_ids(roberta, [0, 7, 8, 2, 1]) == [2, 3, 4, 5, 1]  # pad_token_id + 1 on; padding at 1
    encoding = Encoding(TOKENS, [0, 7, 8, 9, 2], [0] * 5, list(range(5)), [1] * 5, [1, 0, 0, 0, 1],
                        [None, 0, 0, 0, None], [(0, 0)] * 5, None, [], piece_style="byte_level")
    table = TokenTable()
    qtbot.addWidget(table)
    table.set_input(encoding, None, has_segments=False, position_ids=model_position_ids(roberta, encoding.input_ids))
    row = ROWS.index("position id")
    model = table.table_model
    assert [model.item(row, column).text() for column in range(5)] == ["2", "3", "4", "5", "6"]
