"""PNG / SVG export of any widget without dialogs (the caller chooses the path), the same picture put on the
clipboard, and the Export menus that ask.

What is exported is what the caller names: a view's plot, or several side by side as they sit on screen (the
head grid beside the head large), never the controls around them; whatever lies between two of them is left
blank. An export that takes seconds (a large NPZ) is named `WrittenInBackground(steps)`: the menus ask for its path,
then write it off the GUI thread with its progress and Cancel (`background_write.BackgroundWrite`). A menu's "Copy
picture" entry is `CopyPicture(picture)`: `picture()` renders what its PNG entry writes (`render_picture`), and the
image goes on the clipboard (`copy_picture`), where any other program can paste it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu, QMessageBox, QToolButton, QWidget

from explorer.common._qt.background_write import BackgroundWrite
from explorer.common.export_data import _replace_atomically


@dataclass(frozen=True)
class WrittenInBackground:
    """An export written off the GUI thread: `steps(path)` returns the generator of (fraction, what) that writes the
    file (`explorer.common.export_data.npz_writing`); called in the GUI thread, so what it captures is taken there."""

    steps: Callable[[Path], Iterator]


@dataclass(frozen=True)
class CopyPicture:
    """A menu entry that puts a picture on the clipboard: `picture()` returns the QImage (`render_picture` of what
    the view's PNG entry writes), or raises ValueError saying why there is none to copy."""

    picture: Callable[[], QImage]


def _placed(widgets: QWidget | Sequence[QWidget]) -> tuple[list[tuple[QWidget, QPoint]], QSize]:
    """Each widget with its offset in the rectangle that holds them all as they sit in their window, and that
    rectangle's size."""
    widgets = [widgets] if isinstance(widgets, QWidget) else list(widgets)
    for widget in widgets:
        if widget.size().isEmpty():
            raise ValueError(f"cannot export {widget.objectName() or type(widget).__name__}: it has no size yet")
    rects = [QRect(widget.mapTo(widget.window(), QPoint()), widget.size()) for widget in widgets]
    area = rects[0]
    for rect in rects[1:]:
        area = area.united(rect)
    return [(widget, rect.topLeft() - area.topLeft()) for widget, rect in zip(widgets, rects, strict=True)], area.size()


def _render(painter: QPainter, placed: list[tuple[QWidget, QPoint]]) -> None:
    for widget, offset in placed:
        painter.save()
        painter.translate(offset)
        QWidget.render(widget, painter, QPoint())  # as on screen (QGraphicsView.render would draw its scene)
        painter.restore()


def render_picture(widgets: QWidget | Sequence[QWidget], scale: float = 2.0) -> QImage:
    """A widget, or several where they sit beside each other, as on screen, at `scale` x their pixel size (for
    print): what `export_png` writes and `copy_picture` puts on the clipboard."""
    placed, size = _placed(widgets)
    image = QImage(QSize(round(size.width() * scale), round(size.height() * scale)), QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.white)  # the plots' own background, so the room between two of them is not a band
    painter = QPainter(image)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        painter.scale(scale, scale)
        _render(painter, placed)
    finally:
        painter.end()
    return image


def copy_picture(picture: QImage | QWidget | Sequence[QWidget]) -> QImage:
    """Put a picture (an image, or `render_picture` of widgets) on the clipboard; returns the image."""
    image = picture if isinstance(picture, QImage) else render_picture(picture)
    QApplication.clipboard().setImage(image)
    return image


def export_png(widgets: QWidget | Sequence[QWidget], path, scale: float = 2.0) -> Path:
    """Renders a widget, or several where they sit beside each other (as on screen, at `scale` x their pixel
    size, for print), into a PNG file."""
    image = render_picture(widgets, scale)

    def write(target: Path) -> None:
        if not image.save(str(target), "PNG"):
            raise OSError(f"Qt could not write a PNG to {target}")

    return _replace_atomically(Path(path), write)


def export_svg(widgets: QWidget | Sequence[QWidget], path, title: str = "bert-explorer attention") -> Path:
    """Renders a widget, or several where they sit beside each other, into an SVG: axes, labels and lines as
    vectors, heatmaps as embedded images."""
    placed, size = _placed(widgets)

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
            _render(painter, placed)
        finally:
            painter.end()

    return _replace_atomically(Path(path), write)


def ask_save_path(parent: QWidget, caption: str, suggested_name: str, file_filter: str) -> Path | None:
    """A save dialog; None when the user cancels."""
    path, _ = QFileDialog.getSaveFileName(parent, caption, suggested_name, file_filter)
    return Path(path) if path else None


FILE_FILTERS = {"png": "PNG image (*.png)", "svg": "SVG drawing (*.svg)", "csv": "CSV table (*.csv)",
                "npz": "NumPy arrays (*.npz)"}


def export_with_dialog(parent: QWidget, what: str, suggested_name: str,
                       write: Callable[[Path], object] | WrittenInBackground) -> Path | None:
    """Ask where to save `what` (the filter follows the suggested name's extension), then `write(path)` (or start
    writing it in the background, for a `WrittenInBackground`); a failure is a message box, never a traceback. The
    path written (or being written), or None."""
    path = ask_save_path(parent, f"Export {what}", suggested_name, FILE_FILTERS[Path(suggested_name).suffix[1:]])
    if path is None:
        return None
    if isinstance(write, WrittenInBackground):
        return path if write_in_background(parent, what, path, write) is not None else None
    try:
        write(path)
    except (OSError, ValueError) as error:
        QMessageBox.warning(parent, "Export failed", f"Could not export {what} to {path}:\n{error}")
        return None
    return path


def write_in_background(parent: QWidget, what: str, path: Path, write: WrittenInBackground) -> BackgroundWrite | None:
    """Start writing `what` to `path` off the GUI thread (the steps are made now, in the GUI thread, from what is
    shown now); None, with the reason in a message box, when there is nothing to write."""
    try:
        steps = write.steps(path)
    except (OSError, ValueError) as error:
        QMessageBox.warning(parent, "Export failed", f"Could not export {what} to {path}:\n{error}")
        return None
    return BackgroundWrite(parent, what, path, lambda: steps)


def copy_with_message(parent: QWidget, what: str, copy: CopyPicture) -> QImage | None:
    """A menu's "Copy picture": the picture on the clipboard; when there is none, a message box saying why."""
    try:
        return copy_picture(copy.picture())
    except ValueError as error:
        QMessageBox.warning(parent, "Nothing to copy", f"Could not copy {what}:\n{error}")
        return None


def export_button(parent: QWidget, name: str,
                  entries: list[tuple[str, str, Callable[[Path], object] | WrittenInBackground | CopyPicture]]
                  ) -> QToolButton:
    """An "Export" button whose menu has one entry per (menu text, suggested file name, write(path)); a
    `CopyPicture` entry (its file name unused) puts its picture on the clipboard instead."""
    button = QToolButton(parent)
    button.setObjectName(name)
    button.setAccessibleName("export")
    button.setText("Export")
    button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    menu = QMenu(button)
    for text, suggested_name, write in entries:
        what = text.rstrip("…")
        what = what[:1].lower() + what[1:]
        if isinstance(write, CopyPicture):
            menu.addAction(text, lambda copy=write: copy_with_message(parent, "the picture", copy))
            continue
        menu.addAction(text, lambda what=what, name=suggested_name, write=write:
                       export_with_dialog(parent, what, name, write))
    button.setMenu(menu)
    return button
