"""The attention panel's drawn pictures are kept per key: drawn again only when what they depend on changed."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.inspector.attention_images import PanelPictures
from explorer.inspector.drawn_pictures import DrawnPictures


@dataclass
class Picture:
    key: tuple


def test_a_picture_is_drawn_once_per_key():
    pictures, draws = DrawnPictures(), []

    def draw(key):
        draws.append(key)
        return Picture(key)

    first = pictures.get("detail", (0, 1), lambda: draw((0, 1)))
    assert pictures.get("detail", (0, 1), lambda: draw((0, 1))) is first
    assert pictures.get("detail", (0, 2), lambda: draw((0, 2))).key == (0, 2)
    assert draws == [(0, 1), (0, 2)]
    assert pictures.outdated("detail", (0, 1)) and not pictures.outdated("detail", (0, 2))
    assert not pictures.outdated("layer", (0,))  # never drawn: nothing to redraw
    pictures.forget("detail")
    assert not pictures.outdated("detail", (0, 1))


def test_reset_keeps_what_a_worker_drew_and_nothing_else():
    pictures = DrawnPictures()
    pictures.get("overview", ("old",), lambda: Picture(("old",)))
    layer, detail = Picture(("layer",)), Picture(("detail",))
    pictures.reset(PanelPictures(layer=layer, detail=detail, overview=None, rollout=None))
    assert pictures.get("layer", ("layer",), lambda: Picture(("again",))) is layer
    assert pictures.get("detail", ("detail",), lambda: Picture(("again",))) is detail
    assert not pictures.outdated("overview", ("new",))  # the old inspection's overview is gone
    pictures.reset()
    assert not pictures.outdated("layer", ("other",))
