"""A finished picture (an RGBA array, coloured off the GUI thread) laid over a rectangle of a view and painted by Qt
alone.

pyqtgraph's ImageItem hands Qt its RGBA array as an RGBA8888 image, which the raster engine converts pixel by pixel
on every paint, under a Python paint call: ~0.1 ms a thumbnail, 1.4 ms for a 12-head grid, on every keystroke.
Our pictures are coloured already, so this item converts each one once, when it arrives, into a pixmap in the
screen's own format, which Qt then copies nearest-pixel (cells keep their edges) without calling into Python:
~0.02 ms a thumbnail.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QImage, QPixmap, QTransform
from PySide6.QtWidgets import QGraphicsItem, QGraphicsPixmapItem


class PictureItem(QGraphicsPixmapItem):
    """An (h, w, 4) uint8 RGBA picture stretched over `rect` (item coordinates of its parent: a view's data
    units). `image` is the array shown, None when nothing is."""

    def __init__(self, parent: QGraphicsItem | None = None):
        super().__init__(parent)
        self.image: np.ndarray | None = None
        self.rect = QRectF(0, 0, 1, 1)
        self.setShapeMode(QGraphicsPixmapItem.ShapeMode.BoundingRectShape)
        self.setTransformationMode(Qt.TransformationMode.FastTransformation)

    def set_picture(self, rgba: np.ndarray, rect: QRectF | None = None) -> None:
        """Shows `rgba` (over `rect`, or the rectangle it was last given)."""
        if rect is not None:
            self.rect = QRectF(rect)
        rgba = np.ascontiguousarray(rgba, np.uint8)
        if rgba.size == 0:  # nothing to show (an empty input)
            self.clear()
            return
        if rgba.ndim != 3 or rgba.shape[2] != 4:
            raise ValueError(f"a picture is (height, width, 4) RGBA, got shape {rgba.shape}")
        height, width = rgba.shape[:2]
        # fromImage converts (and so copies) now: the array may change or go once this returns
        self.setPixmap(QPixmap.fromImage(QImage(rgba.data, width, height, 4 * width, QImage.Format.Format_RGBA8888)))
        self.image = rgba
        self.set_rect(self.rect)

    def set_rect(self, rect: QRectF) -> None:
        self.rect = QRectF(rect)
        if self.image is not None:
            height, width = self.image.shape[:2]
            self.setTransform(QTransform.fromTranslate(self.rect.x(), self.rect.y())
                              .scale(self.rect.width() / width, self.rect.height() / height))

    def clear(self) -> None:
        self.image = None
        self.setPixmap(QPixmap())
