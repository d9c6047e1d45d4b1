"""What a new input costs the token table: Qt asks its model for every role of every visible cell on each
paint, so the table must be painted once per input, not once for the new cells and again for their widths."""

from __future__ import annotations

from PySide6.QtCore import QEvent

from bertcore.data.masking import mask_exactly
from explorer.inspector._qt.token_table import TokenTable
from tests.explorer.conftest import shown
from tests.explorer.event_counts import EventCount


def test_a_new_input_paints_the_table_once(qtbot, tokenizer):
    # narrower than the input: the scroll range must follow the new widths
    table = shown(qtbot, TokenTable(), (300, 260))
    encoding = tokenizer.encode("the cat sat on the mat", "a dog barked")
    table.set_input(encoding, mask_exactly(encoding, tokenizer, [2]))
    # the first input sets every width from the default; from then on only a changed token's column changes
    qtbot.wait(50)
    count = EventCount(QEvent.Type.Paint)
    table.viewport().installEventFilter(count)

    edited = tokenizer.encode("the government sat on the mat", "a dog barked")  # one token, wider
    assert len(edited) == len(encoding)
    table.set_input(edited, mask_exactly(edited, tokenizer, [2]))
    qtbot.wait(50)

    assert count.count == 1
    header = table.horizontalHeader()
    model = table.table_model
    widths = [header.sectionSize(column) for column in range(model.columnCount())]
    fresh = TokenTable()
    qtbot.addWidget(fresh)
    fresh.set_input(edited, model.masking)
    assert widths == [fresh.horizontalHeader().sectionSize(column) for column in range(model.columnCount())]
    assert widths[2] > 60  # "government" got its width
    assert table.horizontalScrollBar().maximum() == header.length() - table.viewport().width() > 0
