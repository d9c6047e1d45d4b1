"""Under a dark desktop theme (a dark palette handed to the application, as a dark theme does) every tab stays
readable: text on its own background keeps a contrast a reader can read (it was white text on pastel token cells,
white plots in a dark window and dark grey hints on dark), measured on the pixels drawn."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QLineEdit, QTableView, QWidget

from tests.explorer.conftest import open_window, show_model

MIN_CONTRAST = 3.0  # WCAG's least for large text; a label's text against its own background, anti-aliasing aside
DARK = {QPalette.ColorRole.Window: "#2d2d2d", QPalette.ColorRole.WindowText: "#eeeeee",
        QPalette.ColorRole.Base: "#1e1e1e", QPalette.ColorRole.AlternateBase: "#2a2a2a",
        QPalette.ColorRole.Text: "#eeeeee", QPalette.ColorRole.Button: "#353535",
        QPalette.ColorRole.ButtonText: "#eeeeee", QPalette.ColorRole.ToolTipBase: "#3a3a3a",
        QPalette.ColorRole.ToolTipText: "#eeeeee", QPalette.ColorRole.Highlight: "#2a82da",
        QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.PlaceholderText: "#9a9a9a",
        QPalette.ColorRole.Mid: "#202020", QPalette.ColorRole.Dark: "#191919", QPalette.ColorRole.Light: "#505050",
        QPalette.ColorRole.Midlight: "#404040"}


def dark_palette() -> QPalette:
    palette = QPalette()
    for role, colour in DARK.items():
        palette.setColor(role, QColor(colour))
    return palette


@pytest.fixture
def dark_desktop(qapp):
    """The application as a dark desktop theme starts it; put back as it was afterwards."""
    style, palette = qapp.style().name(), QPalette(qapp.palette())
    qapp.setPalette(dark_palette())
    yield qapp
    qapp.setStyle(style)
    qapp.setPalette(palette)


def luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG relative luminance of (..., 3) uint8 colours."""
    channels = rgb.astype(np.float64) / 255.0
    linear = np.where(channels <= 0.03928, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def pixels(widget: QWidget, rect=None) -> np.ndarray:
    image = (widget.grab(rect) if rect is not None else widget.grab()).toImage().convertToFormat(
        widget.grab().toImage().Format.Format_RGB888)
    array = np.frombuffer(image.constBits(), np.uint8)
    return array.reshape(image.height(), image.bytesPerLine())[:, :image.width() * 3].reshape(-1, 3)


def text_contrast(rgb: np.ndarray) -> float:
    """The contrast of the ink against the background of a piece of text drawn: the background is its median
    luminance (text covers a minority of a label's or a button's pixels; a button's face is a gradient), the ink the
    pixel furthest from it (the core of a glyph)."""
    values = luminance(rgb)
    background = float(np.median(values))
    ink = values[np.abs(values - background).argmax()]
    light, dark = max(background, ink), min(background, ink)
    return (light + 0.05) / (dark + 0.05)


def unreadable(window) -> list[str]:
    """Every visible text of the current tab, the menus' bar and the status bar that is too faint to read."""
    problems = []
    for widget in window.findChildren(QWidget):
        if not widget.isVisible() or not widget.isEnabled() or widget.width() < 4 or widget.height() < 4:
            continue  # (a disabled control is faint on purpose)
        if isinstance(widget, QLabel) and widget.text().strip() and widget.pixmap().isNull():
            text = widget.text()
        elif isinstance(widget, (QAbstractButton, QLineEdit)) and widget.text().strip():
            text = widget.text()
        else:
            continue
        contrast = text_contrast(pixels(widget))
        if contrast < MIN_CONTRAST:
            problems.append(f"{widget.objectName() or type(widget).__name__} {text[:50]!r}: {contrast:.2f}")
    for table in window.findChildren(QTableView):
        if not table.isVisible():
            continue
        model = table.model()
        for row in range(min(model.rowCount(), 6)):
            for column in range(min(model.columnCount(), 12)):
                index = model.index(row, column)
                rect = table.visualRect(index)
                if model.data(index) and rect.isValid() and table.viewport().rect().contains(rect):
                    contrast = text_contrast(pixels(table.viewport(), rect.adjusted(1, 1, -1, -1)))
                    if contrast < MIN_CONTRAST:
                        problems.append(f"{table.objectName()} cell {row},{column} {model.data(index)!r}: "
                                        f"{contrast:.2f}")
    return problems


@pytest.mark.slow
def test_every_tab_is_readable_under_a_dark_desktop_theme(qtbot, dark_desktop, settings, tiny_model, tokenizer):
    window = open_window(qtbot, settings, size=(1400, 900))
    show_model(qtbot, window, tiny_model, tokenizer)
    with qtbot.waitSignal(window.inspectionShown, timeout=10_000):
        window.inspect_pair("the king is dead long live the king", "his son shall wear the crown")
    window.inspect_tab.mask_like_bert(seed=1)
    qtbot.wait(300)
    palette = QApplication.instance().palette()
    assert palette.color(QPalette.ColorRole.Window).lightness() > palette.color(
        QPalette.ColorRole.WindowText).lightness(), "the window kept the dark palette its plots are not drawn for"
    problems = {}
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        qtbot.wait(200)
        found = unreadable(window)
        if found:
            problems[window.tabs.tabText(index)] = found
    assert problems == {}
