"""How every plot in the explorer looks: black ink on a white canvas, small legends, and the pens its curves are
drawn with. Each view calls these instead of repeating the setup, so that a plot added later looks like the rest
(and a change of house style is one edit here).

The heatmaps' colour maps and colour bars are `heatmap_style`'s; it takes its font and caption style from here.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QPen
from PySide6.QtWidgets import QGraphicsView

BACKGROUND = "w"
# Axes, tick labels, axis names, titles and legend text. pyqtgraph's default foreground is a mid grey meant for
# its black canvas: on white it reads faint.
INK = "k"
END_LABEL_OVERHANG_PX = 12  # how far a bottom axis' end label may reach past the axis
TITLE_SIZE = "10pt"
SMALL_TEXT = "8pt"  # legends and colour-bar names: they sit inside or beside a plot and must not crowd it
SMALL_POINTS = 8
CAPTION_STYLE = {"font-size": SMALL_TEXT, "color": "#444"}  # a colour bar's name: quieter than its ticks


def small_font() -> QFont:
    """The 8-point font of tick labels on colour bars."""
    font = QFont()  # (QFont("", 8) crashes PySide6 6.11 when an axis measures its text)
    font.setPointSize(SMALL_POINTS)
    return font


def style_canvas(canvas: pg.GraphicsView) -> None:
    """A white canvas: a `pg.GraphicsLayoutWidget` or a `pg.PlotWidget`, repainted over one rectangle.

    pyqtgraph asks Qt for a minimal repaint: the exact region its changed items cover. When a keystroke changes a
    head grid's twelve pictures, frames and labels, that region is dozens of rectangles, and painting through such
    a clip costs the raster engine several times the drawing itself (1.8 ms for the grid where its bounding rectangle
    takes 0.5). One rectangle around whatever changed is drawn at the cost of the drawing.
    """
    canvas.setBackground(BACKGROUND)
    canvas.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.BoundingRectViewportUpdate)


def style_plot(plot: pg.PlotItem, *, x_label: str | None = None, y_label: str | None = None,
               mouse: bool = True, menu: bool = False, auto_range_button: bool = False) -> pg.PlotItem:
    """Black left and bottom axes (custom axis items such as `TokenAxis` included) named `x_label` and `y_label`.

    mouse: the user may pan and zoom (False for plots whose range the data decides and clicks select).
    menu: pyqtgraph's right-click menu (export, axis ranges): off by default, since most views use the right
    button themselves or have an Export menu of their own.
    auto_range_button: the small "A" button that zooms back out; a view with its own "View all" hides it.
    """
    for name, label in (("bottom", x_label), ("left", y_label)):
        axis = plot.getAxis(name)
        axis.setPen(INK)
        axis.setTextPen(INK)  # also the colour of the axis name
        # plain numbers: an SI prefix made an empty view's axis read "position (x0.001)" over ticks of -500 … 500
        axis.enableAutoSIPrefix(False)
        if label is not None:
            plot.setLabel(name, label)
    for name in ("top", "right"):
        # hidden, yet pyqtgraph rewrites their (never shown) label's HTML on each new range when SI prefixes are on:
        # twice a keystroke in the head detail
        plot.getAxis(name).enableAutoSIPrefix(False)
    # pyqtgraph hides a bottom label that pokes past the axis' end at all: the last tick (a pruning curve's 100 %)
    # would go unnamed; half a short number may stand out into the margin
    plot.getAxis("bottom").setStyle(hideOverlappingLabels=END_LABEL_OVERHANG_PX)
    plot.setMouseEnabled(mouse, mouse)
    plot.setMenuEnabled(menu)
    if not auto_range_button:
        plot.hideButtons()
    return plot


def clear_curve(curve: pg.PlotCurveItem) -> None:
    """Empties a curve that holds points; an empty one is left alone (setData([], []) costs a relayout and a
    repaint even then, and the marks over a heatmap are cleared on every keystroke)."""
    if curve.xData is not None and len(curve.xData):
        curve.setData([], [])


class OverflowingTitle(pg.LabelItem):
    """A plot title that asks for its text's width but makes do with less. pyqtgraph's title holds its plot at
    least as wide as its text: a square heatmap under a longer title sat off-centre in a wide view, and a canvas of
    several such plots grew wider than itself (its colour bar drawn past the edge). Centred while it fits; wider
    than its column, it ends at the column's right end and runs out to the left, over the corner above the left
    axis, clear of what stands to the right (a colour bar)."""

    def updateMin(self) -> None:
        super().updateMin()
        self.setMinimumWidth(0)
        self._sizeHint[Qt.SizeHint.MinimumSize] = (0, self._sizeHint[Qt.SizeHint.MinimumSize][1])
        self.updateGeometry()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)  # centred
        text, room = self.itemRect(), self.rect()
        if text.width() > room.width():
            self.item.moveBy(room.right() - text.right(), 0)


def let_title_overflow(plot: pg.PlotItem) -> None:
    """Give `plot` an `OverflowingTitle` in place of its own title, in the same cell (before any title is set)."""
    own = plot.titleLabel
    plot.layout.removeItem(own)
    own.setParentItem(None)
    if own.scene() is not None:
        own.scene().removeItem(own)
    plot.titleLabel = OverflowingTitle("", size=TITLE_SIZE, parent=plot)
    plot.layout.addItem(plot.titleLabel, 0, 1)
    plot.setTitle(None)  # hidden, as a new plot's is


def show_title(plot: pg.PlotItem, title: str) -> None:
    label = plot.titleLabel
    shown = label.isVisible() and label.text == title
    if shown and (label.opts.get("size"), label.opts.get("color")) == (TITLE_SIZE, INK):
        return  # the same words: set again, pyqtgraph rewrites the HTML and re-lays the label out (each keystroke)
    plot.setTitle(title, size=TITLE_SIZE, color=INK)


def add_legend(plot: pg.PlotItem, offset: tuple[float, float], *, columns: int = 1,
               backdrop: bool = False) -> pg.LegendItem:
    """A legend in the house's small black text at `offset` (pyqtgraph's sign convention: negative x from the
    right edge). backdrop: a near-opaque white box, for a legend that sits over curves it must stay readable on."""
    brush = pg.mkBrush(255, 255, 255, 220) if backdrop else None
    return plot.addLegend(offset=offset, labelTextSize=SMALL_TEXT, labelTextColor=INK, colCount=columns,
                          brush=brush)


def curve_pen(colour, *, width: float = 1.0, dashed: bool = False, dotted: bool = False) -> QPen:
    """The pen of a curve or a marker line: `colour` as pyqtgraph takes it (a name, "#rrggbb", a tuple, a
    QColor), `width` in pixels whatever the zoom."""
    if dashed and dotted:
        raise ValueError("curve_pen: a pen is dashed or dotted, not both; pass one of dashed=True, dotted=True")
    style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.DotLine if dotted else Qt.PenStyle.SolidLine
    return pg.mkPen(colour, width=width, style=style)
