"""The Runs tab's state, Qt-free and evented: the runs found (their curves growing as the follower reads them, their
facts), which are ticked, and how they are shown (smoothing, x axis, log axes, outlier-ignoring range, the regex
filters on run and metric names). Views connect to its events and redraw what an event says changed; the
follower's records come in through `apply`.

    runs_changed()            a run was found, its facts or its error changed, or the run filter did
    curves_changed(run_ids)   these runs' curves grew (or started again)
    ticks_changed()           which runs are overlaid
    view_changed(what)        "smoothing", "axes", "range", "metrics": how the plots draw
    message(text, kind)       something to say ("info" or "error")
"""

from __future__ import annotations

import csv
import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from explorer.common.events import Event
from explorer.common.export_data import _replace_atomically
from explorer.runs.curve_files import Points
from explorer.runs.workbench.follower import CurvesRead, FactsRead, FolderFailed, RunFailed, RunFound
from explorer.runs.workbench.overlay import (
    STEP,
    X_AXES,
    DisplayMode,
    lower_is_better,
    metric_group,
    smoothed_copy,
    x_values,
)
from explorer.runs.workbench.run_facts import KIND_WORDS, TAB_OF_KIND, RunFacts

DEFAULT_SMOOTHING = 0.6  # TensorBoard's
MAX_SMOOTHING = 0.999
# Distinct colours, the first ten matplotlib's: a run keeps its colour while it is shown.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
           "#756bb1", "#636363")
_GENERATIONS = itertools.count(1)


class GrowingCurve:
    """One metric's points, in amortised-doubling numpy buffers."""

    def __init__(self, name: str, with_walls: bool):
        self.name = name
        self.size = 0
        self._steps = np.zeros(0, dtype=np.int64)
        self._values = np.zeros(0)
        self._walls = np.zeros(0) if with_walls else None
        self.generation = next(_GENERATIONS)  # a new one when the points are replaced

    def extend(self, points: Points) -> None:
        count = len(points.steps)
        if self.size + count > len(self._steps):
            capacity = max(256, 2 * (self.size + count))
            self._steps = np.resize(self._steps, capacity)
            self._values = np.resize(self._values, capacity)
            if self._walls is not None:
                self._walls = np.resize(self._walls, capacity)
        end = self.size + count
        self._steps[self.size : end] = points.steps
        self._values[self.size : end] = points.values
        if self._walls is not None:
            self._walls[self.size : end] = points.wall_times if points.wall_times is not None else np.nan
        self.size = end

    @property
    def steps(self) -> np.ndarray:
        return self._steps[: self.size]

    @property
    def values(self) -> np.ndarray:
        return self._values[: self.size]

    @property
    def wall_times(self) -> np.ndarray | None:
        return None if self._walls is None else self._walls[: self.size]

    def source(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
        return self.steps, self.values, self.wall_times, self.generation


@dataclass
class RunEntry:
    """A run the tab lists."""

    run_id: int
    folder: Path
    kind: str
    name: str
    colour: str
    curves: dict[str, GrowingCurve] = field(default_factory=dict)
    tokens: GrowingCurve | None = None
    elapsed: GrowingCurve | None = None
    start_wall: float | None = None
    facts: RunFacts = field(default_factory=RunFacts)
    main_metric: str | None = None
    error: str | None = None
    ticked: bool = False
    last_step: int | None = None
    skipped: int = 0

    @property
    def tab(self) -> str | None:
        """The tab that opens the run ("Train", "Fine-tune"), or None (a Trainer's or TensorBoard's run)."""
        return TAB_OF_KIND.get(self.kind)

    def context(self):
        tokens = None if self.tokens is None else (self.tokens.steps, self.tokens.values)
        elapsed = None if self.elapsed is None else (self.elapsed.steps, self.elapsed.values)
        return self.start_wall, tokens, elapsed

    def metrics(self) -> list[str]:
        return [name for name, curve in self.curves.items() if curve.size]

    def best_held_out_point(self) -> tuple[str, float, int] | None:
        """(metric, value, step) of the best held-out value so far: of the main metric of a fine-tuning run, else
        of the held-out loss, else of the first held-out metric; None when it has none."""
        held_out = [name for name in self.curves if metric_group(name)[1] and self.curves[name].size]
        if not held_out:
            return None
        preferred = [name for name in held_out if self.main_metric and metric_group(name)[0] == self.main_metric]
        preferred += [name for name in held_out if metric_group(name)[0] == "loss"]
        name = (preferred or sorted(held_out))[0]
        curve = self.curves[name]
        values = curve.values
        if not np.isfinite(values).any():
            return None
        index = int(np.nanargmin(values) if lower_is_better(metric_group(name)[0]) else np.nanargmax(values))
        return name, float(values[index]), int(curve.steps[index])

    def best_held_out(self) -> str:
        """The best held-out value so far, in words: "eval/loss 2.31 @ 200"; "" when it has none."""
        best = self.best_held_out_point()
        return "" if best is None else f"{best[0]} {best[1]:.4g} @ {best[2]:,}"


class FilterError(ValueError):
    pass


def compile_filter(text: str) -> re.Pattern | None:
    """The regular expression a filter box holds (None for an empty box); FilterError saying why it is not one."""
    if not text.strip():
        return None
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as error:
        where = f" at position {error.pos}" if error.pos is not None else ""
        raise FilterError(f"not a regular expression: {error.msg}{where}") from None


@dataclass(frozen=True)
class MetricPlot:
    """One plot: a metric and the (run, curve name) pairs drawn on it, training curves first."""

    group: str
    members: tuple[tuple[RunEntry, str, bool], ...]  # (run, curve name, held out)


@dataclass(frozen=True)
class RunsView:
    """The Runs tab as a session keeps it (explorer.window.session): `WorkbenchState` and the tab's controls, as
    plain values."""

    folders: tuple[str, ...] = ()  # the folders added, in order
    ticked: tuple[str, ...] = ()  # the folders of the runs ticked
    smoothing: float = DEFAULT_SMOOTHING
    axis: str = "step"
    log_x: bool = False
    log_y: bool = False
    ignore_outliers: bool = True
    shared_only: bool = False
    run_filter: str = ""
    metric_filter: str = ""


class WorkbenchState:
    """See the module docstring."""

    def __init__(self):
        self.runs: dict[int, RunEntry] = {}
        self.folders: list[Path] = []  # the folders added, in order
        self.smoothing = DEFAULT_SMOOTHING
        self.mode = DisplayMode()
        self.ignore_outliers = True
        self.shared_only = False
        self.run_filter_text = ""
        self.metric_filter_text = ""
        self.run_filter_error: str | None = None
        self.metric_filter_error: str | None = None
        self._run_filter: re.Pattern | None = None
        self._metric_filter: re.Pattern | None = None
        self._colours = itertools.cycle(PALETTE)
        self._tick_when_found: set[Path] = set()  # run folders to tick once the follower finds them (a session)
        self.runs_changed = Event()
        self.curves_changed = Event()
        self.ticks_changed = Event()
        self.view_changed = Event()
        self.message = Event()

    # ---- what the follower found
    def apply(self, records: Iterable[object]) -> None:
        grown: set[int] = set()
        listed = ticked = False
        for record in records:
            if isinstance(record, RunFound):
                entry = self.runs[record.run_id] = RunEntry(record.run_id, record.folder, record.kind, record.name,
                                                            next(self._colours))
                if self._tick_when_found and _resolved(record.folder) in self._tick_when_found:
                    self._tick_when_found.discard(_resolved(record.folder))
                    entry.ticked = True
                    ticked = True
                listed = True
            elif isinstance(record, CurvesRead):
                entry = self.runs.get(record.run_id)
                if entry is not None:
                    self._add_chunk(entry, record.chunk)
                    grown.add(entry.run_id)
                    listed = True  # its step count and best held-out value
            elif isinstance(record, FactsRead):
                entry = self.runs.get(record.run_id)
                if entry is not None:
                    entry.facts = record.facts
                    listed = True
            elif isinstance(record, RunFailed):
                entry = self.runs.get(record.run_id)
                if entry is not None:
                    entry.error = record.message
                    listed = True
                else:
                    self.message.emit(record.message, "error")
            elif isinstance(record, FolderFailed):
                self.message.emit(record.message, "error")
        if listed:
            self.runs_changed.emit()
        if ticked:
            self.ticks_changed.emit()
        if grown:
            self.curves_changed.emit(grown)

    def _add_chunk(self, entry: RunEntry, chunk) -> None:
        if chunk.restarted:
            entry.curves, entry.tokens, entry.elapsed, entry.start_wall = {}, None, None, None
            entry.last_step, entry.error = None, None
        for name, points in chunk.points.items():
            curve = entry.curves.get(name)
            if curve is None:
                curve = entry.curves[name] = GrowingCurve(name, points.wall_times is not None)
            curve.extend(points)
            if points.wall_times is not None and len(points.wall_times):
                first = float(np.min(points.wall_times))
                entry.start_wall = first if entry.start_wall is None else min(entry.start_wall, first)
            if len(points.steps) and not metric_group(name)[1]:
                newest = int(points.steps.max())
                entry.last_step = newest if entry.last_step is None else max(entry.last_step, newest)
        for attribute, points in (("tokens", chunk.tokens), ("elapsed", chunk.elapsed)):
            if points is not None:
                if getattr(entry, attribute) is None:
                    setattr(entry, attribute, GrowingCurve(attribute, False))
                getattr(entry, attribute).extend(points)
        entry.main_metric = chunk.main_metric or entry.main_metric
        entry.skipped += chunk.skipped

    # ---- which runs
    def listed_runs(self) -> list[RunEntry]:
        """The runs passing the run filter, newest first (by when each began)."""
        runs = [entry for entry in self.runs.values()
                if self._run_filter is None or self._run_filter.search(entry.name) or
                self._run_filter.search(str(entry.folder))]
        return sorted(runs, key=lambda entry: (-entry.facts.started, entry.name))

    def shown_runs(self) -> list[RunEntry]:
        return [entry for entry in self.listed_runs() if entry.ticked]

    def set_ticked(self, run_ids: Iterable[int], ticked: bool) -> None:
        changed = False
        for run_id in run_ids:
            entry = self.runs.get(run_id)
            if entry is not None and entry.ticked != ticked:
                entry.ticked = ticked
                changed = True
        if changed:
            self.ticks_changed.emit()

    def tick_only(self, folders: Iterable[str | Path]) -> None:
        """Tick the runs in `folders` and untick the others: those found later are ticked when they are found."""
        wanted = {_resolved(folder) for folder in folders}
        changed = False
        for entry in self.runs.values():
            ticked = _resolved(entry.folder) in wanted
            wanted.discard(_resolved(entry.folder))
            if entry.ticked != ticked:
                entry.ticked, changed = ticked, True
        self._tick_when_found = wanted
        if changed:
            self.ticks_changed.emit()

    def ticked_folders(self) -> list[str]:
        """The folders of the runs ticked, and of those to be ticked once found."""
        return [str(entry.folder) for entry in self.runs.values() if entry.ticked] + sorted(
            str(folder) for folder in self._tick_when_found)

    def set_run_filter(self, text: str) -> str | None:
        """Filter the runs by a regular expression (on the name or folder); the message when it is not one (the
        previous filter stays)."""
        self.run_filter_text = text
        try:
            self._run_filter = compile_filter(text)
            self.run_filter_error = None
        except FilterError as error:
            self.run_filter_error = str(error)
        self.runs_changed.emit()
        self.ticks_changed.emit()
        return self.run_filter_error

    def set_metric_filter(self, text: str) -> str | None:
        self.metric_filter_text = text
        try:
            self._metric_filter = compile_filter(text)
            self.metric_filter_error = None
        except FilterError as error:
            self.metric_filter_error = str(error)
        self.view_changed.emit("metrics")
        return self.metric_filter_error

    # ---- how they are drawn
    def set_smoothing(self, weight: float) -> None:
        if not (0.0 <= weight <= MAX_SMOOTHING):
            raise ValueError(f"smoothing is {weight}; TensorBoard's slider goes from 0 (none) to {MAX_SMOOTHING}")
        if weight != self.smoothing:
            self.smoothing = float(weight)
            self.view_changed.emit("smoothing")

    def set_axis(self, axis: str) -> None:
        if axis not in X_AXES:
            raise ValueError(f"no x axis named {axis!r}; use one of {', '.join(X_AXES)}")
        if axis != self.mode.axis:
            self.mode = replace(self.mode, axis=axis, log_x=self.mode.log_x and axis != "wall")
            self.view_changed.emit("axes")

    def set_log(self, *, x: bool | None = None, y: bool | None = None) -> None:
        log_x = self.mode.log_x if x is None else bool(x) and self.mode.axis != "wall"
        log_y = self.mode.log_y if y is None else bool(y)
        if (log_x, log_y) != (self.mode.log_x, self.mode.log_y):
            self.mode = replace(self.mode, log_x=log_x, log_y=log_y)
            self.view_changed.emit("axes")

    def set_ignore_outliers(self, ignore: bool) -> None:
        if bool(ignore) != self.ignore_outliers:
            self.ignore_outliers = bool(ignore)
            self.view_changed.emit("range")

    def set_shared_only(self, shared: bool) -> None:
        if bool(shared) != self.shared_only:
            self.shared_only = bool(shared)
            self.view_changed.emit("metrics")

    def plots(self) -> list[MetricPlot]:
        """The plots of the shown runs: one per metric (held-out points on their training metric's plot), those
        most runs share first, then the losses, then by name; only those every shown run has when `shared_only`."""
        shown = self.shown_runs()
        groups: dict[str, list[tuple[RunEntry, str, bool]]] = {}
        for entry in shown:
            for name in entry.metrics():
                group, held_out = metric_group(name)
                if self._metric_filter is not None and not (self._metric_filter.search(group)
                                                            or self._metric_filter.search(name)):
                    continue
                groups.setdefault(group, []).append((entry, name, held_out))
        plots = []
        for group, members in groups.items():
            runs = {entry.run_id for entry, _, _ in members}
            if self.shared_only and len(runs) < len(shown):
                continue
            members.sort(key=lambda member: member[2])  # training curves under the held-out points
            plots.append((-len(runs), "loss" not in group, group, MetricPlot(group, tuple(members))))
        return [plot for *_, plot in sorted(plots, key=lambda item: item[:3])]

    # ---- the config table
    def config_rows(self, differing_only: bool = False) -> tuple[list[str], list[tuple[str, list[str], bool]]]:
        """(the shown runs' names, rows of (setting, each run's value or "", whether they differ))."""
        shown = self.shown_runs()
        keys: dict[str, None] = {}
        for entry in shown:
            keys.update(dict.fromkeys(entry.facts.config))
        rows = []
        for key in keys:
            values = [entry.facts.config.get(key, "") for entry in shown]
            differs = len(set(values)) > 1
            if differs or not differing_only:
                rows.append((key, values, differs))
        return [entry.name for entry in shown], rows

    # ---- export
    def export_csv(self, path: str | Path) -> Path:
        """Every point of the shown plots (not only those drawn), one row each: run, metric, held out, step, the x
        axis' value, value and smoothed value (the held-out points are not smoothed)."""
        plots = self.plots()
        if not plots:
            raise ValueError("no run is ticked, so there is nothing to export; tick the runs to export")
        axis = self.mode.axis
        header = ["run", "folder", "metric", "plot", "held_out", "step", X_AXES[axis] if axis != STEP else "x",
                  "value", "smoothed"]

        def write(target: Path) -> None:
            with open(target, "w", newline="", encoding="utf-8") as file:
                writer = csv.writer(file)
                writer.writerow(header)
                for plot in plots:
                    for entry, name, held_out in plot.members:
                        curve = entry.curves[name]
                        start_wall, tokens, elapsed = entry.context()
                        x = x_values(curve.steps, curve.wall_times, axis, start_wall=start_wall, tokens=tokens,
                                     elapsed=elapsed)
                        smoothed = None if held_out else smoothed_copy(curve.values, self.smoothing)
                        for index, (step, value) in enumerate(zip(curve.steps.tolist(), curve.values.tolist(),
                                                                  strict=True)):
                            writer.writerow([entry.name, str(entry.folder), name, plot.group, int(held_out), step,
                                             _number(None if x is None else x[index]), _number(value),
                                             "" if smoothed is None else _number(smoothed[index])])

        return _replace_atomically(Path(path), write)

    def kind_words(self, entry: RunEntry) -> str:
        return KIND_WORDS.get(entry.kind, entry.kind)


def _resolved(folder: str | Path) -> Path:
    try:
        return Path(folder).expanduser().resolve()
    except (OSError, RuntimeError):
        return Path(folder)


def _number(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(float(value)) if isinstance(value, float) else str(value)
