"""PNG / SVG export of any widget without dialogs (the caller chooses the path), and the Export menus that ask."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QFileDialog, QMenu, QMessageBox, QToolButton, QWidget

from explorer.export_data import _replace_atomically


def export_png(widget: QWidget, path, scale: float = 2.0) -> Path:
    """Renders `widget` (as on screen, at `scale` x its pixel size, for print) into a PNG file."""
    size = widget.size()
    if size.isEmpty():
        raise ValueError(f"cannot export {widget.objectName() or type(widget).__name__}: it has no size yet")
    image = widget.grab().toImage() if scale == 1 else _render_scaled(widget, scale)

    def write(target: Path) -> None:
        if not image.save(str(target), "PNG"):
            raise OSError(f"Qt could not write a PNG to {target}")

    return _replace_atomically(Path(path), write)


def _render_scaled(widget: QWidget, scale: float):
    size = widget.size()
    image = QImage(QSize(round(size.width() * scale), round(size.height() * scale)), QImage.Format.Format_ARGB32)
    image.fill(widget.palette().window().color())
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        painter.scale(scale, scale)
        widget.render(painter, QPoint())
    finally:
        painter.end()
    return image


def export_svg(widget: QWidget, path, title: str = "bert-explorer attention") -> Path:
    """Renders `widget` into an SVG: axes, labels and lines as vectors, heatmaps as embedded images."""
    size = widget.size()
    if size.isEmpty():
        raise ValueError(f"cannot export {widget.objectName() or type(widget).__name__}: it has no size yet")

    def write(target: Path) -> None:
        generator = QSvgGenerator()
        generator.setFileName(str(target))
        generator.setSize(size)
        generator.setViewBox(QRect(0, 0, size.width(), size.height()))
        generator.setTitle(title)
        painter = QPainter()
        if not painter.begin(generator):
            raise OSError(f"Qt could not open {target} for SVG output")
        try:
            widget.render(painter, QPoint())
        finally:
            painter.end()

    return _replace_atomically(Path(path), write)


def ask_save_path(parent: QWidget, caption: str, suggested_name: str, file_filter: str) -> Path | None:
    """A save dialog; None when the user cancels."""
    path, _ = QFileDialog.getSaveFileName(parent, caption, suggested_name, file_filter)
    return Path(path) if path else None


FILE_FILTERS = {"png": "PNG image (*.png)", "svg": "SVG drawing (*.svg)", "csv": "CSV table (*.csv)",
                "npz": "NumPy arrays (*.npz)"}


def export_with_dialog(parent: QWidget, what: str, suggested_name: str, write: Callable[[Path], object]) -> Path | None:
    """Ask where to save `what` (the filter follows the suggested name's extension), then `write(path)`; a
    failure is a message box, never a traceback. The path written, or None."""
    path = ask_save_path(parent, f"Export {what}", suggested_name, FILE_FILTERS[Path(suggested_name).suffix[1:]])
    if path is None:
        return None
    try:
        write(path)
    except (OSError, ValueError) as error:
        QMessageBox.warning(parent, "Export failed", f"Could not export {what} to {path}:\n{error}")
        return None
    return path


def export_button(parent: QWidget, name: str, entries: list[tuple[str, str, Callable[[Path], object]]]) -> QToolButton:
    """An "Export" button whose menu has one entry per (menu text, suggested file name, write(path))."""
    button = QToolButton(parent)
    button.setObjectName(name)
    button.setAccessibleName("export")
    button.setText("Export")
    button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    menu = QMenu(button)
    for text, suggested_name, write in entries:
        what = text.rstrip("…")
        what = what[:1].lower() + what[1:]
        menu.addAction(text, lambda what=what, name=suggested_name, write=write:
                       export_with_dialog(parent, what, name, write))
    button.setMenu(menu)
    return button
