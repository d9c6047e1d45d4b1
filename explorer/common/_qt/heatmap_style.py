"""How every attention heatmap looks: the colour map its pictures are drawn with, the colour bar that names
their scale, and the colours that mark the hovered token and the selected head."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QBrush, QColor, QPen
from PySide6.QtWidgets import QGraphicsRectItem

from explorer.common._qt.plot_style import CAPTION_STYLE, small_font
from explorer.common.attention_math import colour_gamma, describe_scale

COLOR_MAP_NAME = "viridis"
DIVERGING_MAP_NAME = "CET-D9"  # blue · white · red: a difference, white at 0, the sign in the hue
HIGHLIGHT_BRUSH = QColor(255, 255, 255, 70)
HIGHLIGHT_PEN = QColor(255, 80, 80, 220)
SELECTED_PEN = QColor(255, 140, 0)
ABLATED_OPACITY = 0.18


def color_map() -> pg.ColorMap:
    return pg.colormap.get(COLOR_MAP_NAME)


@lru_cache(maxsize=1)
def colour_lookup() -> np.ndarray:
    """(256, 4) uint8: the colour table every attention picture is drawn with."""
    return np.ascontiguousarray(color_map().getLookupTable(nPts=256, alpha=True), dtype=np.uint8)


@lru_cache(maxsize=1)
def diverging_color_map() -> pg.ColorMap:
    return pg.colormap.get(DIVERGING_MAP_NAME)


@lru_cache(maxsize=1)
def diverging_lookup() -> np.ndarray:
    """(255, 4) uint8: the colour table of a signed difference drawn over symmetric levels (−m … m); an odd count,
    so that 0 falls exactly on the middle (white) entry rather than rounding to the red side."""
    return np.ascontiguousarray(diverging_color_map().getLookupTable(nPts=255, alpha=True), dtype=np.uint8)


@lru_cache(maxsize=8)
def scale_color_map(gamma: float) -> pg.ColorMap:
    """The colour map as a colour bar over linear values must show it: fraction f has the colour at f**gamma."""
    if gamma == 1.0:
        return color_map()
    stops = np.linspace(0.0, 1.0, 65)
    colours = color_map().map(stops, mode="byte")
    return pg.ColorMap(stops ** (1.0 / gamma), colours)


def make_scale_bar() -> pg.ColorBarItem:
    """A colour bar that only shows the scale (the views colour their pictures themselves)."""
    bar = pg.ColorBarItem(values=(0, 1), colorMap=color_map(), interactive=False, width=12)
    bar.axis.setStyle(hideOverlappingLabels=8, tickFont=small_font())  # end labels may poke out 8 px
    bar.axis.setWidth(46)
    bar.getAxis("left").setWidth(16)
    for name in ("left", "right", "top", "bottom"):
        # no units to scale: left on, each new level range rewrites the label's HTML and re-lays the bar out
        bar.getAxis(name).enableAutoSIPrefix(False)
    return bar


def show_scale(bar: pg.ColorBarItem, scale: str, levels: tuple[float, float]) -> None:
    """Point `bar` at `levels` drawn through `scale` (its colours, its range and its name, on the bar)."""
    _point_bar(bar, scale_color_map(colour_gamma(scale)), levels, describe_scale(scale, levels))


def show_difference_scale(bar: pg.ColorBarItem, levels: tuple[float, float], label: str) -> None:
    """Point `bar` at a signed difference over symmetric `levels`, drawn with the diverging map."""
    _point_bar(bar, diverging_color_map(), levels, label)


def _point_bar(bar: pg.ColorBarItem, color_map: pg.ColorMap, levels: tuple[float, float], label: str) -> None:
    """Only what changed is redone: a new colour map rebuilds the bar's pixmap, a new label re-lays its text."""
    if bar.colorMap() is not color_map:
        bar.setColorMap(color_map)
    if tuple(bar.levels()) != tuple(levels):
        bar.setLevels(levels)
    axis = bar.getAxis("left")
    if axis.labelText != label:
        axis.setLabel(label, **CAPTION_STYLE)


def insert_scale_bar(plot: pg.PlotItem, bar: pg.ColorBarItem) -> None:
    plot.layout.addItem(bar, 2, 5)  # beside the plot's right axis, as ColorBarItem's insert_in does
    plot.layout.setColumnFixedWidth(4, 5)


def highlight_band(parent_view: pg.ViewBox) -> QGraphicsRectItem:
    """A translucent band over a row or column of `parent_view` (hidden until placed), for the hovered token."""
    band = QGraphicsRectItem()
    band.setBrush(QBrush(HIGHLIGHT_BRUSH))
    pen = QPen(HIGHLIGHT_PEN)
    pen.setCosmetic(True)
    pen.setWidthF(1.2)
    band.setPen(pen)
    band.setZValue(10)
    band.setVisible(False)
    parent_view.addItem(band, ignoreBounds=True)
    return band
