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


class _Column:
    """A growing numpy column: `values` is a view of its first `size` entries. A rebuild (`reset`) takes a new
    buffer, so an array handed out before (a plot item holds it) never changes under its holder; `append` only
    writes past the entries handed out."""

    def __init__(self, dtype=np.float64):
        self._data = np.zeros(0, dtype=dtype)
        self.size = 0

    @property
    def values(self) -> np.ndarray:
        return self._data[: self.size]

    def reset(self, values: np.ndarray) -> None:
        self._data = np.array(values, dtype=self._data.dtype)
        self.size = len(values)

    def append(self, values: np.ndarray) -> None:
        end = self.size + len(values)
        if end > len(self._data):
            grown = np.zeros(max(1024, 2 * end), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : end] = values
        self.size = end


class SeriesView:
    """One curve of one run as a plot shows it, kept up to date as the curve grows (see the module docstring).

    `source()` returns (steps, values, wall_times, generation): the curve's points now; generation changes when
    they were replaced (a run restarted). `context()` returns the run's (start_wall, tokens, elapsed).

    Three layers, each redone only when what it depends on changed, and extended in place while a live curve grows:
    the placed points (their x on the axis, in x order; the axis, log x and the curve's points), the smoothed values
    (the smoothing and the placed values: switching the x axis keeps them when the values come in the same order)
    and the drawn arrays (log y, and the layers under them), each with the min/max pyramid that thins it for
    display. A smoothing change therefore smooths again and leaves the raw arrays, their pyramid and their range
    alone; a log-y switch smooths nothing again."""

    def __init__(self, source, context, held_out: bool):
        self._source, self._context = source, context
        self.held_out = held_out
        self._placed_key: tuple | None = None  # (axis, log_x, generation) the placed points are for
        self._consumed = 0  # the curve's points looked at so far
        self._placed_x, self._placed_y = _Column(), _Column()  # x as placed (no log), values as written
        self._placed_steps = _Column(np.int64)
        self._smoother: Smoother | None = None  # over the placed values, in x order (not for held-out points)
        self._smoothing = 0.0  # its weight
        self._log_y: bool | None = None
        self._x, self._y, self._steps = _Column(), _Column(), _Column(np.int64)  # drawn raw points
        self._x_smooth, self._y_smooth = _Column(), _Column()  # drawn smoothed points
        self._raw_pyramid, self._smooth_pyramid = PeakPyramid(), PeakPyramid()
        self.no_x = 0  # points whose run does not log this axis
        self._x_non_positive = 0  # placed-out points at or below 0 on a log x axis
        self._y_non_positive = 0  # drawn-out values at or below 0 on a log y axis
        self._y_dropped = 0  # drawn-out values (non-finite, or at or below 0 on log y)
        self.version = 0  # changes whenever the drawn arrays do
        self._raw_version = 0  # changes whenever the drawn raw values do (the range depends on them only)
        self._range_key: tuple | None = None
        self._range: tuple[float, float] | None = None

    # the drawn arrays, ascending in x: x and y of the raw points (log10 of them on a log axis), their steps, and
    # the smoothed curve's (the raw ones for held-out points, which are not smoothed)
    x = property(lambda self: self._x.values)
    y = property(lambda self: self._y.values)
    steps = property(lambda self: self._steps.values)
    x_smooth = property(lambda self: self._x_smooth.values if self._smoother is not None else self._x.values)
    y_smooth = property(lambda self: self._y_smooth.values if self._smoother is not None else self._y.values)

    @property
    def non_positive(self) -> int:
        """Points left out for being at or below 0 on a log axis (x or y)."""
        return self._x_non_positive + self._y_non_positive

    @property
    def not_drawn(self) -> int:
        """Points with no place on these axes: no x on this axis, at or below 0 on a log axis, no number."""
        return self._consumed - self._placed_x.size + self._y_dropped

    def update(self, mode: DisplayMode, smoothing: float) -> bool:
        """Bring the drawn arrays up to date with the curve, the axes and the smoothing; True when they changed."""
        steps, values, walls, generation = self._source()
        placed_key = (mode.axis, mode.log_x, generation)
        if placed_key != self._placed_key or len(steps) < self._consumed:
            new = self._place(mode, steps, values, walls)
            self._placed_key = placed_key
        elif len(steps) > self._consumed:
            new = self._extend_placed(mode, steps, values, walls)
            if new is None:
                new = self._place(mode, steps, values, walls)
        else:
            new = 0  # the placed points as they were
        placed_again = new == -1
        changed = False
        if not self.held_out:
            changed |= self._update_smoothed(smoothing, mode, new, placed_again)
        changed |= self._update_raw(mode, new, placed_again)
        if changed:
            self.version += 1
        return changed

    # ---- the placed points
    def _prepared(self, mode: DisplayMode, steps, values, walls, start: int):
        start_wall, tokens, elapsed = self._context()
        x = x_values(steps[start:], None if walls is None else walls[start:], mode.axis, start_wall=start_wall,
                     tokens=tokens, elapsed=elapsed)
        if x is None:
            x = np.full(len(steps) - start, np.nan)
        return x, values[start:].astype(np.float64), steps[start:]

    def _place(self, mode: DisplayMode, steps, values, walls) -> int:
        """Place every point again; -1 (all of them new, whatever their count)."""
        x, y, point_steps = self._prepared(mode, steps, values, walls, 0)
        finite = np.isfinite(x)
        placed = finite & (x > 0) if mode.log_x else finite
        self.no_x = int(np.count_nonzero(~finite))
        self._x_non_positive = int(np.count_nonzero(finite & ~placed))
        order = np.flatnonzero(placed)
        if len(order) > 1 and np.any(np.diff(x[order]) < 0):
            order = order[np.argsort(x[order], kind="stable")]
        previous = self._placed_y.values
        self._placed_x.reset(x[order])
        self._placed_y.reset(y[order])
        self._placed_steps.reset(point_steps[order])
        self._consumed = len(steps)
        # The smoothing runs over the values in x order: the same values in the same order smooth the same.
        if self._smoother is not None and not np.array_equal(previous, self._placed_y.values, equal_nan=True):
            self._smoother = None
        return -1

    def _extend_placed(self, mode: DisplayMode, steps, values, walls) -> int | None:
        """Place the curve's new points after the placed ones; their count, or None when they do not come after
        them (place all again)."""
        x, y, point_steps = self._prepared(mode, steps, values, walls, self._consumed)
        if not np.isfinite(x).all() or (mode.log_x and (x <= 0).any()) or np.any(np.diff(x) < 0):
            return None
        if len(x) and self._placed_x.size and x[0] < self._placed_x.values[-1]:
            return None
        self._placed_x.append(x)
        self._placed_y.append(y)
        self._placed_steps.append(point_steps)
        self._consumed = len(steps)
        return len(x)

    # ---- the smoothed values and the drawn arrays
    def _update_smoothed(self, smoothing: float, mode: DisplayMode, new: int, placed_again: bool) -> bool:
        placed_y, log_y = self._placed_y.values, mode.log_y
        if self._smoother is None or smoothing != self._smoothing:
            self._smoother, self._smoothing = Smoother(smoothing), smoothing
            self._smoother.extend(placed_y)
            rebuild = True
        elif placed_again:
            rebuild = True  # the same values in the same order: smoothed as they were, x placed anew
        elif new:
            self._smoother.extend(placed_y[-new:])
            rebuild = self._smoother.restarted or log_y != self._log_y
        else:
            rebuild = log_y != self._log_y
        smoothed = self._smoother.values
        if rebuild:
            keep, drawn = _drawable(smoothed, log_y)
            self._x_smooth.reset(_drawn_x(self._placed_x.values, mode)[keep])
            self._y_smooth.reset(drawn[keep])
            self._smooth_pyramid.reset()
            return True
        if new:
            keep, drawn = _drawable(smoothed[-new:], log_y)
            self._x_smooth.append(_drawn_x(self._placed_x.values[-new:], mode)[keep])
            self._y_smooth.append(drawn[keep])
            return True
        return False

    def _update_raw(self, mode: DisplayMode, new: int, placed_again: bool) -> bool:
        log_y = mode.log_y
        if placed_again or log_y != self._log_y:
            keep, drawn = _drawable(self._placed_y.values, log_y)
            self._x.reset(_drawn_x(self._placed_x.values, mode)[keep])
            self._y.reset(drawn[keep])
            self._steps.reset(self._placed_steps.values[keep])
            self._y_dropped = int(np.count_nonzero(~keep))
            self._y_non_positive = _non_positive(self._placed_y.values) if log_y else 0
            self._raw_pyramid.reset()
        elif new:
            keep, drawn = _drawable(self._placed_y.values[-new:], log_y)
            self._x.append(_drawn_x(self._placed_x.values[-new:], mode)[keep])
            self._y.append(drawn[keep])
            self._steps.append(self._placed_steps.values[-new:][keep])
            self._y_dropped += int(np.count_nonzero(~keep))
            self._y_non_positive += _non_positive(self._placed_y.values[-new:]) if log_y else 0
        else:
            return False
        self._log_y = log_y
        self._raw_version += 1
        return True

    # ---- reading
    def display(self, x_min: float, x_max: float, budget: int, smoothed: bool) -> tuple[np.ndarray, np.ndarray]:
        """What to draw of the points in [x_min, x_max]: every point when they fit in `budget`, else the min and
        max of each of about budget / 2 stretches (one point beyond each side, so lines reach the edges)."""
        smoothed = smoothed and self._smoother is not None
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
        if self._smoother is not None and len(self.x_smooth):
            smooth_index = max(0, int(np.searchsorted(self.x_smooth, x, side="right")) - 1)
            smoothed = float(self.y_smooth[smooth_index])
        if self._log_y:
            raw = 10.0**raw
            smoothed = None if smoothed is None else 10.0**smoothed
        return int(self.steps[index]), raw, smoothed

    def x_extent(self) -> tuple[float, float] | None:
        if len(self.x) == 0:
            return None
        return float(self.x[0]), float(self.x[-1])

    def y_extent(self, ignore_outliers: bool) -> tuple[float, float] | None:
        """The drawn values' range: all of them, or their 5th to 95th percentile (TensorBoard's "ignore outliers in
        chart scaling"); held-out points always whole (a handful, each of them meant). The smoothing never moves
        it: it is the raw values'."""
        if len(self.y) == 0:
            return None
        # While a live curve grows, its percentiles are taken again once it has grown by a fiftieth: they barely
        # move, and taking them at every new batch cost a live redraw more than its drawing.
        outliers = ignore_outliers and not self.held_out
        size = len(self.y)
        key = (self._placed_key, self._log_y, outliers)
        stale = (self._range_key is None or self._range_key[0] != key
                 or (self._range_key[1] != self._raw_version and not (outliers and self._range_key[2] <= size
                                                                      <= self._range_key[2] * 1.02)))
        if stale:
            if outliers and size >= 20:
                low, high = np.percentile(self.y, OUTLIER_PERCENTILES)
            else:
                low, high = np.min(self.y), np.max(self.y)
            self._range, self._range_key = (float(low), float(high)), (key, self._raw_version, size)
        return self._range


def _drawn_x(x: np.ndarray, mode: DisplayMode) -> np.ndarray:
    return np.log10(x) if mode.log_x else x


def _drawable(values: np.ndarray, log: bool) -> tuple[np.ndarray, np.ndarray]:
    """(which values have a place on the axis, the values as drawn: log10 of them on a log axis)."""
    if not log:
        return np.isfinite(values), values
    with np.errstate(divide="ignore", invalid="ignore"):
        logged = np.log10(values)
    return np.isfinite(logged), logged


def _non_positive(values: np.ndarray) -> int:
    return int(np.count_nonzero(np.isfinite(values) & (values <= 0)))


def smoothed_copy(values: np.ndarray, weight: float) -> np.ndarray:
    """The smoothed values of a whole series (exports)."""
    return smooth(values, weight)
