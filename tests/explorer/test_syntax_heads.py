"""The Head lab's syntax heads: the grid, the table and the baselines equal bertcore.syntactic_attention's numbers on
the same sentences (its own computation, a batch at a time), both directions; Cancel; a treebank that cannot be read
said in words; a new model forgets the old one's scores."""

from __future__ import annotations

import numpy as np
import pytest

from bertcore.analysis.syntax import syntactic_attention
from bertcore.analysis.treebank import shipped_treebank
from explorer.head_lab._qt.syntax_heads_view import TABLE_COLUMNS, SyntaxHeadsView
from explorer.head_lab.syntax_heads import SyntaxSettings, syntax_heads_run
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS, make_tiny_model, shown

WAIT_MS = 60_000
SENTENCES = 40


@pytest.fixture
def view(qtbot):
    view = SyntaxHeadsView(torch_threads=1)
    qtbot.addWidget(view)  # not shown: a shown view starts scoring by itself
    yield view
    assert view.shutdown()


def scored(qtbot, view, settings):
    with qtbot.waitSignal(view.scored, timeout=WAIT_MS) as result:
        assert view.start(settings)
    return result.args[0]


@pytest.mark.slow
def test_the_run_is_bertcores_syntactic_attention_a_batch_at_a_time(tokenizer):
    model = make_tiny_model(tokenizer, seed=4)
    sentences = shipped_treebank("dev")[:SENTENCES]
    progress = list(syntax_heads_run(model, tokenizer, SyntaxSettings(max_sentences=SENTENCES)))
    assert progress[-1].result is not None and all(item.result is None for item in progress[:-1])
    assert [item.done for item in progress] == [0, 0, *range(1, progress[-1].total + 1)]  # reading, then batches
    ours, theirs = progress[-1].result.syntax, syntactic_attention(model, tokenizer, sentences)
    assert np.array_equal(ours.uas_by_direction, theirs.uas_by_direction)
    assert np.array_equal(ours.relation_accuracy, theirs.relation_accuracy)
    assert np.array_equal(ours.offset_accuracy, theirs.offset_accuracy)
    assert ours.num_words == theirs.num_words and ours.relations == theirs.relations
    assert not model.training  # the model is as it was found


@pytest.mark.slow
def test_the_view_shows_each_heads_uas_in_either_direction_and_the_best_head_of_each_relation(qtbot, view, tokenizer):
    model = make_tiny_model(tokenizer, seed=4)
    view.set_model(model, tokenizer)
    result = scored(qtbot, view, SyntaxSettings(max_sentences=SENTENCES))
    reference = syntactic_attention(model, tokenizer, shipped_treebank("dev")[:SENTENCES])
    assert view.grid.values.shape == (TINY_LAYERS, TINY_HEADS)
    assert np.array_equal(view.grid.values, reference.uas)
    for index in range(view.direction_combo.count()):
        view.direction_combo.setCurrentIndex(index)
        direction = view.direction_combo.currentData()
        expected = reference.uas if direction == "better" else reference.uas_by_direction[direction]
        assert np.array_equal(view.grid.values, expected)
        layer, head = np.unravel_index(int(expected.argmax()), expected.shape)
        assert view.grid.numbers.text(layer, head) == f"{expected[layer, head]:.2f}"
    # the table: "all" first, then the relations with 20+ words, the most frequent first
    rows = [[view.table.item(row, column).text() for column in range(len(TABLE_COLUMNS))]
            for row in range(view.table.rowCount())]
    best = reference.best_head()
    assert rows[0] == ["all", f"{best.count:,}", f"L{best.layer + 1}·H{best.head + 1}",
                       ("dependent → head", "head → dependent")[best.direction], f"{best.accuracy:.3f}",
                       f"{best.offset:+d}", f"{best.offset_accuracy:.3f}"]
    relations = [head for head in reference.best_heads(20)]
    assert [row[0] for row in rows[1:]] == [head.relation for head in relations]
    for row, head in zip(rows[1:], relations, strict=True):
        assert row[4] == f"{head.accuracy:.3f}" and row[6] == f"{head.offset_accuracy:.3f}"
    assert f"the next word (+1) {reference.offset_accuracy[3]:.3f}" in view.baselines_label.text()
    assert f"{reference.num_words:,} words scored" in view.status_label.text()
    assert result.sentences_read == SENTENCES


def test_cancel_stops_the_run_and_says_so(qtbot, view, tokenizer):
    view.set_model(make_tiny_model(tokenizer), tokenizer)
    assert view.start(SyntaxSettings(max_sentences=1000))
    worker = view.worker
    view.cancel()
    assert "Cancelled" in view.status_label.text() and not view.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: not worker.is_running, timeout=WAIT_MS)
    assert view.result is None


@pytest.mark.parametrize("text, expected", [("/no/such/treebank.conllu", "does not exist"),
                                            ("", "No treebank file is given")])
def test_a_treebank_that_cannot_be_read_is_said_in_words(qtbot, view, tokenizer, tmp_path, text, expected):
    view.set_model(make_tiny_model(tokenizer), tokenizer)
    view.treebank_combo.setCurrentIndex(1)
    view.treebank_edit.setText(text)
    if text:
        assert view.start()
        qtbot.waitUntil(lambda: "Cannot score the heads" in view.status_label.text(), timeout=WAIT_MS)
        assert text in view.status_label.text()
    else:
        assert not view.start()
        assert "Cannot score" in view.status_label.text()
    assert expected in view.status_label.text()
    assert view.run_button.isEnabled()


def test_a_malformed_treebank_names_its_line(qtbot, view, tokenizer, tmp_path):
    broken = tmp_path / "broken.conllu"
    broken.write_text("1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcat\n\n", encoding="utf-8")
    view.set_model(make_tiny_model(tokenizer), tokenizer)
    view.treebank_combo.setCurrentIndex(1)
    view.treebank_edit.setText(str(broken))
    assert view.start()
    qtbot.waitUntil(lambda: "Cannot score the heads" in view.status_label.text(), timeout=WAIT_MS)
    assert "line 2" in view.status_label.text()


@pytest.mark.slow
def test_showing_the_view_scores_the_model_once_and_a_new_model_forgets_it(qtbot, tokenizer):
    view = SyntaxHeadsView(torch_threads=1)
    view.sentences_spin.setValue(SENTENCES)
    view.set_model(make_tiny_model(tokenizer, seed=1), tokenizer)
    with qtbot.waitSignal(view.scored, timeout=WAIT_MS):
        shown(qtbot, view, (1100, 700))  # the first look computes
    first = view.grid.values.copy()
    view.hide()
    view.set_model(make_tiny_model(tokenizer, seed=2), tokenizer)
    assert view.result is None and view.grid.values.size == 0 and view.table.rowCount() == 0
    with qtbot.waitSignal(view.scored, timeout=WAIT_MS):
        view.show()
    assert not np.array_equal(first, view.grid.values)
    assert view.shutdown()


@pytest.mark.slow
def test_the_head_lab_has_the_syntax_page(window):
    from PySide6.QtWidgets import QWidget

    lab = window.findChild(QWidget, "headLabTab")
    assert lab.findChild(QWidget, "syntaxHeads") is lab.syntax_heads
    assert lab.syntax_heads.model is lab.controller.state.model is not None
