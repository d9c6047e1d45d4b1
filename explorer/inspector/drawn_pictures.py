"""The attention panel's pictures as last drawn ("layer", "detail", "overview", "rollout"), each kept with the key
of what it depends on (`attention_images.layer_key` …) and drawn again only when that key changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from explorer.inspector.attention_images import PanelPictures


class DrawnPictures:
    def __init__(self) -> None:
        self._pictures: dict[str, Any] = {}

    def reset(self, drawn: PanelPictures | None = None) -> None:
        """Forgets every picture, keeping those a worker drew for the next inspection (`drawn`) when given."""
        self._pictures = {} if drawn is None else {name: picture for name, picture in (
            ("layer", drawn.layer), ("detail", drawn.detail), ("overview", drawn.overview),
            ("rollout", drawn.rollout)) if picture is not None}

    def get(self, name: str, key: tuple, draw: Callable[[], Any]) -> Any:
        """The picture `name` as last drawn, or `draw()`n afresh (and kept) when its key is not `key`."""
        picture = self._pictures.get(name)
        if picture is None or picture.key != key:
            picture = self._pictures[name] = draw()
        return picture

    def outdated(self, name: str, key: tuple) -> bool:
        """Whether `name` was drawn, for another key than `key` (a picture never drawn is not outdated)."""
        picture = self._pictures.get(name)
        return picture is not None and picture.key != key

    def forget(self, name: str) -> None:
        self._pictures.pop(name, None)
