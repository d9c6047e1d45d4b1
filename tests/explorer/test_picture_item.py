"""PictureItem: a coloured picture shown over a rectangle of a view, exactly its colours, nearest-pixel."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QGraphicsScene

from explorer.common._qt.picture_item import PictureItem


def rendered(item: PictureItem, scene_rect: QRectF, size: int) -> QImage:
    """The scene `scene_rect` drawn into a size × size image."""
    scene = QGraphicsScene()
    scene.addItem(item)
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(QColor("black"))
    painter = QPainter(image)
    scene.render(painter, QRectF(0, 0, size, size), scene_rect)
    painter.end()
    scene.removeItem(item)
    return image


def test_each_pixel_keeps_its_colour_and_fills_its_share_of_the_rectangle(qapp):
    picture = np.zeros((2, 2, 4), np.uint8)
    picture[..., 3] = 255
    picture[0, 0, :3] = (255, 0, 0)  # red top left: channel order must survive the conversion
    picture[0, 1, :3] = (0, 255, 0)
    picture[1, 0, :3] = (0, 0, 255)
    picture[1, 1, :3] = (10, 200, 90)
    item = PictureItem()
    item.set_picture(picture, QRectF(2, 2, 4, 4))  # two units a pixel, two units in from the origin
    assert item.mapRectToParent(item.boundingRect()) == QRectF(2, 2, 4, 4)
    image = rendered(item, QRectF(0, 0, 8, 8), 80)  # ten image pixels a unit
    assert image.pixelColor(10, 10) == QColor("black")  # outside the rectangle
    assert image.pixelColor(25, 25).getRgb() == (255, 0, 0, 255)
    assert image.pixelColor(55, 25).getRgb() == (0, 255, 0, 255)
    assert image.pixelColor(25, 55).getRgb() == (0, 0, 255, 255)
    assert image.pixelColor(55, 55).getRgb() == (10, 200, 90, 255)
    assert image.pixelColor(39, 25).getRgb() == (255, 0, 0, 255)  # nearest pixel: no blend at the edge
    assert image.pixelColor(41, 25).getRgb() == (0, 255, 0, 255)


def test_a_new_picture_of_another_resolution_fills_the_same_rectangle(qapp):
    item = PictureItem()
    item.set_picture(np.full((3, 3, 4), 255, np.uint8), QRectF(0, 0, 1, 1))
    item.set_picture(np.full((17, 17, 4), 255, np.uint8))
    assert item.mapRectToParent(item.boundingRect()) == QRectF(0, 0, 1, 1)
    assert item.image.shape == (17, 17, 4)


def test_the_array_may_change_after_it_was_shown(qapp):
    picture = np.full((1, 1, 4), 255, np.uint8)
    item = PictureItem()
    item.set_picture(picture, QRectF(0, 0, 1, 1))
    picture[...] = 0  # the caller reuses its buffer
    assert rendered(item, QRectF(0, 0, 1, 1), 4).pixelColor(2, 2).getRgb() == (255, 255, 255, 255)


def test_an_empty_picture_shows_nothing_and_a_wrong_shape_is_named(qapp):
    item = PictureItem()
    item.set_picture(np.full((2, 2, 4), 255, np.uint8), QRectF(0, 0, 1, 1))
    item.set_picture(np.zeros((0, 0, 4), np.uint8))
    assert item.image is None and item.pixmap().isNull()
    with pytest.raises(ValueError, match=r"\(height, width, 4\) RGBA, got shape \(2, 2\)"):
        item.set_picture(np.zeros((2, 2), np.uint8))
