"""What a keystroke costs the attention views: work whose input did not change is not redone (issue 21's
keystroke → painted line). Each test counts, through a spy, a redraw that used to happen on every keystroke, and
checks that what the user sees is still right."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from bertcore.analysis.inspection import MaskedPrediction
from bertcore.data.masking import MaskDecision
from explorer.common._qt.heatmap_style import make_scale_bar, show_scale
from explorer.common._qt.line_label import LineLabel
from explorer.common._qt.plot_style import TITLE_SIZE, show_title
from explorer.common._qt.token_axis import TokenAxis
from explorer.inspector._qt import predictions_table
from explorer.inspector._qt.head_grid import HeadGrid
from explorer.inspector._qt.predictions_view import PredictionsPanel
from explorer.inspector._qt.token_heatmap import TokenHeatmap
from tests.explorer.conftest import shown
from tests.explorer.event_counts import EventCount


class PaintRegions(QObject):
    """How many rectangles each paint of the widget it watches was clipped to."""

    def __init__(self):
        super().__init__()
        self.rect_counts: list[int] = []

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.Paint:
            self.rect_counts.append(event.region().rectCount())
        return False


@pytest.fixture
def label_updates(monkeypatch):
    """How many times each axis re-laid its label out (pyqtgraph's AxisItem._updateLabel: new HTML, a new
    size, its picture dropped)."""
    counts: dict[int, int] = {}
    original = pg.AxisItem._updateLabel

    def counting(axis):
        counts[id(axis)] = counts.get(id(axis), 0) + 1
        original(axis)

    monkeypatch.setattr(pg.AxisItem, "_updateLabel", counting)
    return counts


def test_a_token_axis_follows_a_new_range_without_re_laying_its_label(qtbot, label_updates):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    axis = TokenAxis("left")
    plot = widget.addPlot(axisItems={"left": axis})
    axis.set_labels(["[CLS]", "the", "cat", "[SEP]"])
    label_updates.clear()
    for top in (4, 5, 4, 6):  # a keystroke adds or drops a token: the view's range follows
        plot.vb.setRange(yRange=(0, top), padding=0)
    assert label_updates.get(id(axis), 0) == 0
    assert axis.range[1] == pytest.approx(6)  # the axis did follow


def test_a_new_token_count_re_lays_out_no_label_of_the_head_detail_hidden_axes_included(qtbot, label_updates):
    """A keystroke that adds a token gives the head detail a new range: none of its four axes rewrites its label
    (the hidden top and right ones did, twice a keystroke, for labels nobody sees)."""
    heatmap = shown(qtbot, TokenHeatmap("head"), (500, 500))
    tokens = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]", "it", "purred", "[SEP]"]
    heatmap.set_matrix(np.full((10, 10), 0.1, np.float32), tokens[:10], np.arange(10), (0.0, 1.0))
    label_updates.clear()
    heatmap.set_matrix(np.full((11, 11), 0.1, np.float32), tokens, np.arange(11), (0.0, 1.0))
    axes = [heatmap.plot.getAxis(name) for name in ("left", "bottom", "top", "right")]
    assert heatmap.plot.vb.viewRange()[0][1] >= 11 - 1e-6  # the new range was taken
    assert {id(axis): label_updates.get(id(axis), 0) for axis in axes} == {id(axis): 0 for axis in axes}


def test_the_same_token_names_leave_an_axis_as_drawn(qtbot):
    """The logit lens names its layers again on every keystroke, and its masked words mostly stay: an axis given
    the names it shows keeps its picture; new names, or a hovered name to let go of, draw it again."""
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    axis = TokenAxis("left")
    widget.addPlot(axisItems={"left": axis})
    axis.set_labels(["emb.", "layer 1", "layer 2"])
    drawn = axis.picture = object()
    axis.set_labels(["emb.", "layer 1", "layer 2"])
    assert axis.picture is drawn
    axis.set_hovered(1)
    axis.set_labels(["emb.", "layer 1", "layer 2"])
    assert axis.hovered == -1 and axis.picture is None
    drawn = axis.picture = object()
    axis.set_labels(["emb.", "layer 1", "layer 2"], positions=[0, 2, 4])
    assert axis.picture is None and axis.label_positions == [0, 2, 4]


def test_new_levels_redraw_a_scale_bar_s_ticks_but_not_its_labels_layout(qtbot, label_updates):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    bar = make_scale_bar()
    widget.addItem(bar)
    show_scale(bar, "fixed", (0.0, 1.0))
    label_updates.clear()
    bar.axis.picture = object()  # stands for the ticks drawn for (0, 1)
    bar.setLevels((0.0, 0.42))
    assert bar.axis.picture is None  # the ticks are drawn again for the new range
    assert label_updates == {}
    show_scale(bar, "max", (0.0, 0.42))  # a new label is still written
    label_axis = bar.getAxis("left")
    assert "0.42" in label_axis.labelText and "0.42" in label_axis.label.toPlainText()


def test_the_same_levels_leave_a_scale_bar_s_ticks_as_drawn(qtbot):
    """A keystroke under the "fixed" scale (or another head of the same layer) keeps the levels: the bar's ticks
    are not drawn again. Under "p99" the levels are the layer's own and move with each keystroke, and the ticks
    with them (the test above)."""
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    bar = make_scale_bar()
    widget.addItem(bar)
    show_scale(bar, "fixed", (0.0, 1.0))
    drawn = bar.axis.picture = object()
    show_scale(bar, "fixed", (0.0, 1.0))
    assert bar.axis.picture is drawn


def test_the_same_title_is_not_set_again(qtbot, monkeypatch):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    plot = widget.addPlot()
    calls = []
    original = plot.titleLabel.setText
    monkeypatch.setattr(plot.titleLabel, "setText", lambda text, **style: (calls.append(text), original(text, **style)))
    show_title(plot, "Layer 1 · head 1")
    show_title(plot, "Layer 1 · head 1")  # the next keystroke, same layer and head
    assert calls == ["Layer 1 · head 1"]
    show_title(plot, "Layer 1 · head 2")
    assert calls == ["Layer 1 · head 1", "Layer 1 · head 2"]
    assert plot.titleLabel.text == "Layer 1 · head 2" and plot.titleLabel.opts["size"] == TITLE_SIZE
    plot.setTitle(None)  # hidden by someone else: shown again by the next title, even the same words
    show_title(plot, "Layer 1 · head 2")
    assert plot.titleLabel.isVisible() and calls[-1] == "Layer 1 · head 2"


def test_the_head_switches_are_touched_only_where_a_head_changed(qtbot, monkeypatch):
    grid = HeadGrid()
    qtbot.addWidget(grid)
    grid._build(4)
    grid.set_enabled(np.array([True, True, False, True]))
    tips = []
    for checkbox in grid.checkboxes:
        original = checkbox.setToolTip
        monkeypatch.setattr(checkbox, "setToolTip", lambda text, original=original: (tips.append(text), original(text)))
    grid.set_enabled(np.array([True, True, False, True]))  # the next keystroke: nothing switched
    assert tips == []
    grid.set_enabled(np.array([True, False, False, True]))
    assert len(tips) == 1 and "head 2: switched off" in tips[0]
    assert [checkbox.isChecked() for checkbox in grid.checkboxes] == [True, False, False, True]
    assert grid.images[1].opacity() < 1.0 and grid.images[0].opacity() == 1.0
    grid.checkboxes[3].setChecked(False)  # ticked off by hand, but the mask was refused: the grid shows the mask
    grid.set_enabled(np.array([True, False, False, True]))
    assert grid.checkboxes[3].isChecked()


def render(heatmap: TokenHeatmap) -> QImage:
    heatmap.graphics.scene().update()
    return heatmap.grab().toImage()


def test_the_head_detail_looks_as_it_did_with_pyqtgraph_s_label_layout(qtbot):
    """Switching the axes' automatic SI prefix off changes no pixel: none of them has a unit to scale."""
    rng = np.random.default_rng(0)
    matrix = rng.random((12, 12)).astype(np.float32)
    matrix /= matrix.sum(axis=1, keepdims=True)
    tokens = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]", "it", "was", "warm", "[SEP]"]
    heatmap = shown(qtbot, TokenHeatmap("Layer 1 · head 1"), (520, 480))
    for levels in ((0.0, 0.3), (0.0, float(np.percentile(matrix, 99)))):  # the second keystroke's levels
        heatmap.set_matrix(matrix, tokens, np.arange(12), levels, "p99")
        qtbot.wait(20)
    ours = render(heatmap)
    axes = [heatmap.left_axis, heatmap.bottom_axis] + [heatmap.color_bar.getAxis(name) for name in
                                                        ("left", "right", "top", "bottom")]
    for axis in axes:
        axis.enableAutoSIPrefix(True)
        axis.picture = None
    qtbot.wait(20)
    assert render(heatmap) == ours


def form_row(qtbot, line) -> tuple[QWidget, EventCount]:
    """`line` in a row of a form, beside a button, as the masking summary sits; the form counts its relayouts."""
    form = QWidget()
    row = QHBoxLayout(form)
    row.addWidget(QPushButton("Mask like BERT"))
    row.addWidget(line, 1)
    shown(qtbot, form, (700, 40))
    qtbot.wait(10)  # the first layout's own requests
    requests = EventCount(QEvent.Type.LayoutRequest)
    form.installEventFilter(requests)
    return form, requests


def test_a_line_label_takes_a_new_text_without_re_laying_out_its_form(qtbot):
    plain = QLabel("Masking (BERT recipe, seed 0): 4 of 28 tokens")
    _, plain_requests = form_row(qtbot, plain)
    plain.setText("Masking (BERT recipe, seed 0): 4 of 29 tokens — 4 → [MASK]")
    qtbot.wait(10)
    assert plain_requests.count >= 1  # what a QLabel does: the window is laid out again (and repainted)

    line = LineLabel()
    line.label.setText("Masking (BERT recipe, seed 0): 4 of 28 tokens")
    _, requests = form_row(qtbot, line)
    line.label.setText("Masking (BERT recipe, seed 0): 4 of 29 tokens — 4 → [MASK]")
    qtbot.wait(10)
    assert requests.count == 0
    assert line.label.geometry() == line.rect()


def test_a_line_label_looks_as_a_label_in_its_place(qtbot):
    text = "Masking (BERT recipe, seed 0): 4 of 28 tokens — 4 → [MASK], 0 → random, 0 kept"
    plain_form, _ = form_row(qtbot, QLabel(text))
    line = LineLabel()
    line.label.setText(text)
    line_form, _ = form_row(qtbot, line)
    assert line_form.grab().toImage() == plain_form.grab().toImage()


@pytest.fixture
def predictions_panel(qtbot) -> PredictionsPanel:
    return shown(qtbot, PredictionsPanel(), (900, 300))


def test_the_nsp_bar_moves_with_the_window_s_paint_not_in_a_paint_of_its_own(qtbot, predictions_panel):
    """QProgressBar.setValue repaints the bar at once when it moves a pixel: on every keystroke the NSP bar painted
    on its own, outside the window's paint of the new inspection. The new value is still painted, with the rest."""
    bar = predictions_panel.nsp_bar
    bar.show()
    qtbot.wait(20)
    paints = EventCount(QEvent.Type.Paint)
    bar.installEventFilter(paints)
    bar.setValue(700)
    assert paints.count == 0 and bar.value() == 700  # nothing painted inside setValue
    qtbot.waitUntil(lambda: paints.count == 1)  # painted with the window's next paint
    before = bar.grab().toImage()
    bar.setValue(200)
    qtbot.waitUntil(lambda: paints.count == 2)
    assert bar.grab().toImage() != before


def test_the_predictions_table_writes_its_cells_once_per_inspection_not_at_each_paint(predictions_panel,
                                                                                       monkeypatch):
    """A paint asks the model a dozen roles for each cell: the pieces and percentages are made once, when the
    predictions arrive, and each paint only reads them (cells and bars as before)."""
    panel = predictions_panel
    model = panel.model
    model.set_predictions([MaskedPrediction(position, "cat", "[MASK]", MaskDecision.MASK, ["dog", "cat", "##s"],
                                            [7, 8, 9], np.array([0.6, 0.3, 0.1], np.float32))
                           for position in (2, 5)])
    panel.view.show()
    assert model.rowCount() > 0 and model.top_k > 0
    made = []
    for name in ("readable_piece", "percent"):
        original = getattr(predictions_table, name)
        monkeypatch.setattr(predictions_table, name,
                            lambda *args, original=original: (made.append(1), original(*args))[1])
    paints = EventCount(QEvent.Type.Paint)
    panel.view.viewport().installEventFilter(paints)
    panel.view.resize(700, 120)
    panel.view.viewport().grab()  # a paint of every cell
    assert paints.count == 1 and made == []
    prediction = model.predictions[0]
    first_guess = model.index(0, len(predictions_table.FIXED_COLUMNS))
    assert model.data(first_guess) == (f"{predictions_table.readable_piece(prediction.top_tokens[0], 'wordpiece')}  "
                                       f"{predictions_table.percent(float(prediction.top_probabilities[0]))}")
    assert model.data(first_guess, predictions_table.PROBABILITY_ROLE) == float(prediction.top_probabilities[0])
    assert model.data(model.index(0, 0)) == str(prediction.position)


def test_a_paint_of_the_predictions_table_asks_its_model_no_roles(predictions_panel):
    """Each cell is painted by the table's own delegate from the texts written when the predictions arrived: the
    style's text cells asked the model a dozen roles each, at every paint. What the cells say is still drawn."""

    class AskedModel(predictions_table.PredictionsModel):
        def __init__(self, parent):
            super().__init__(parent)
            self.asked = []

        def data(self, index, role=Qt.ItemDataRole.DisplayRole):
            self.asked.append(role)
            return super().data(index, role)

    panel = predictions_panel
    model = panel.model = AskedModel(panel)
    panel.view.setModel(model)
    panel.view.show()
    panel.view.resize(700, 120)
    blank = panel.view.viewport().grab().toImage()
    model.set_predictions([MaskedPrediction(position, "cow", "[MASK]", MaskDecision.MASK, ["pig", "cow"], [9, 10],
                                            np.array([0.6, 0.3], np.float32)) for position in (3, 6)])
    panel.view.viewport().grab()  # the new rows laid out (their sizes ask the model) and painted
    model.asked.clear()
    drawn = panel.view.viewport().grab().toImage()
    assert model.asked == [] and drawn != blank


def test_predictions_of_the_same_shape_change_the_table_in_place_and_widen_a_column_for_a_longer_word(
        predictions_panel, tiny_model, tokenizer):
    """A keystroke mostly keeps the number of masked positions: the table's cells change in place (a reset made the
    view lay its rows and columns out again, ~1 ms a keystroke), and the answer column still fits its longest
    answer. Fewer masked positions: a reset."""
    from bertcore.analysis.inspection import inspect_encoding
    from bertcore.data.masking import mask_exactly

    def inspection(text: str, positions=(2, 4)):
        encoding = tokenizer.encode(text)
        return inspect_encoding(tiny_model, tokenizer, encoding, masking=mask_exactly(encoding, tokenizer, positions))

    panel = predictions_panel
    model, header = panel.model, panel.view.horizontalHeader()
    panel.show_inspection(inspection("the cat sat on a mat"))
    resets, changes = [], []
    model.modelReset.connect(lambda: resets.append(1))
    model.dataChanged.connect(lambda *args: changes.append(1))
    narrow = header.sectionSize(2)
    panel.show_inspection(inspection("the notwithstanding cat sat on a mat"))
    answer = model.data(model.index(0, 2))
    assert resets == [] and changes == [1] and answer == "notwithstanding"
    assert header.sectionSize(2) >= panel.view.fontMetrics().horizontalAdvance(answer) > narrow
    panel.show_inspection(inspection("the cat sat on a mat", positions=(2,)))
    assert resets == [1] and model.rowCount() == 1


def test_the_fixed_headings_are_measured_once_per_font(predictions_panel, tiny_model, tokenizer, monkeypatch):
    """A heading's width is asked of the style (through the model's header data) once per font, not on every
    keystroke; the word columns still fit their headings, and a new font measures them again."""
    from bertcore.analysis.inspection import inspect_encoding
    from bertcore.data.masking import mask_exactly

    def inspection(text: str):
        encoding = tokenizer.encode(text)
        return inspect_encoding(tiny_model, tokenizer, encoding, masking=mask_exactly(encoding, tokenizer, (1, 2)))

    panel = predictions_panel
    header = panel.view.horizontalHeader()
    asked = []
    hint = header.sectionSizeHint
    monkeypatch.setattr(header, "sectionSizeHint", lambda column: (asked.append(column), hint(column))[1])
    panel.show_inspection(inspection("a cat sat"))
    first = list(asked)
    panel.show_inspection(inspection("a dog sat"))
    assert first == [0, 1, 2] and asked == first  # the second keystroke asked nothing
    for column in range(len(predictions_table.FIXED_COLUMNS)):
        assert header.sectionSize(column) >= hint(column)
    bigger = header.font()
    bigger.setPointSize(bigger.pointSize() + 6)
    header.setFont(bigger)
    panel.show_inspection(inspection("a cow sat"))
    assert asked == first * 2
    assert header.sectionSize(1) >= hint(1)


def test_a_new_inspection_asks_the_attention_views_their_sizes_once(qtbot, monkeypatch):
    """The pictures a new inspection needs (the grid's and the detail's) come from one look at the views' sizes and
    options, not one per view (~0.15 ms each, on every keystroke)."""
    from explorer.inspector._qt.attention_panel import AttentionPanel
    from explorer.inspector.demo_inspection import demo_inspection

    panel = shown(qtbot, AttentionPanel(), (900, 500))
    panel.set_inspection(demo_inspection(9, 4, 3))
    asked = []
    spec = AttentionPanel.picture_spec
    monkeypatch.setattr(AttentionPanel, "picture_spec", lambda self: (asked.append(1), spec(self))[1])
    panel.set_inspection(demo_inspection(10, 4, 3, seed=1))
    assert len(asked) == 1
    assert panel.head_detail.matrix.shape == (10, 10) and len(panel.head_grid.images) == 3


def test_a_new_layer_of_thumbnails_is_repainted_through_one_rectangle(qtbot):
    """A keystroke changes every thumbnail, frame and label of the head grid: the repaint is clipped to one
    rectangle around them, not to the dozens of small ones they cover (a complex clip made the grid's paint ~4×
    its drawing), and the new pictures are what is on screen."""
    from explorer.inspector._qt.attention_panel import AttentionPanel
    from explorer.inspector.demo_inspection import demo_inspection

    panel = shown(qtbot, AttentionPanel(), (1100, 480))
    panel.set_inspection(demo_inspection(30, 2, 12, seed=0))
    viewport = panel.head_grid.graphics.viewport()
    qtbot.wait(50)  # the first inspection painted
    paints = PaintRegions()
    viewport.installEventFilter(paints)
    panel.set_inspection(demo_inspection(31, 2, 12, seed=1))
    qtbot.waitUntil(lambda: len(paints.rect_counts) > 0, timeout=2_000)
    assert paints.rect_counts == [1] * len(paints.rect_counts)
    assert panel.head_grid.images[0].image.shape[0] == 31
