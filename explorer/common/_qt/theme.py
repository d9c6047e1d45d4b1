"""One light palette for the whole window, whatever the desktop's theme.

Every view here is drawn for light: black ink on white plots and heatmaps (plot_style), pastel token cells with dark
text, message boxes in pale red and yellow, hints in grey. A dark desktop theme hands Qt a dark palette, and the
widgets that follow it met the ones drawn for light: white text on pastel cells, white plots in a dark window, dark
grey hints on dark grey. Rather than a second set of colours for every view, the app asks for the light colour
scheme (Qt ≥ 6.8; native styles that know one switch to it) and, where the palette is still dark, runs Fusion with
its standard light palette: one consistent, readable palette everywhere, plots included, tooltips and dialogs too.
`use_light_palette` is called before anything is shown (explorer.app) and by the main window (scripts and tests that
build it directly).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

LIGHT_STYLE = "Fusion"  # draws every control from the palette, on every platform


def is_dark(palette: QPalette) -> bool:
    """A palette whose windows are darker than their text: what a dark desktop theme gives."""
    window = palette.color(QPalette.ColorRole.Window)
    text = palette.color(QPalette.ColorRole.WindowText)
    return window.lightness() < text.lightness()


def use_light_palette(app: QApplication | None = None) -> bool:
    """Make the application's palette light, if it is not; True when it had to switch to Fusion's light palette."""
    app = app or QApplication.instance()
    if app is None:
        return False
    hints = app.styleHints()
    if hasattr(hints, "setColorScheme"):  # Qt 6.8: ask the platform theme for its light scheme
        hints.setColorScheme(Qt.ColorScheme.Light)
    if not is_dark(app.palette()):
        return False
    style = QStyleFactory.create(LIGHT_STYLE)
    app.setStyle(style)
    app.setPalette(style.standardPalette())
    return True
