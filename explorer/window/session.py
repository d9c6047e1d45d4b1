"""A session: what the window shows, saved as a `.bertx` file (plain JSON, with a format name and a version) and
opened again later, Qt-free. File ▸ Save session… and Open session… (explorer.window._qt.main_window) fill and apply
it.

It holds the model (its checkpoint folder; the Hub repo id of a cached snapshot, by which the cache finds it again
should the folder be gone; or the preset of an untrained model, seeded, hence the same weights), the typed pair
(sentence A and B), the tab shown, the attention views' layer and head and the zoom of the head view, and the Runs
tab as it was (`explorer.runs.workbench.state.RunsView`: the folders added, the runs ticked, smoothing, x axis, log
axes, outlier range, filters).

    {"format": "bert-explorer session", "version": 1, "saved": "2025-01-31T10:00:00+0100",
     "model": {"name": "all-MiniLM-L6-v2", "path": "/…/model", "repo_id": null, "untrained_preset": null},
     "input": {"sentence_a": "The cat sat.", "sentence_b": ""},
     "tab": "Inspect", "attention": {"layer": 2, "head": 5, "zoom": [[0.0, 12.0], [0.0, 12.0]]},
     "runs": {"folders": […], "ticked": […], "smoothing": 0.6, "axis": "step", "log_x": false, "log_y": false,
              "ignore_outliers": true, "shared_only": false, "run_filter": "", "metric_filter": ""}}

Reading is strict about what it can use and lenient about the rest: a file that is not JSON, not a session, or of a
newer version is a `SessionError` naming the file and what is wrong; a field of the wrong type is left at its
default and named in `Session.notes`, so the rest still opens. What is missing on this machine (a model folder, a
run folder) is for the window to find and say (`missing_folders`), never a reason to refuse the rest.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bertcore.files.atomic import write_text_atomic
from bertcore.files.reading import open_regular_file
from explorer.runs.workbench.overlay import X_AXES
from explorer.runs.workbench.state import DEFAULT_SMOOTHING, MAX_SMOOTHING, RunsView

FORMAT = "bert-explorer session"
VERSION = 1
SUFFIX = ".bertx"
FILE_FILTER = f"bert-explorer session (*{SUFFIX})"
LARGEST_SESSION = 16 << 20  # bytes; a session is a few KB even with hundreds of runs


class SessionError(ValueError):
    """A .bertx file that cannot be opened as a session; the message names the file and why."""


@dataclass(frozen=True)
class ModelRef:
    """Which model a session shows: a checkpoint folder (absolute), the repo id of a cached snapshot, or the preset
    of an untrained model; `name` as the window named it."""

    name: str = ""
    path: str | None = None
    repo_id: str | None = None
    untrained_preset: str | None = None

    def words(self) -> str:
        return self.repo_id or self.path or (f"a new untrained {self.untrained_preset}" if self.untrained_preset
                                             else self.name or "no model")


@dataclass(frozen=True)
class Session:
    model: ModelRef | None = None
    sentence_a: str = ""
    sentence_b: str = ""
    tab: str = "Inspect"
    layer: int = 0
    head: int = 0
    zoom: tuple[tuple[float, float], tuple[float, float]] | None = None  # the head view's (x, y) ranges
    runs: RunsView = field(default_factory=RunsView)
    notes: tuple[str, ...] = ()  # what reading left out (a field of the wrong kind), for the window to say

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION, "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "model": None if self.model is None else {item.name: getattr(self.model, item.name)
                                                      for item in fields(ModelRef)},
            "input": {"sentence_a": self.sentence_a, "sentence_b": self.sentence_b},
            "tab": self.tab,
            "attention": {"layer": self.layer, "head": self.head,
                          "zoom": None if self.zoom is None else [list(self.zoom[0]), list(self.zoom[1])]},
            "runs": {item.name: list(value) if isinstance(value := getattr(self.runs, item.name), tuple) else value
                     for item in fields(RunsView)},
        }

    def missing_folders(self) -> list[str]:
        """The run folders this session names that are not folders here (the model is the loader's to find)."""
        named = dict.fromkeys([*self.runs.folders, *self.runs.ticked])
        return [folder for folder in named if not Path(folder).is_dir()]


def save_session(session: Session, path: str | Path) -> Path:
    """Write `session` to `path` (a .bertx file; the suffix is added when missing), atomically."""
    path = Path(path)
    if path.suffix != SUFFIX:
        path = path.with_name(path.name + SUFFIX)
    return write_text_atomic(path, json.dumps(session.to_json(), indent=2, ensure_ascii=False) + "\n")


def read_session(path: str | Path) -> Session:
    """The session in a .bertx file; SessionError when it is not one (see the module docstring)."""
    path = Path(path)
    try:
        with open_regular_file(path, error=SessionError, label="the session file") as file:
            data = file.read(LARGEST_SESSION + 1)
    except FileNotFoundError:
        raise SessionError(f"{path} does not exist") from None
    if len(data) > LARGEST_SESSION:
        raise SessionError(f"{path} is over {LARGEST_SESSION >> 20} MB; a bert-explorer session is a few KB")
    try:
        values = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise SessionError(f"{path} is not a bert-explorer session: it is not JSON ({error})") from None
    if not isinstance(values, dict) or values.get("format") != FORMAT:
        raise SessionError(f"{path} is not a bert-explorer session (no \"format\": \"{FORMAT}\" in it)")
    version = values.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SessionError(f"{path} has no version number; it is not a session this bert-explorer wrote")
    if version > VERSION:
        raise SessionError(f"{path} is a version {version} session, written by a newer bert-explorer; this one reads "
                           f"version {VERSION}. Update bert-explorer to open it")
    return _session_of(values)


class _Reader:
    """Fields of a session's JSON, each checked for its kind; what does not fit is noted and left at its default."""

    def __init__(self):
        self.notes: list[str] = []

    def get(self, where: dict, key: str, kinds: tuple[type, ...], default: Any, label: str) -> Any:
        if not isinstance(where, dict) or key not in where or (where[key] is None and default is None):
            return default
        value = where[key]
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            self.notes.append(f"{label} is {json.dumps(value)[:60]}, not a {'/'.join(k.__name__ for k in kinds)}; "
                              "left as it was")
            return default
        return value

    def section(self, values: dict, key: str) -> dict:
        section = values.get(key)
        if section is None:
            return {}
        if not isinstance(section, dict):
            self.notes.append(f"\"{key}\" is not a JSON object; left as it was")
            return {}
        return section

    def strings(self, where: dict, key: str, label: str) -> tuple[str, ...]:
        items = self.get(where, key, (list,), [], label)
        kept = tuple(item for item in items if isinstance(item, str) and item)
        if len(kept) != len(items):
            self.notes.append(f"{label}: {len(items) - len(kept)} item(s) that are not folder names left out")
        return kept


def _session_of(values: dict) -> Session:
    read = _Reader()
    model = None
    model_values = read.section(values, "model")
    if model_values:
        model = ModelRef(name=read.get(model_values, "name", (str,), "", "the model's name"),
                         path=read.get(model_values, "path", (str,), None, "the model's folder") or None,
                         repo_id=read.get(model_values, "repo_id", (str,), None, "the model's repo id") or None,
                         untrained_preset=read.get(model_values, "untrained_preset", (str,), None,
                                                   "the untrained model's preset") or None)
        if not (model.path or model.repo_id or model.untrained_preset):
            model = None
    text = read.section(values, "input")
    attention = read.section(values, "attention")
    runs = read.section(values, "runs")
    smoothing = read.get(runs, "smoothing", (int, float), DEFAULT_SMOOTHING, "the smoothing")
    if not (math.isfinite(smoothing) and 0 <= smoothing <= MAX_SMOOTHING):
        read.notes.append(f"the smoothing is {smoothing}, outside 0 … {MAX_SMOOTHING}; left as it was")
        smoothing = DEFAULT_SMOOTHING
    axis = read.get(runs, "axis", (str,), "step", "the x axis")
    if axis not in X_AXES:
        read.notes.append(f"the x axis {axis!r} is none of {', '.join(X_AXES)}; left as it was")
        axis = "step"
    return Session(
        model=model,
        sentence_a=read.get(text, "sentence_a", (str,), "", "sentence A"),
        sentence_b=read.get(text, "sentence_b", (str,), "", "sentence B"),
        tab=read.get(values, "tab", (str,), "Inspect", "the tab"),
        layer=max(0, read.get(attention, "layer", (int,), 0, "the layer")),
        head=max(0, read.get(attention, "head", (int,), 0, "the head")),
        zoom=_zoom(read.get(attention, "zoom", (list,), None, "the head view's zoom"), read),
        runs=RunsView(
            folders=read.strings(runs, "folders", "the run folders"),
            ticked=read.strings(runs, "ticked", "the runs ticked"),
            smoothing=float(smoothing), axis=axis,
            log_x=read.get(runs, "log_x", (bool,), False, "log x"),
            log_y=read.get(runs, "log_y", (bool,), False, "log y"),
            ignore_outliers=read.get(runs, "ignore_outliers", (bool,), True, "ignore outliers"),
            shared_only=read.get(runs, "shared_only", (bool,), False, "shared only"),
            run_filter=read.get(runs, "run_filter", (str,), "", "the run filter"),
            metric_filter=read.get(runs, "metric_filter", (str,), "", "the metric filter")),
        notes=tuple(read.notes))


def _zoom(value, read: _Reader) -> tuple[tuple[float, float], tuple[float, float]] | None:
    if value is None:
        return None
    try:
        (x0, x1), (y0, y1) = value
        zoom = (float(x0), float(x1)), (float(y0), float(y1))
    except (TypeError, ValueError):
        read.notes.append("the head view's zoom is not two ranges; the view shows every token")
        return None
    if not all(math.isfinite(number) for pair in zoom for number in pair) or zoom[0][0] >= zoom[0][1] \
            or zoom[1][0] >= zoom[1][1]:
        read.notes.append("the head view's zoom is not two increasing ranges; the view shows every token")
        return None
    return zoom
