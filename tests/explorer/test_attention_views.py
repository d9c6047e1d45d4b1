"""The attention panel driven through its public interface, its objectNames and the mouse (offscreen)."""

import dataclasses
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QSlider, QWidget

import explorer.common.attention_math as attention_math
import explorer.inspector.attention_images as attention_images
from explorer.common.export_data import read_matrix_csv
from explorer.inspector._qt.attention_panel import AttentionPanel
from explorer.inspector.demo_inspection import demo_inspection
from tests.explorer.conftest import shown


@pytest.fixture(scope="module")
def real_inspection():
    """A real bertcore Inspection of an untrained 3-layer x 4-head model (distinct sizes)."""
    import torch

    from bertcore.analysis.inspection import inspect
    from bertcore.files.resources import default_vocab_path
    from bertcore.models.bert import BertForPreTraining
    from bertcore.models.config import preset
    from bertcore.tokenization.wordpiece import BertTokenizer

    torch.manual_seed(0)
    tokenizer = BertTokenizer.from_vocab_file(default_vocab_path())
    config = preset("mini", vocab_size=tokenizer.vocab_size, num_hidden_layers=3, hidden_size=64,
                    intermediate_size=128)
    model = BertForPreTraining(config)
    return inspect(model, tokenizer, "the cat sat on the mat", "it was warm")


@pytest.fixture
def panel(qtbot):
    return shown(qtbot, AttentionPanel(), (1200, 760))


def scene_point(graphics, scene_pos) -> QPoint:
    return graphics.mapFromScene(scene_pos)


def click_scene(qtbot, graphics, scene_pos, button=Qt.MouseButton.LeftButton):
    qtbot.mouseClick(graphics.viewport(), button, pos=scene_point(graphics, scene_pos))


def test_children_have_the_names_the_window_relies_on(panel):
    for name, kind in (("layerSlider", QSlider), ("headGrid", QWidget), ("headDetail", QWidget)):
        child = panel.findChild(kind, name)
        assert child is not None, name
        assert child.accessibleName()


@pytest.mark.slow
def test_layer_slider_shows_exactly_that_layers_heads(panel, real_inspection):
    attentions = real_inspection.attentions
    assert attentions.shape[:2] == (3, 4)
    panel.set_inspection(real_inspection)
    slider = panel.findChild(QSlider, "layerSlider")
    assert (slider.minimum(), slider.maximum()) == (0, 2)
    for layer in (2, 0, 1):
        slider.setValue(layer)
        assert panel.current_layer() == layer
        assert panel.toolbar.layer_label.text() == f"Layer {layer + 1} / 3"
        assert len(panel.head_grid.images) == 4 == len(panel.head_grid.matrices)
        for head, matrix in enumerate(panel.head_grid.matrices):
            np.testing.assert_array_equal(matrix, attentions[layer, head])
        np.testing.assert_array_equal(panel.head_detail.matrix, attentions[layer, 0])


def test_stepper_buttons_and_keys_move_the_layer(panel, qtbot):
    panel.set_inspection(demo_inspection(9, 4, 3))
    qtbot.mouseClick(panel.toolbar.next_button, Qt.MouseButton.LeftButton)
    assert panel.current_layer() == 1
    qtbot.keyClick(panel.toolbar.layer_slider, Qt.Key.Key_PageDown)
    assert panel.current_layer() == 2
    qtbot.keyClick(panel, Qt.Key.Key_Left)
    assert panel.current_layer() == 1
    qtbot.mouseClick(panel.toolbar.previous_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(panel.toolbar.previous_button, Qt.MouseButton.LeftButton)  # stays at the first layer
    assert panel.current_layer() == 0 and panel.toolbar.layer_slider.value() == 0
    panel.set_layer(99)
    assert panel.current_layer() == 3


def test_clicking_a_head_opens_it_in_the_detail(panel, qtbot, real_inspection):
    panel.set_inspection(real_inspection)
    panel.set_layer(1)
    grid = panel.head_grid
    click_scene(qtbot, grid.graphics, grid.head_centre(2))
    assert panel.selected_head == 2
    np.testing.assert_array_equal(panel.head_detail.matrix, real_inspection.attentions[1, 2])
    assert "Layer 2 · head 3" in panel.head_detail.plot.titleLabel.text
    panel.select_head(2, 3)  # the same through the API, on another layer
    assert panel.current_layer() == 2
    np.testing.assert_array_equal(panel.head_detail.matrix, real_inspection.attentions[2, 3])


def test_toggling_heads_emits_the_whole_mask(panel, qtbot):
    panel.set_inspection(demo_inspection(8, 3, 4))
    panel.set_layer(2)
    with qtbot.waitSignal(panel.headMaskChanged) as blocker:
        panel.head_grid.checkboxes[1].click()
    expected = np.ones((3, 4), np.float32)
    expected[2, 1] = 0
    mask = blocker.args[0]
    assert mask.dtype == np.float32 and mask.shape == (3, 4)
    np.testing.assert_array_equal(mask, expected)
    assert panel.head_grid.images[1].opacity() < 0.5  # drawn greyed out
    assert "off" in panel.head_grid.head_label(1)
    assert panel.head_grid.numbers[1].text() == panel.head_grid.head_label(1)  # what its corner shows
    grid = panel.head_grid
    with qtbot.waitSignal(panel.headMaskChanged) as blocker:  # right-click switches head 4 off
        click_scene(qtbot, grid.graphics, grid.head_centre(3),
                    Qt.MouseButton.RightButton)
    expected[2, 3] = 0
    np.testing.assert_array_equal(blocker.args[0], expected)
    with qtbot.waitSignal(panel.headMaskChanged) as blocker:
        panel.head_grid.checkboxes[1].click()  # and on again
    expected[2, 1] = 1
    np.testing.assert_array_equal(blocker.args[0], expected)
    np.testing.assert_array_equal(panel.head_mask(), expected)


def test_a_new_inspection_brings_its_own_head_mask(panel):
    inspection = demo_inspection(8, 2, 3)
    mask = np.ones((2, 3), np.float32)
    mask[0, 2] = 0
    panel.set_inspection(dataclasses.replace(inspection, head_mask=mask))
    np.testing.assert_array_equal(panel.head_mask(), mask)
    assert not panel.head_grid.checkboxes[2].isChecked()


def test_hide_special_tokens_and_renormalise_apply_to_every_view(panel):
    inspection = demo_inspection(12, 2, 3, num_padding=2)  # [CLS] a*3 [SEP] b*4 [SEP] [PAD] [PAD]
    panel.set_inspection(inspection)
    keep = np.array([i for i, token in enumerate(inspection.input_tokens)
                     if token not in ("[CLS]", "[SEP]", "[PAD]")])
    panel.set_options(hide_special=True)
    np.testing.assert_array_equal(panel.visible_positions(), keep)
    sliced = inspection.attentions[0, 1][np.ix_(keep, keep)]
    np.testing.assert_array_equal(panel.head_grid.matrices[1], sliced)
    panel.tabs.setCurrentIndex(1)
    assert panel.overview.image.shape == (2 * len(keep), 3 * len(keep))
    panel.set_options(renormalise=True)
    for view_image in (panel.head_grid.matrices[1], panel.head_detail.matrix):
        assert view_image.shape == (len(keep), len(keep))
        np.testing.assert_allclose(view_image.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(panel.head_grid.matrices[1], sliced / sliced.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(panel.overview.image[:len(keep)].sum(axis=1), 3.0, rtol=1e-5)
    panel.tabs.setCurrentIndex(2)
    np.testing.assert_allclose(panel.rollout_view.matrix.sum(axis=1), 1.0, rtol=1e-5)
    panel.set_options(hide_special=False, renormalise=False)
    assert panel.head_grid.matrices[0].shape == (12, 12)


def test_overview_cells_are_the_heads_and_a_click_opens_one(panel, qtbot, real_inspection):
    attentions = real_inspection.attentions
    seq_len = attentions.shape[-1]
    panel.set_inspection(real_inspection)
    panel.tabs.setCurrentIndex(1)
    image = panel.overview.image
    assert image.shape == (3 * seq_len, 4 * seq_len)
    for layer in range(3):
        for head in range(4):
            cell = image[layer * seq_len:(layer + 1) * seq_len, head * seq_len:(head + 1) * seq_len]
            np.testing.assert_array_equal(cell, attentions[layer, head])
    view = panel.overview.plot.vb
    click_scene(qtbot, panel.overview.graphics, view.mapViewToScene(_cell_centre(2, 1, seq_len)))
    assert (panel.current_layer(), panel.selected_head) == (2, 1)
    assert panel.tabs.currentIndex() == 0
    np.testing.assert_array_equal(panel.head_detail.matrix, attentions[2, 1])


def grid_highlight(grid):
    """The visible row the head grid's token lines mark in its first head, None when none (a thumbnail is one
    scene unit across, its t rows 1 / t each)."""
    xs, _ = grid.token_lines.getData()
    return None if xs is None or len(xs) == 0 else round(xs[0] * grid.matrices.shape[-1] - 0.5)


def grid_cell(grid):
    """(row, column): the visible row and column the head grid's token lines mark in its first head."""
    xs, ys = grid.token_lines.getData()
    length = grid.matrices.shape[-1]
    return round(ys[2] * length - 0.5), round(xs[0] * length - 0.5)


def overview_cell(overview):
    """(row, column): the visible row and column the overview's token lines mark in its first layer and head."""
    xs, ys = overview.token_lines.getData()
    columns = len(xs) - 2 * overview.num_layers  # a vertical line per head first, then a horizontal one per layer
    return (round(ys[columns] * len(overview.positions) / overview.cell - 0.5),
            round(xs[0] * len(overview.positions) / overview.cell - 0.5))


def test_a_hovered_cell_is_marked_at_its_query_row_and_its_key_column_in_every_view(panel):
    """The readout names "query → key"; the views mark that cell: the query's row and the key's column, not the
    query's row and column (which named one token and pointed at another)."""
    inspection = demo_inspection(10, 2, 3)
    panel.set_inspection(inspection)
    panel.tabs.setCurrentIndex(1)  # the overview drawn
    panel.tabs.setCurrentIndex(0)
    detail, grid = panel.head_detail, panel.head_grid
    tokens = inspection.input_tokens
    detail._on_mouse_moved(detail.plot.vb.mapViewToScene(_cell_centre(5, 2, 1)))  # query 5, key 2
    assert detail.hover_label.text().startswith(f"{tokens[5]} (5) → {tokens[2]} (2)")
    assert (detail.row_band.rect().top(), detail.column_band.rect().left()) == (5, 2)
    assert grid_cell(grid) == (5, 2) and overview_cell(panel.overview) == (5, 2)
    grid._on_mouse_moved(grid.cell_centre(1, 7, 3))  # head 2, query 7, key 3
    assert grid.hover_label.text().startswith(f"head 2: {tokens[7]} (7) → {tokens[3]} (3)")
    assert grid_cell(grid) == (7, 3) and overview_cell(panel.overview) == (7, 3)
    assert (detail.row_band.rect().top(), detail.column_band.rect().left()) == (7, 3)
    grid._end_hover()
    assert not detail.row_band.isVisible() and not detail.column_band.isVisible()
    panel.highlight_token(4)  # a token (the table's hover): its row and column
    assert grid_cell(grid) == (4, 4) and (detail.row_band.rect().top(), detail.column_band.rect().left()) == (4, 4)


def test_a_zoom_or_pan_under_a_still_mouse_names_the_cell_now_under_it(panel):
    inspection = demo_inspection(10, 2, 3)
    panel.set_inspection(inspection)
    detail = panel.head_detail
    view = detail.plot.vb
    mouse = view.mapViewToScene(_cell_centre(5, 2, 1))
    detail._on_mouse_moved(mouse)
    view.setRange(xRange=(4, 9), yRange=(0, 5), padding=0)  # the cells move; the mouse does not
    row, column = detail.cell_at(mouse)
    assert (row, column) != (5, 2)
    tokens = inspection.input_tokens
    assert detail.hover_label.text().startswith(f"{tokens[row]} ({row}) → {tokens[column]} ({column})")
    assert (detail.row_band.rect().top(), detail.column_band.rect().left()) == (row, column)


def _cell_centre(row, column, cell):
    """View coordinates of the middle of cell (row, column) of a grid of `cell`-sized cells."""
    return QPointF((column + 0.5) * cell, (row + 0.5) * cell)


def test_overview_downsamples_long_inputs_to_block_means(panel):
    inspection = demo_inspection(100, 2, 3)
    panel.set_inspection(inspection)
    panel.tabs.setCurrentIndex(1)
    image = panel.overview.image
    assert image.shape == (2 * 64, 3 * 64)
    np.testing.assert_allclose(image[64:, 128:], attention_math.block_mean(inspection.attentions[1, 2], 64),
                               rtol=1e-5)


def test_rollout_view_follows_the_layer_and_the_head_mask(panel, real_inspection):
    panel.set_inspection(real_inspection)
    panel.tabs.setCurrentIndex(2)
    panel.set_layer(1)
    expected = attention_math.compute_rollout(real_inspection.attentions)
    np.testing.assert_allclose(panel.rollout_view.matrix, expected[1], rtol=1e-6)
    panel.rollout_combo.setCurrentIndex(1)  # through the last layer
    np.testing.assert_allclose(panel.rollout_view.matrix, expected[2], rtol=1e-6)
    panel.set_head_enabled(0, 0, False)
    mask = np.ones((3, 4), np.float32)
    mask[0, 0] = 0
    masked = attention_math.compute_rollout(real_inspection.attentions, mask)
    np.testing.assert_allclose(panel.rollout_view.matrix, masked[2], rtol=1e-6)
    assert "11 of 12 heads on" in panel.rollout_view.plot.titleLabel.text


def test_token_highlight_crosses_views(panel, qtbot):
    inspection = demo_inspection(10, 2, 3)
    panel.set_inspection(inspection)
    assert inspection.input_tokens[:5] == ["[CLS]", "the", "quick", "brown", "[SEP]"]
    panel.highlight_token(3)
    detail = panel.head_detail
    assert detail.row_band.isVisible() and detail.row_band.rect().top() == 3
    assert detail.column_band.rect().left() == 3
    assert grid_highlight(panel.head_grid) == 3
    panel.set_options(hide_special=True)  # [CLS] gone: position 3 is now the third row shown
    assert detail.row_band.isVisible() and detail.row_band.rect().top() == 2
    panel.highlight_token(4)  # [SEP] is hidden: nothing to highlight
    assert not detail.row_band.isVisible()
    panel.highlight_token(-1)
    assert grid_highlight(panel.head_grid) is None
    # the mouse over the detail's row 2 (position 3 with [CLS] hidden) reports position 3
    view = detail.plot.vb
    with qtbot.waitSignal(panel.tokenHovered) as blocker:
        detail._on_mouse_moved(view.mapViewToScene(_cell_centre(2, 5, 1)))
    assert blocker.args == [3]
    shown = f"{inspection.input_tokens[3]} (3) → {inspection.input_tokens[7]} (7)"  # [SEP] at 4 hidden
    assert detail.hover_label.text().startswith(shown)
    assert grid_cell(panel.head_grid) == (2, 5)  # the hovered cell: query 3 (row 2), key 7 (column 5)
    with qtbot.waitSignal(panel.tokenHovered) as blocker:
        detail._on_mouse_moved(view.mapViewToScene(_cell_centre(-5, -5, 1)))
    assert blocker.args == [-1]


@pytest.mark.slow
def test_export_writes_files_that_round_trip(panel, tmp_path, real_inspection):
    panel.set_inspection(real_inspection)
    panel.set_layer(1)
    panel.select_head(1, 2)
    png = panel.export_png(tmp_path / "grid.png", "grid")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not QImage(str(png)).isNull() and QImage(str(png)).width() == 2 * panel.head_grid.width()
    for view in ("detail", "overview", "rollout", "current"):
        assert QImage(str(panel.export_png(tmp_path / f"{view}.png", view))).width() > 0
    svg = panel.export_svg(tmp_path / "detail.svg", "detail")
    root = ElementTree.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert "the" in svg.read_text()  # token labels are text in the SVG
    matrix, rows, columns = read_matrix_csv(panel.export_head_csv(tmp_path / "head.csv"))
    np.testing.assert_allclose(matrix, real_inspection.attentions[1, 2], rtol=1e-5, atol=1e-7)
    assert rows == columns and rows[0] == "0:[CLS]" and len(rows) == len(real_inspection.input_tokens)
    with np.load(panel.export_npz(tmp_path / "attention.npz")) as data:
        np.testing.assert_array_equal(data["attentions"], real_inspection.attentions)
        assert data["tokens"].tolist() == real_inspection.input_tokens
        assert data["rollout"].shape == (3, *real_inspection.attentions.shape[-2:])
        np.testing.assert_array_equal(data["head_mask"], np.ones((3, 4)))
    with pytest.raises(ValueError, match="unknown view"):
        panel.export_png(tmp_path / "x.png", "everything")


@pytest.mark.slow
def test_every_entry_of_the_export_menu_asks_for_a_path_and_writes_it(qtbot, panel, tmp_path, monkeypatch,
                                                                     real_inspection):
    from PySide6.QtWidgets import QFileDialog, QMessageBox

    from explorer.common._qt.background_write import BackgroundWrite

    panel.set_inspection(real_inspection)
    panel.select_head(2, 1)
    asked = []

    def answer(_parent, caption, suggested, file_filter):
        asked.append((caption, suggested, file_filter))
        return str(tmp_path / suggested), file_filter

    monkeypatch.setattr(QFileDialog, "getSaveFileName", answer)
    monkeypatch.setattr(QMessageBox, "warning", lambda *args: pytest.fail(f"export failed: {args[2]}"))
    actions = [action for action in panel.export_menu.actions()
               if not action.isSeparator() and action.text() != "Copy picture"]  # the clipboard's: test_copy_picture
    assert len(actions) == 11 and panel.toolbar.export_button.menu() is panel.export_menu
    for action in actions:
        action.trigger()
    qtbot.waitUntil(lambda: not BackgroundWrite.running, timeout=30_000)  # the NPZ is written off the GUI thread
    suggested = [name for _caption, name, _filter in asked]
    assert suggested[0] == "attention-layer3-head2-current.png" and suggested[-1] == "attention-layer3-head2-all.npz"
    assert all((tmp_path / name).stat().st_size > 0 for name in suggested)
    assert asked[8] == ("Export detail as CSV", "attention-layer3-head2-detail.csv", "CSV table (*.csv)")
    matrix, _rows, _columns = read_matrix_csv(tmp_path / "attention-layer3-head2-detail.csv")
    np.testing.assert_allclose(matrix, real_inspection.attentions[2, 1], rtol=1e-5, atol=1e-7)


def test_no_inspection_shows_a_message_and_exports_refuse(panel, tmp_path):
    panel.set_inspection(demo_inspection(6, 2, 2))
    panel.set_inspection(None)
    assert panel.empty_label.isVisible() and not panel.tabs.isVisible()
    assert not panel.toolbar.layer_slider.isEnabled()
    with pytest.raises(ValueError, match="no inspection"):
        panel.export_npz(tmp_path / "a.npz")


@pytest.mark.slow
def test_512_tokens_by_144_heads_overview_builds(panel):
    panel.set_inspection(demo_inspection(512, 12, 12))
    panel.tabs.setCurrentIndex(1)
    assert panel.overview.image.shape == (12 * 64, 12 * 64)
    panel.set_layer(11)
    assert panel.head_grid.matrices.shape == (12, 512, 512)
    assert panel.head_grid.images[11].image.shape[0] <= panel.head_grid.thumbnail_pixels()  # block means
    panel.overview.graphics.grab()  # paints without error


def test_hovering_a_grid_head_reports_the_cell_and_the_token(panel, qtbot):
    inspection = demo_inspection(10, 2, 3)
    panel.set_inspection(inspection)
    grid = panel.head_grid
    with qtbot.waitSignal(panel.tokenHovered) as blocker:
        grid._on_mouse_moved(grid.cell_centre(1, 4, 2))
    assert blocker.args == [4]
    value = inspection.attentions[0, 1, 4, 2]
    assert grid.hover_label.text() == f"head 2: [SEP] (4) → quick (2): {value:.4f}"
    assert panel.head_detail.row_band.isVisible() and panel.head_detail.row_band.rect().top() == 4


def test_overview_hover_names_layer_head_and_tokens(panel, qtbot):
    inspection = demo_inspection(10, 2, 3)
    panel.set_inspection(inspection)
    panel.tabs.setCurrentIndex(1)
    overview = panel.overview
    with qtbot.waitSignal(panel.tokenHovered) as blocker:  # layer 2, head 3, query 6, key 1
        overview._on_mouse_moved(overview.plot.vb.mapViewToScene(QPointF(2 * 10 + 1.5, 10 + 6.5)))
    assert blocker.args == [6]
    value = inspection.attentions[1, 2, 6, 1]
    assert overview.hover_label.text().startswith(f"layer 2, head 3: {inspection.input_tokens[6]} (6) → the (1): "
                                                  f"{value:.4f}")
    with qtbot.waitSignal(panel.tokenHovered) as blocker:
        overview._end_hover()
    assert blocker.args == [-1]


def test_the_panel_asks_attention_math_once_per_layer_options_and_head_mask(panel, qtbot, monkeypatch, tmp_path):
    asked = []
    layer_view = attention_images.layer_view

    def counted(inspection, layer, options=None, head_mask=None):
        asked.append(layer)
        return layer_view(inspection, layer, options, head_mask)

    monkeypatch.setattr(attention_images, "layer_view", counted)
    inspection = demo_inspection(10, 3, 2)
    panel.set_inspection(inspection)
    assert asked == [0]
    panel.select_head(0, 1)  # everything the views draw for this layer is already there
    panel.highlight_token(3)
    for tab in (1, 2, 0):
        panel.tabs.setCurrentIndex(tab)
    panel.export_head_csv(tmp_path / "head.csv")
    panel.export_npz(tmp_path / "all.npz")
    assert asked == [0]
    panel.set_layer(2)
    panel.set_options(hide_special=True)
    with qtbot.waitSignal(panel.headMaskChanged):
        panel.set_head_enabled(2, 0, False)
    assert asked == [0, 2, 2, 2]
    view = panel.layer_view()
    np.testing.assert_array_equal(panel.head_grid.matrices[1], view.matrices[1])
    assert not view.heads_on[0] and panel.head_grid.images[0].opacity() < 0.5
    panel.set_inspection(inspection)  # a new inspection (even the same object shown again) is asked afresh
    assert asked == [0, 2, 2, 2, 2]


def test_axis_labels_fit_at_512_tokens_and_the_hovered_token_is_always_named(panel, qtbot):
    inspection = demo_inspection(512, 2, 3)
    panel.set_inspection(inspection)
    detail = panel.head_detail
    qtbot.waitUntil(lambda: detail.plot.vb.sceneBoundingRect().height() > 100, timeout=5_000)
    axis = detail.left_axis
    length = axis.geometry().height()
    (stride, values), = axis.tickValues(0, 512, length)
    assert stride > 1 and len(values) * axis.min_spacing_px <= length * 1.05  # every k-th label, k chosen to fit
    assert axis.tickStrings(values[:1], 1, 1)[0].startswith("0 ")  # a thinned label says its position
    row = 301  # not one of the labels shown
    assert (row + 0.5) not in values
    detail._on_mouse_moved(detail.plot.vb.mapViewToScene(_cell_centre(row, 7, 1)))
    assert axis.hovered == row and detail.bottom_axis.hovered == 7
    assert f"{inspection.input_tokens[row]} ({row})" in detail.hover_label.text()
    assert axis._text(row, axis.stride > 1) == f"{row} {inspection.input_tokens[row]}"
    detail.graphics.grab()  # draws the hovered label in bold on its highlight
    from PySide6.QtGui import QPainter

    canvas = QImage(50, 50, QImage.Format.Format_ARGB32)
    painter = QPainter(canvas)
    try:
        for side in (axis, detail.bottom_axis):  # (the left axis runs inverted: queries down)
            texts = [text for _, _, text in side.generateDrawSpecs(painter)[2]]
            hovered = [text for text in texts if text.startswith("\0")]
            assert len(hovered) == 1 and len(texts) >= len(values) - 3, texts  # the others stay, bar neighbours
    finally:
        painter.end()
    detail._end_hover()
    assert axis.hovered == -1


def test_analyses_can_mark_heads_in_the_grid_and_the_overview_and_add_tools(panel):
    """The hooks the head lab builds on: a note and a frame colour per head, a tool in the toolbar."""
    from PySide6.QtWidgets import QToolButton

    panel.set_inspection(demo_inspection(10, 2, 3))
    grid = panel.head_grid
    grid.set_head_notes(["0.91", "", "0.12"], ["#2ca02c", "#999999", "#d62728"])
    assert grid.head_label(0) == "1\n0.91" and grid.head_label(1) == "2"
    assert grid.frames[2].pen().color().name() == "#d62728"
    grid.set_head_notes(None)
    assert grid.head_label(0) == "1"
    panel.tabs.setCurrentIndex(1)
    panel.overview.set_head_frames([[None, "#2ca02c", None], ["#d62728", None, None]])
    shown = [item for item in panel.overview.frame_items if item.isVisible()]
    assert len(shown) == 2 and shown[1].rect().left() == 0 and shown[1].rect().top() == panel.overview.cell
    panel.overview.set_head_frames(None)
    assert not any(item.isVisible() for item in panel.overview.frame_items)
    tool = QToolButton()
    tool.setText("Importance")
    panel.add_tool(tool)
    assert panel.toolbar.controls.indexOf(tool) == panel.toolbar.controls.indexOf(panel.toolbar.export_button) - 1


def test_a_new_token_count_does_not_lay_the_head_grid_out_again(panel, qtbot, monkeypatch):
    """A keystroke usually changes the token count: the grid's frames, labels and range stay where they are (a
    thumbnail is one scene unit whatever the count); only the pictures are scaled into their cells again, and
    each still fills its frame, with hover and cell look-ups on the new rows."""
    grid = panel.head_grid
    panel.set_inspection(demo_inspection(10, 2, 3))
    layouts = []
    original = grid._layout
    monkeypatch.setattr(grid, "_layout", lambda: (layouts.append(1), original()))
    panel.set_inspection(demo_inspection(13, 2, 3))
    assert layouts == [] and grid.matrices.shape[-1] == 13
    for image, frame in zip(grid.images, grid.frames, strict=True):
        shown, cell = image.mapRectToParent(image.boundingRect()), frame.rect()  # (the parent: the view)
        assert abs(shown.width() - cell.width()) < 1e-6 and abs(shown.left() - cell.left()) < 1e-6
    assert grid.cell_of(grid.cell_centre(2, 12, 7)) == (2, 12, 7)
    assert grid.cell_of(grid.cell_centre(0, 0, 12)) == (0, 0, 12)


def test_a_heatmap_under_a_title_wider_than_its_square_stays_square_with_its_colour_bar_in_view(qtbot):
    """A newcomer's rollout of 454 tokens: its title ("Rollout through layer 3 / 6 (36 of 36 heads on)") was wider
    than the square the height allowed, and pyqtgraph held the plot as wide as the title: the image sat off-centre
    in a wide view and the colour bar was pushed out of sight."""
    from explorer.inspector._qt.token_heatmap import TokenHeatmap

    heatmap = shown(qtbot, TokenHeatmap("Rollout through layer 3 / 6 (36 of 36 heads on) — a long title"),
                    (900, 260))
    tokens = [f"token{i}" for i in range(40)]
    heatmap.set_matrix(np.full((40, 40), 1 / 40, np.float32), tokens, np.arange(40), (0.0, 0.05), "fixed")

    def square() -> bool:
        view = heatmap.plot.vb.sceneBoundingRect()
        return abs(view.width() - view.height()) <= 2
    qtbot.waitUntil(square, timeout=3_000)
    bar = heatmap.color_bar.sceneBoundingRect()
    assert bar.right() <= heatmap.graphics.viewport().width(), "the colour bar is cut off"
