"""The house plot style (explorer.common._qt.plot_style) and the views that use it: black ink on white, small black
legends, and nowhere else setting them up by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from explorer.common._qt.plot_style import add_legend, clear_curve, curve_pen, style_canvas, style_plot

EXPLORER = Path(__file__).resolve().parents[2] / "explorer"
BLACK = QColor("black")


def legend_text_colours(legend: pg.LegendItem) -> set[str]:
    return {label.opts["color"].name() if isinstance(label.opts["color"], QColor) else str(label.opts["color"])
            for _sample, label in legend.items}


def test_style_plot_gives_black_named_axes_and_the_chosen_interaction(qtbot):
    widget = pg.GraphicsLayoutWidget()
    qtbot.addWidget(widget)
    style_canvas(widget)
    plot = style_plot(widget.addPlot(), x_label="head", y_label="layer", mouse=False)
    assert widget.backgroundBrush().color() == QColor("white")
    for name, label in (("bottom", "head"), ("left", "layer")):
        axis = plot.getAxis(name)
        assert axis.pen().color() == BLACK and axis.textPen().color() == BLACK
        assert axis.labelText == label and axis.labelStyle["color"] == "#000000"
    assert plot.vb.state["mouseEnabled"] == [False, False]
    assert not plot.menuEnabled() and plot.buttonsHidden

    open_plot = style_plot(widget.addPlot(row=1, col=0), menu=True, auto_range_button=True)
    assert open_plot.vb.state["mouseEnabled"] == [True, True]
    assert open_plot.menuEnabled() and not open_plot.buttonsHidden


def test_curve_pen_widths_and_styles():
    assert curve_pen("#1f77b4").widthF() == 1.0 and curve_pen("#1f77b4").style() == Qt.PenStyle.SolidLine
    assert curve_pen("r", width=2.5).widthF() == 2.5 and curve_pen("r").isCosmetic()
    assert curve_pen("r", dashed=True).style() == Qt.PenStyle.DashLine
    assert curve_pen("r", dotted=True).style() == Qt.PenStyle.DotLine
    with pytest.raises(ValueError, match="dashed or dotted, not both"):
        curve_pen("r", dashed=True, dotted=True)


def test_legend_text_is_black_and_small(qtbot):
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    legend = add_legend(widget.getPlotItem(), (-10, 10), backdrop=True)
    widget.plot([0, 1], [0, 1], name="a curve")
    assert legend_text_colours(legend) <= {"#000000", "k"} and legend.opts["labelTextSize"] == "8pt"
    assert legend.opts["brush"].color().alpha() == 220


def test_the_training_curves_are_drawn_in_the_house_ink(qtbot):
    """The loss plots used pyqtgraph's grey foreground, meant for a black canvas, on their white one."""
    from bertcore.training.pretraining import StepStats
    from explorer.runs._qt.loss_plots import LossPlots

    plots = LossPlots()
    qtbot.addWidget(plots)
    plots.add(StepStats(step=1, total_steps=10, loss=3.0, mlm_loss=2.0, nsp_loss=1.0, mlm_accuracy=0.1,
                        nsp_accuracy=0.5, learning_rate=1e-4, grad_norm=1.0, tokens=8, tokens_per_second=1.0,
                        elapsed_seconds=0.1))
    for plot in plots.plots:
        for name in ("left", "bottom"):
            assert plot.getAxis(name).textPen().color() == BLACK, name
        assert plot.menuEnabled()  # their Export and axis ranges
    assert plots.lr_plot.getAxis("bottom").labelText == "step"
    assert legend_text_colours(plots.loss_plot.legend) <= {"#000000", "k"}


def test_no_view_sets_up_plot_ink_or_canvas_by_hand():
    by_hand = re.compile(r'setBackground\("w"\)|background="w"|\.setTextPen\(|labelTextColor=|color="k"\)')
    offenders = [f"{path.relative_to(EXPLORER.parent)}:{number}: {line.strip()}"
                 for path in sorted(EXPLORER.rglob("*.py")) if path.name != "plot_style.py"
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if by_hand.search(line)]
    assert not offenders, "use explorer.common._qt.plot_style instead:\n" + "\n".join(offenders)


def test_clear_curve_empties_a_curve_and_leaves_an_empty_one_alone(qtbot, monkeypatch):
    curve = pg.PlotCurveItem()
    curve.setData([0.0, 1.0], [0.0, 1.0])
    calls = []
    original = pg.PlotCurveItem.setData
    monkeypatch.setattr(pg.PlotCurveItem, "setData", lambda self, *args: (calls.append(args), original(self, *args)))
    clear_curve(curve)
    assert calls == [([], [])] and len(curve.xData) == 0
    clear_curve(curve)  # the next keystroke: already empty, nothing to redo
    assert len(calls) == 1


@pytest.mark.slow
def test_no_axis_of_the_window_names_a_power_multiplier_before_or_after_a_model(qtbot, settings, tiny_model,
                                                                               tokenizer):
    """An empty view's axis read "position (x0.001)" over ticks of -500 … 500 (the Embeddings tab while it computes):
    every value axis writes plain numbers."""
    import pyqtgraph as pg

    from tests.explorer.conftest import open_window, show_model

    window = open_window(qtbot, settings, size=(1400, 900))

    def multipliers() -> list[str]:
        found = []
        for index in range(window.tabs.count()):
            window.tabs.setCurrentIndex(index)
            qtbot.wait(20)
            for view in window.findChildren(pg.GraphicsView):
                view.grab()  # ranges and labels as painted
                for item in view.scene().items():
                    if isinstance(item, pg.AxisItem) and item.isVisible() and "(x" in item.labelString():
                        found.append(f"{window.tabs.tabText(index)}: {item.labelString()}")
        return found

    assert multipliers() == []
    show_model(qtbot, window, tiny_model, tokenizer)
    assert multipliers() == []


@pytest.mark.parametrize("layout_name", ["PRETRAINING", "FINETUNING"])
def test_the_training_plots_keys_sit_above_their_curves_not_on_them(qtbot, layout_name):
    """Each key was drawn inside its plot's top right, over the curves there: a finished run's last steps of loss
    and an NSP accuracy reaching 1 ran under "total MLM NSP". Each now sits in a row of its own above the plot."""
    from bertcore.training.pretraining import StepStats
    from explorer.runs import curve_layout
    from explorer.runs._qt.loss_plots import LossPlots

    plots = LossPlots()
    qtbot.addWidget(plots)
    plots.set_layout(getattr(curve_layout, layout_name))
    plots.resize(900, 600)
    plots.show()
    plots.add(StepStats(step=1, total_steps=10, loss=3.0, mlm_loss=2.0, nsp_loss=1.0, mlm_accuracy=0.1,
                        nsp_accuracy=0.5, learning_rate=1e-4, grad_norm=1.0, tokens=8, tokens_per_second=1.0,
                        elapsed_seconds=0.1))
    qtbot.wait(50)
    keyed = [plot for plot in plots.plots if plot.legend.items]  # a key names only the curves that have values
    assert plots.loss_plot in keyed
    for plot in keyed:
        key = plot.legend.sceneBoundingRect()
        curves = plot.vb.sceneBoundingRect()
        assert key.height() > 0 and key.bottom() <= curves.top() + 1, (plot.getAxis("left").labelText, key, curves)
        assert key.right() <= curves.right() + 1
