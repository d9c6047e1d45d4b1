"""The model line says when a checkpoint's embedding table has rows its tokenizer never uses (issue 34): bertcore
notes it on the tokenizer it loads (vocabulary_note), the window shows it after the model's other facts."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLabel

import bertcore
from explorer.window.startup import load_checkpoint
from tests.bertcore.test_explicit_vocabularies import write_bert

NOTE = "100 tokens for 103 embedding rows (3 unused)"


@pytest.fixture
def padded_folder(tmp_path):
    """A BERT of 103 rows whose tokenizer.json lists 100 tokens (as transformers 5 saves one): it opens."""
    tokenizer = write_bert(tmp_path / "padded", 103)
    (tmp_path / "padded" / "vocab.txt").unlink()
    tokenizer._tokenizer.save(str(tmp_path / "padded" / "tokenizer.json"))
    return tmp_path / "padded"


def test_a_checkpoint_with_unused_rows_says_so_in_its_label(padded_folder):
    loaded = load_checkpoint(padded_folder)
    assert loaded.info.vocabulary_note == NOTE
    assert loaded.info.label.endswith(f" · {NOTE}")


def test_a_checkpoint_whose_sizes_agree_says_nothing_of_them(tmp_path):
    write_bert(tmp_path / "exact", 100)
    loaded = load_checkpoint(tmp_path / "exact")
    assert loaded.info.vocabulary_note is None and "embedding rows" not in loaded.info.label


@pytest.mark.slow
def test_the_window_shows_the_note_in_its_model_line(qtbot, window, padded_folder):
    model, tokenizer = bertcore.load_pretrained(padded_folder)
    with qtbot.waitSignal(window.inspectionShown, timeout=10_000):
        window.set_model(model, tokenizer, "padded")
    label = window.findChild(QLabel, "modelLabel")
    assert label.text().startswith("padded · ") and NOTE in label.text()
    assert NOTE in window.windowTitle()
