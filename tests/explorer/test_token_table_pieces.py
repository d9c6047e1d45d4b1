"""The token table on other families' tokenizers: readable pieces (raw on hover), the layout's special tokens
coloured by their place whatever they are called, the model's own mask token, and "—" for segments where the
model has no token types."""

from __future__ import annotations

import pytest

from bertcore.data.masking import mask_exactly
from bertcore.tokenization.pretrained import tokenizer_from_folder
from explorer.inspector._qt.token_table import TokenTable
from explorer.inspector._qt.token_table_model import NO_SEGMENTS, TOKEN_ROW
from tests.bertcore.test_tokenizer_families import save_albert, save_roberta

SEGMENT_ROW, MASKING_ROW = 2, 5


@pytest.fixture(scope="module")
def roberta_tokenizer(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("roberta")
    save_roberta(folder, transformers)
    return tokenizer_from_folder(folder)


@pytest.fixture(scope="module")
def albert_tokenizer(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("albert")
    save_albert(folder, transformers)
    return tokenizer_from_folder(folder)


def row(table: TokenTable, number: int) -> list[str]:
    model = table.table_model
    return [model.cell_text(number, column) for column in range(model.columnCount())]


@pytest.mark.slow
def test_byte_level_pieces_are_shown_readable_and_segments_as_a_dash(qtbot, roberta_tokenizer):
    table = TokenTable()
    qtbot.addWidget(table)
    encoding = roberta_tokenizer.encode("The café is open", "Yes it is", pad_to=24)
    masking = mask_exactly(encoding, roberta_tokenizer, [2])
    table.set_input(encoding, masking, has_segments=False)

    tokens = row(table, TOKEN_ROW)
    assert tokens[0] == "<s>" and tokens[-1] == "<pad>"
    assert "Ġ" not in "".join(tokens) and any(token.startswith("␣") for token in tokens)
    # this tiny vocabulary splits é into its two bytes ("Ã", "©"): each is shown as the byte it is
    assert "<0xC3><0xA9>" in "".join(tokens) and "Ã" not in "".join(tokens)
    assert row(table, SEGMENT_ROW) == [NO_SEGMENTS] * len(encoding)
    assert row(table, MASKING_ROW)[2] == "<mask>"
    model = table.table_model
    kinds = [model.kind(column) for column in range(len(encoding))]
    separators = [column for column, sequence in enumerate(encoding.sequence_ids[:encoding.num_tokens])
                  if sequence is None and column > 0]
    assert kinds[0] == "[CLS]" and {kinds[column] for column in separators} == {"[SEP]"} and len(separators) == 3
    assert kinds[-1] == "[PAD]" and set(kinds[1:separators[0]]) == {"A"}
    spaced = next(column for column, token in enumerate(encoding.tokens) if token.startswith("Ġ"))
    tooltip = model.tooltip(spaced)
    assert repr(encoding.tokens[spaced]) in tooltip and "follows a space" in tooltip
    assert "no token types" in tooltip


@pytest.mark.slow
def test_sentencepiece_pieces_and_segments_of_a_model_that_has_them(qtbot, albert_tokenizer):
    table = TokenTable()
    qtbot.addWidget(table)
    encoding = albert_tokenizer.encode("the cat ☃ sat", "on the mat")
    table.set_input(encoding, None)

    tokens = row(table, TOKEN_ROW)
    assert tokens[0] == "[CLS]" and "▁" not in "".join(tokens) and tokens[1].startswith("␣")
    assert row(table, SEGMENT_ROW) == [str(segment) for segment in encoding.segment_ids]
    assert "1" in row(table, SEGMENT_ROW)
    unknown = encoding.tokens.index("<unk>")
    assert table.table_model.kind(unknown) == "[UNK]"


@pytest.mark.slow
def test_a_roberta_folder_opens_in_the_window_with_its_own_tokenizer(qtbot, settings, tmp_path):
    """The whole way: a transformers RoBERTa folder (byte-level BPE tokenizer.json) opened from disk, its pair laid
    out as <s> A </s></s> B </s>, no segments, and the inspection shown."""
    import torch

    from explorer.window._qt.main_window import MainWindow
    from tests.bertcore.test_tokenizer_families import save_roberta, tiny_transformers_model
    from tests.explorer.test_window import WAIT_MS, table_rows

    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "tiny-roberta"
    save_roberta(folder, transformers)
    torch.manual_seed(0)
    reference_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    tiny_transformers_model("roberta", reference_tokenizer, transformers).save_pretrained(folder)
    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.load_checkpoint(str(folder))
    state = window.inspect_tab.state
    with qtbot.waitSignal(window.inspectionShown, timeout=WAIT_MS):
        state.set_pair("The cat sat on the mat.", "It purred.")
    qtbot.waitUntil(lambda: state.inspection is not None and state.inspection.encoding is state.encoding,
                    timeout=WAIT_MS)
    rows = table_rows(window)
    assert rows[TOKEN_ROW][0] == "<s>" and rows[TOKEN_ROW].count("</s>") == 3
    assert set(rows[SEGMENT_ROW]) == {NO_SEGMENTS}
    assert any(token.startswith("␣") for token in rows[TOKEN_ROW])


def test_the_legend_names_each_familys_special_tokens_as_plain_text(qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel

    from explorer.inspector._qt.token_table import TokenLegend

    legend = TokenLegend()
    qtbot.addWidget(legend)
    labels = {label.text(): label for label in legend.findChildren(QLabel)}
    assert {"first: [CLS], <s>", "separator: [SEP], </s>", "→ mask token"} <= set(labels)
    assert labels["first: [CLS], <s>"].textFormat() == Qt.TextFormat.PlainText  # <s> shown, not struck through
