"""The models opened lately (Model ▸ Open recent), newest first, Qt-free: the list, how an entry is named, and
whether it can still be opened. The window keeps the list in QSettings (as JSON text) and builds the menu from it.

An entry is the folder that loaded (a Hub repo id opened from the cache is remembered by its snapshot folder, as
"the checkpoint opened last time" is, and named by its repo id) with the name the window showed. Opening a model
again moves it to the top; the list keeps `MAX_RECENT`. An entry whose folder is gone, or no longer holds a
config.json, stays listed, greyed, with the reason (a disk not mounted now may be back later); Clear empties the list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

MAX_RECENT = 8


@dataclass(frozen=True)
class RecentModel:
    path: str  # the folder that loaded, absolute
    name: str  # as the window named it ("all-MiniLM-L6-v2", "org/name", "mood/final")

    def problem(self) -> str | None:
        """Why it cannot be opened now (in words), or None."""
        folder = Path(self.path)
        if not folder.exists():
            return f"{self.path} is no longer there"
        if not folder.is_dir():
            return f"{self.path} is not a folder any more"
        if not (folder / "config.json").is_file():
            return f"{self.path} no longer holds a config.json"
        return None


def remembered(models: list[RecentModel], path: str, name: str) -> list[RecentModel]:
    """The list with (`path`, `name`) first: moved there if it was listed, the oldest dropped past MAX_RECENT."""
    entry = RecentModel(str(path), name or Path(path).name)
    return [entry, *(model for model in models if model.path != entry.path)][:MAX_RECENT]


def menu_labels(models: list[RecentModel]) -> list[str]:
    """Each entry's text: its name, and the folder's parent where two entries share a name."""
    counts: dict[str, int] = {}
    for model in models:
        counts[model.name] = counts.get(model.name, 0) + 1
    return [model.name if counts[model.name] == 1 else f"{model.name} ({Path(model.path).parent})"
            for model in models]


def to_text(models: list[RecentModel]) -> str:
    return json.dumps([{"path": model.path, "name": model.name} for model in models])


def from_text(text: object) -> list[RecentModel]:
    """The list as QSettings held it; what does not read as one (another version's value, a hand edit) is left out."""
    if not isinstance(text, str) or not text:
        return []
    try:
        items = json.loads(text)
    except ValueError:
        return []
    if not isinstance(items, list):
        return []
    models = [RecentModel(item["path"], str(item.get("name") or Path(item["path"]).name)) for item in items
              if isinstance(item, dict) and isinstance(item.get("path"), str) and item["path"]]
    return models[:MAX_RECENT]
