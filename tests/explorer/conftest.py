"""Shared fixtures for the explorer tests: a tiny model, the default vocabulary, isolated QSettings.

Sizes are small and distinct (hidden 32, 3 layers, 2 heads, FFN 48) so that every test runs in well under
a second on two CPU cores and a swapped axis fails loudly.
"""

from __future__ import annotations

import os

import pytest
import torch

from bertcore.files.resources import default_vocab_path
from bertcore.models.bert import BertForPreTraining
from bertcore.tokenization.wordpiece import BertTokenizer
from tests.tiny_configs import explorer_bert

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

TINY_LAYERS, TINY_HEADS = 3, 2


@pytest.fixture(autouse=True)
def isolated_qsettings(tmp_path_factory, monkeypatch):
    """Point every QSettings scope and format at a temporary folder: tests never touch the user's settings."""
    from PySide6.QtCore import QSettings

    folder = tmp_path_factory.mktemp("qsettings")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    for settings_format in (QSettings.NativeFormat, QSettings.IniFormat):
        for scope in (QSettings.UserScope, QSettings.SystemScope):
            QSettings.setPath(settings_format, scope, str(folder))
    return folder


@pytest.fixture
def settings(tmp_path):
    """An explicit ini-file QSettings for a window under test."""
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "bert-explorer.ini"), QSettings.IniFormat)


@pytest.fixture(scope="session")
def tokenizer() -> BertTokenizer:
    return BertTokenizer.from_vocab_file(default_vocab_path())


def make_tiny_model(tokenizer: BertTokenizer, seed: int = 0) -> BertForPreTraining:
    config = explorer_bert(tokenizer.vocab_size, num_hidden_layers=TINY_LAYERS, num_attention_heads=TINY_HEADS)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return BertForPreTraining(config).eval()


@pytest.fixture
def tiny_model(tokenizer) -> BertForPreTraining:
    return make_tiny_model(tokenizer)


@pytest.fixture
def tiny_checkpoint(tmp_path_factory, tokenizer):
    """A saved tiny checkpoint folder (standard BERT layout)."""
    from bertcore.models.checkpoint import save_pretrained

    folder = tmp_path_factory.mktemp("checkpoint") / "tiny-bert"
    save_pretrained(make_tiny_model(tokenizer, seed=1), tokenizer, folder)
    return folder


WINDOW_WAIT_MS = 10_000


def shown(qtbot, widget, size: tuple[int, int] | None = None):
    """`widget`, closed with the test, resized to `size` (when given), shown and on screen; returned."""
    qtbot.addWidget(widget)
    if size is not None:
        widget.resize(*size)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def open_window(qtbot, settings, size: tuple[int, int] = (1300, 850)):
    """A shown MainWindow with no model yet, at a size where every panel has room, closed with the test."""
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings, throttle_ms=30)
    qtbot.addWidget(window)
    window.resize(*size)
    window.show()
    return window


def show_model(qtbot, window, model, tokenizer, name: str = "tiny test (untrained)") -> None:
    """Hand the window a model and wait until its first inspection is drawn."""
    with qtbot.waitSignal(window.inspectionShown, timeout=WINDOW_WAIT_MS):
        window.set_model(model, tokenizer, name)


@pytest.fixture
def window(qtbot, settings, tiny_model, tokenizer):
    """The shown window with the tiny model inspected; a module that needs more overrides it and asks for this one."""
    window = open_window(qtbot, settings)
    show_model(qtbot, window, tiny_model, tokenizer)
    return window


def paired_state(model, tokenizer, sentence_a: str, sentence_b: str):
    """An ExplorerState holding the untrained tiny model and a sentence pair, with its first inspection."""
    from explorer.inspector.model_info import describe_model
    from explorer.inspector.state import ExplorerState

    state = ExplorerState()
    state.set_model(model, tokenizer, describe_model(model, "tiny", untrained=True))
    state.set_pair(sentence_a, sentence_b)
    return state
