"""What changed between two checkpoints that barely differ, one of them from the Hugging Face cache: every cell
says its value (in a power of ten the colour bar names, not "0.000" under a bar of 0 … 4.65e-05), and the cached
model is named by its repo id, not by its snapshot's hash."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bertcore.models.checkpoint import save_pretrained
from explorer.common.model_names import display_name
from explorer.what_changed.head_change import checkpoint_name
from tests.explorer.conftest import make_tiny_model

TEXT_A = "the cat sat on the mat"
SNAPSHOT = "0123456789abcdef0123456789abcdef01234567"
REPO_ID = "sentence-transformers/all-MiniLM-L6-v2"


def nudged(model, scale: float):
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            weight = layer.attention.self.query.weight
            weight.add_(scale * torch.randn(weight.shape, generator=generator))
    return model


@pytest.fixture(scope="module")
def barely_different(tmp_path_factory):
    """A in a Hugging Face cache's snapshot folder, B the same model with its queries nudged by 1e-2."""
    from bertcore.files.resources import default_vocab_path
    from bertcore.tokenization.wordpiece import BertTokenizer

    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    root = tmp_path_factory.mktemp("hub")
    snapshot = root / ("models--" + REPO_ID.replace("/", "--")) / "snapshots" / SNAPSHOT
    save_pretrained(make_tiny_model(tokenizer, seed=3), tokenizer, snapshot)
    after = save_pretrained(nudged(make_tiny_model(tokenizer, seed=3), 1e-2), tokenizer, root / "after")
    return str(snapshot), str(after)


def test_a_snapshot_of_the_hugging_face_cache_is_named_by_its_repo_id(tmp_path):
    snapshot = tmp_path / "hub" / "models--google-bert--bert-base-uncased" / "snapshots" / SNAPSHOT
    snapshot.mkdir(parents=True)
    assert display_name(snapshot) == "google-bert/bert-base-uncased"
    assert checkpoint_name(str(snapshot)) == "google-bert/bert-base-uncased"
    linked = tmp_path / "elsewhere"
    linked.symlink_to(snapshot)  # a link to a snapshot names what it leads to
    assert display_name(linked) == "google-bert/bert-base-uncased"
    plain = tmp_path / "snapshots" / SNAPSHOT  # a folder called snapshots outside a cache's repo folder
    plain.mkdir(parents=True)
    assert display_name(plain) == SNAPSHOT
    assert display_name(tmp_path / "runs" / "mood" / "final") == "mood/final"


def test_the_power_of_ten_the_grid_writes_its_numbers_in():
    from explorer.what_changed.head_change import value_exponent

    assert value_exponent(0.93) == 0 and value_exponent(0.0123) == 0  # three decimals show two digits
    assert value_exponent(4.65e-05) == -5 and value_exponent(0.0099) == -3
    assert value_exponent(0.0) == 0 and value_exponent(float("nan")) == 0


@pytest.mark.slow
def test_barely_different_heads_are_written_in_a_named_power_of_ten(qtbot, barely_different):
    from explorer.what_changed._qt.change_tab import ChangeTab

    tab = ChangeTab()
    qtbot.addWidget(tab)
    tab.resize(1300, 850)
    tab.show()
    try:
        check_barely_different(qtbot, tab, barely_different)
    finally:
        tab.shutdown()


def check_barely_different(qtbot, tab, barely_different) -> None:
    tab.on_pair_changed(TEXT_A, None)
    with qtbot.waitSignal(tab.worker.done, timeout=30_000):
        tab.compare(*barely_different)
    qtbot.waitUntil(lambda: tab.result is not None, timeout=30_000)
    values = tab.grid.values
    top = float(values.max())
    assert 1e-9 < top < 1e-3, f"the nudge moved the heads by {top} bits; the test needs a small change"
    exponent = math.floor(math.log10(top))
    assert exponent < -2
    texts = np.array([[tab.grid.numbers.text(row, column) for column in range(values.shape[1])]
                      for row in range(values.shape[0])])
    assert "0.000" not in texts, texts
    shown = texts.astype(float) * 10.0 ** exponent
    assert np.allclose(shown, values, rtol=0.01, atol=0.006 * 10.0 ** exponent)  # two decimals of the scaled value
    bar_axis = tab.grid.color_bar.getAxis("left")
    assert f"10{superscript(exponent)}" in bar_axis.labelText and "bits" in bar_axis.labelText
    ticks = tab.grid.color_bar.axis  # the bar's numbers (its name is on its left axis)
    strings = ticks.tickStrings([0.0, top], ticks.scale, top / 4)
    assert float(strings[-1]) == pytest.approx(top * 10.0 ** -exponent, rel=0.05)  # the bar counts as the cells do
    assert tab.grid.describe(0, 0).endswith("bits") and "0.0000 bits" not in tab.grid.describe(0, 0)
    assert "0.0000 bits" not in tab.detail_label.text()
    assert REPO_ID in tab.status_label.text() and SNAPSHOT not in tab.status_label.text()


def superscript(exponent: int) -> str:
    return str(exponent).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
