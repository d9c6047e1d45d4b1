"""How one run's curve of one metric is drawn in the Runs tab, as numbers: which plot it belongs on, its x values on
each axis, its log transforms, its smoothing, what a hover reads, the outlier-ignoring range, and the few points a
plot of some hundred pixels needs out of 100,000. Qt-free; `explorer.runs._qt.workbench.metric_plots` draws what
`SeriesView` computes.

Plots are grouped by metric: a run's "loss", a Trainer's "eval_loss", TensorBoard's "train/loss" and "eval/loss"
and a bert-train run's held-out "eval/loss" all belong on the "loss" plot, the held-out ones as points
(`metric_group`). The x axis is the step, the tokens seen (where a run logs them: bert-train's tokens per step
summed, a Trainer's num_input_tokens_seen), the time since the run began (a TensorBoard point's wall time less the
run's first; bert-train's elapsed_seconds, training time without pauses) or the wall time (TensorBoard only): a
point whose run does not log what the axis needs is not drawn, and the plot says how many were left out.

On a log axis the values are drawn as log10 of themselves for every item, held-out points included (the axis writes
the values its ticks stand for); a value at or below 0 has no place there and is left out, and counted. Smoothing is of
the values, before any log. Values are never thinned: `display` picks, out of all of them, the min and the max of
each pixel column in view (`explorer.runs.curve_series.PeakPyramid`), so a spike stays visible and the cost of a
redraw is the plot's width, not the run's length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.runs.curve_series import PeakPyramid
from explorer.runs.smoothing import Smoother, smooth

STEP, TOKENS, RELATIVE, WALL = "step", "tokens", "relative", "wall"
X_AXES = {STEP: "step", TOKENS: "tokens seen", RELATIVE: "relative time", WALL: "wall time"}
HELD_OUT_PREFIXES = ("eval/", "eval_", "val/", "val_", "validation/", "valid/")
TRAIN_PREFIXES = ("train/",)
OUTLIER_PERCENTILES = (5.0, 95.0)


def metric_group(name: str) -> tuple[str, bool]:
    """(the plot a metric is drawn on, whether its points are held-out ones): "eval_loss" -> ("loss", True),
    "train/loss" -> ("loss", False), "mlm_accuracy" -> ("mlm_accuracy", False)."""
    for prefix in HELD_OUT_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):], True
    for prefix in TRAIN_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):], False
    return name, False


def lower_is_better(group: str) -> bool:
    return any(word in group.lower() for word in ("loss", "perplexity", "error", "runtime"))


@dataclass(frozen=True)
class DisplayMode:
    axis: str = STEP
    log_x: bool = False
    log_y: bool = False


def x_values(steps: np.ndarray, wall_times: np.ndarray | None, axis: str, *, start_wall: float | None,
             tokens: tuple[np.ndarray, np.ndarray] | None, elapsed: tuple[np.ndarray, np.ndarray] | None
             ) -> np.ndarray | None:
    """The x of each point on `axis` (NaN where the run does not say); None when the run says nothing of it."""
    steps = steps.astype(np.float64)
    if axis == STEP:
        return steps
    if axis == WALL:
        return None if wall_times is None else wall_times.astype(np.float64)
    if axis == RELATIVE:
        if wall_times is not None and start_wall is not None:
            return wall_times - start_wall
        return None if elapsed is None else _by_step(steps, *elapsed)
    if axis == TOKENS:
        return None if tokens is None else _by_step(steps, *tokens)
    raise ValueError(f"no x axis named {axis!r}; use one of {', '.join(X_AXES)}")


def _by_step(steps: np.ndarray, known_steps: np.ndarray, known_values: np.ndarray) -> np.ndarray:
    """What a run logged at each step (linear between logged steps, NaN outside them)."""
    if len(known_steps) == 0:
        return np.full(len(steps), np.nan)
    order = np.argsort(known_steps, kind="stable")
    known_steps, known_values = known_steps[order].astype(np.float64), known_values[order]
    found = np.interp(steps, known_steps, known_values)
    found[(steps < known_steps[0]) | (steps > known_steps[-1])] = np.nan
    return found


class SeriesView:
    """One curve of one run as a plot shows it, kept up to date as the curve grows (see the module docstring).

    `source()` returns (steps, values, wall_times, generation): the curve's points now; generation changes when
    they were replaced (a run restarted). `context()` returns the run's (start_wall, tokens, elapsed)."""

    def __init__(self, source, context, held_out: bool):
        self._source, self._context = source, context
        self.held_out = held_out
        self._key: tuple | None = None  # (mode, smoothing, generation) the arrays below are for
        self._consumed = 0
        self.x = np.zeros(0)  # drawn x of the raw points, ascending
        self.y = np.zeros(0)
        self.steps = np.zeros(0, dtype=np.int64)
        self.x_smooth = np.zeros(0)
        self.y_smooth = np.zeros(0)
        self.not_drawn = 0  # points with no place on these axes (no x on this axis, ≤ 0 on a log axis)
        self.non_positive = 0  # of those, values or x at or below 0 on a log axis
        self.no_x = 0  # of those, points whose run does not log this axis
        self.version = 0  # changes whenever the arrays do
        self._smoother: Smoother | None = None
        self._raw_pyramid, self._smooth_pyramid = PeakPyramid(), PeakPyramid()
        self._range_key: tuple | None = None
        self._range: tuple[float, float] | None = None

    def update(self, mode: DisplayMode, smoothing: float) -> bool:
        """Bring the drawn arrays up to date with the curve, the axes and the smoothing; True when they changed."""
        steps, values, walls, generation = self._source()
        key = (mode, smoothing, generation)
        if key != self._key or len(steps) < self._consumed:
            self._rebuild(mode, smoothing, steps, values, walls)
            self._key = key
            return True
        if len(steps) == self._consumed:
            return False
        if not self._extend(mode, steps, values, walls):
            self._rebuild(mode, smoothing, steps, values, walls)
        return True

    # ---- building
    def _prepared(self, mode: DisplayMode, steps, values, walls, start: int):
        start_wall, tokens, elapsed = self._context()
        x = x_values(steps[start:], None if walls is None else walls[start:], mode.axis, start_wall=start_wall,
                     tokens=tokens, elapsed=elapsed)
        if x is None:
            x = np.full(len(steps) - start, np.nan)
        return x, values[start:].astype(np.float64), steps[start:]

    def _rebuild(self, mode: DisplayMode, smoothing: float, steps, values, walls) -> None:
        x, y, point_steps = self._prepared(mode, steps, values, walls, 0)
        placed = np.isfinite(x) & ~(mode.log_x & (x <= 0)) if mode.log_x else np.isfinite(x)
        self.no_x = int(np.count_nonzero(~np.isfinite(x)))
        order = np.flatnonzero(placed)
        order = order[np.argsort(x[order], kind="stable")]
        x, y, point_steps = x[order], y[order], point_steps[order]
        self._smoother = None
        smoothed = y
        if not self.held_out:
            self._smoother = Smoother(smoothing)
            smoothed = self._smoother.extend(y).copy()
        self.x = self.steps = self.y = self.x_smooth = self.y_smooth = None
        self.not_drawn = len(steps) - len(order)
        self.non_positive = int(np.count_nonzero(np.isfinite(x) & (x <= 0))) if mode.log_x else 0
        self._set(mode, x, y, point_steps, smoothed, append=False)
        self._consumed = len(steps)

    def _extend(self, mode: DisplayMode, steps, values, walls) -> bool:
        """Add the curve's new points at the end; False when they do not come after the drawn ones (rebuild)."""
        x, y, point_steps = self._prepared(mode, steps, values, walls, self._consumed)
        if not np.isfinite(x).all() or (mode.log_x and (x <= 0).any()) or np.any(np.diff(x) < 0):
            return False
        last = self.x[-1] if len(self.x) else (self.x_smooth[-1] if len(self.x_smooth) else -math.inf)
        if len(x) and x[0] < last:
            return False
        smoothed = y
        if self._smoother is not None:
            smoothed = self._smoother.extend(y).copy()
            if self._smoother.restarted:
                return False
        self._set(mode, x, y, point_steps, smoothed, append=True)
        self._consumed = len(steps)
        return True

    def _set(self, mode: DisplayMode, x, y, point_steps, smoothed, *, append: bool) -> None:
        x_drawn = np.log10(x) if mode.log_x else x
        raw_ok, raw_y = self._drawable(y, mode.log_y)
        smooth_ok, smooth_y = self._drawable(smoothed, mode.log_y)
        pieces = ((x_drawn[raw_ok], raw_y[raw_ok], point_steps[raw_ok]), (x_drawn[smooth_ok], smooth_y[smooth_ok]))
        self.not_drawn += int(np.count_nonzero(~raw_ok))
        if mode.log_y:
            self.non_positive += int(np.count_nonzero(np.isfinite(y) & (y <= 0)))
        if append:
            self.x = np.concatenate([self.x, pieces[0][0]])
            self.y = np.concatenate([self.y, pieces[0][1]])
            self.steps = np.concatenate([self.steps, pieces[0][2]])
            self.x_smooth = np.concatenate([self.x_smooth, pieces[1][0]])
            self.y_smooth = np.concatenate([self.y_smooth, pieces[1][1]])
        else:
            self.x, self.y, self.steps = pieces[0]
            self.x_smooth, self.y_smooth = pieces[1]
            self._raw_pyramid.reset()
            self._smooth_pyramid.reset()
        self.version += 1

    @staticmethod
    def _drawable(values: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray]:
        if not log:
            return np.isfinite(values), values
        with np.errstate(divide="ignore", invalid="ignore"):
            logged = np.log10(values)
        return np.isfinite(logged), logged

    # ---- reading
    def display(self, x_min: float, x_max: float, budget: int, smoothed: bool) -> tuple[np.ndarray, np.ndarray]:
        """What to draw of the points in [x_min, x_max]: every point when they fit in `budget`, else the min and
        max of each of about budget / 2 stretches (one point beyond each side, so lines reach the edges)."""
        x, y = (self.x_smooth, self.y_smooth) if smoothed else (self.x, self.y)
        pyramid = self._smooth_pyramid if smoothed else self._raw_pyramid
        if len(x) == 0:
            return x, y
        pyramid.update(y)
        lo = max(0, int(np.searchsorted(x, x_min, side="left")) - 1)
        hi = min(len(x), int(np.searchsorted(x, x_max, side="right")) + 1)
        return pyramid.view(x, y, lo, hi, budget)

    def value_at(self, x: float) -> tuple[int, float, float | None] | None:
        """(step, value, smoothed value) of the last point at or before drawn x (the first, left of them all);
        values as written, not as drawn (no log). None when nothing is drawn."""
        if len(self.x) == 0:
            return None
        index = max(0, int(np.searchsorted(self.x, x, side="right")) - 1)
        raw = float(self.y[index])
        smoothed = None
        if not self.held_out and len(self.x_smooth):
            smooth_index = max(0, int(np.searchsorted(self.x_smooth, x, side="right")) - 1)
            smoothed = float(self.y_smooth[smooth_index])
        if self._key is not None and self._key[0].log_y:
            raw = 10.0**raw
            smoothed = None if smoothed is None else 10.0**smoothed
        return int(self.steps[index]), raw, smoothed

    def x_extent(self) -> tuple[float, float] | None:
        if len(self.x) == 0:
            return None
        return float(self.x[0]), float(self.x[-1])

    def y_extent(self, ignore_outliers: bool) -> tuple[float, float] | None:
        """The drawn values' range: all of them, or their 5th to 95th percentile (TensorBoard's "ignore outliers in
        chart scaling"); held-out points always whole (a handful, each of them meant)."""
        if len(self.y) == 0:
            return None
        # While a live curve grows, its percentiles are taken again once it has grown by a fiftieth: they barely
        # move, and taking them at every new batch cost a live redraw more than its drawing.
        outliers = ignore_outliers and not self.held_out
        size = len(self.y)
        stale = (self._range_key is None or self._range_key[:2] != (self._key, outliers)
                 or (self._range_key[2] != self.version and not (outliers and self._range_key[3] <= size
                                                                 <= self._range_key[3] * 1.02)))
        if stale:
            if outliers and size >= 20:
                low, high = np.percentile(self.y, OUTLIER_PERCENTILES)
            else:
                low, high = np.min(self.y), np.max(self.y)
            self._range, self._range_key = (float(low), float(high)), (self._key, outliers, self.version, size)
        return self._range


def smoothed_copy(values: np.ndarray, weight: float) -> np.ndarray:
    """The smoothed values of a whole series (exports)."""
    return smooth(values, weight)
