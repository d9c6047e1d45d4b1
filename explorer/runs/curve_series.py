"""The numbers behind a training curve, Qt-free: its points in growing numpy buffers, its smoothed values, and
the min/max pyramid that draws a long run at the cost of the pixels, not of the points.

`explorer.runs._qt.loss_plots` keeps one `CurveSeries` per curve and draws what `display` returns.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


class PeakPyramid:
    """Min and max of y over blocks of 2, 4, 8, … points, extended incrementally as points arrive.

    What pyqtgraph's "peak" downsampling computes on every repaint (a min/max over all N points of every
    curve: ~10 ms per frame at 100k steps here) is kept instead: each redraw only folds in the new complete
    blocks, and a view then costs O(pixels), whatever the run's length. Spikes stay visible.
    """

    def __init__(self):
        self._mins: list[np.ndarray] = []  # level k: blocks of 2 ** (k + 1) points, amortised-doubling buffers
        self._maxs: list[np.ndarray] = []
        self._counts: list[int] = []  # complete blocks summarised at each level

    def reset(self) -> None:
        self._mins, self._maxs, self._counts = [], [], []

    @property
    def levels(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(mins, maxs) per level, as views of the summarised blocks."""
        return [(mins[:count], maxs[:count])
                for mins, maxs, count in zip(self._mins, self._maxs, self._counts, strict=True)]

    def update(self, y: np.ndarray) -> None:
        """Fold in the complete blocks of `y` (all points so far) that are not summarised yet."""
        below_min, below_max = y, y
        for level in range(64):
            complete = len(below_min) // 2
            if complete == 0:
                break
            if level == len(self._counts):
                self._mins.append(np.empty(max(16, complete)))
                self._maxs.append(np.empty(max(16, complete)))
                self._counts.append(0)
            done = self._counts[level]
            if complete > done:
                if complete > len(self._mins[level]):
                    self._mins[level] = np.resize(self._mins[level], 2 * complete)
                    self._maxs[level] = np.resize(self._maxs[level], 2 * complete)
                start, stop = 2 * done, 2 * complete
                new_mins, new_maxs = self._mins[level][done:complete], self._maxs[level][done:complete]
                np.minimum(below_min[start:stop:2], below_min[start + 1 : stop : 2], out=new_mins)
                np.maximum(below_max[start:stop:2], below_max[start + 1 : stop : 2], out=new_maxs)
                self._counts[level] = complete
            below_min, below_max = self._mins[level][:complete], self._maxs[level][:complete]

    def view(self, x: np.ndarray, y: np.ndarray, lo: int, hi: int, budget: int) -> tuple[np.ndarray, np.ndarray]:
        """Points to draw for indices [lo, hi): the raw points when they fit in `budget`, else two points
        (min, max) per block, with blocks as small as the budget allows."""
        count = hi - lo
        if count <= budget or not self._counts:
            return x[lo:hi], y[lo:hi]
        level = min(len(self._counts) - 1, max(0, math.ceil(math.log2(2 * count / budget)) - 1))
        block = 2 ** (level + 1)
        mins, maxs = self._mins[level][: self._counts[level]], self._maxs[level][: self._counts[level]]
        first, last = lo // block, min(len(mins), hi // block)
        starts = np.arange(first, last) * block
        xs = np.repeat(x[starts], 2)
        ys = np.empty(2 * (last - first))
        ys[0::2], ys[1::2] = mins[first:last], maxs[first:last]
        tail = last * block  # the points after the last complete block, as they are
        return np.concatenate([xs, x[tail:hi]]), np.concatenate([ys, y[tail:hi]])


_EDITS = itertools.count()  # every change of any series takes the next number: "unchanged since drawn" is cheap


class CurveSeries:
    """x/y values in amortised-doubling numpy buffers, plus a debiased EMA of y (TensorBoard's smoothing),
    each with a PeakPyramid for drawing long runs. `version` changes whenever the values do."""

    def __init__(self, smoothing: float):
        self.version = next(_EDITS)
        self._x = np.empty(1024, dtype=np.float64)
        self._y = np.empty(1024, dtype=np.float64)
        self._ema = np.empty(1024, dtype=np.float64)
        self.size = 0
        self._smoothing = smoothing
        self._ema_raw = 0.0
        self._ema_count = 0
        self.raw_pyramid = PeakPyramid()
        self.smooth_pyramid = PeakPyramid()

    def append(self, x: float, y: float) -> None:
        if not (math.isfinite(x) and math.isfinite(y)):
            return  # a diverged step: the run's message says so; the curves stay drawable without checks
        if self.size == len(self._x):
            self._x = np.resize(self._x, 2 * self.size)
            self._y = np.resize(self._y, 2 * self.size)
            self._ema = np.resize(self._ema, 2 * self.size)
        self._x[self.size] = x
        self._y[self.size] = y
        self._ema[self.size] = self._next_ema(y)
        self.size += 1
        self.version = next(_EDITS)

    def _next_ema(self, y: float) -> float:
        self._ema_raw = self._smoothing * self._ema_raw + (1.0 - self._smoothing) * y
        self._ema_count += 1
        return self._ema_raw / (1.0 - self._smoothing**self._ema_count)  # debiased

    def set_smoothing(self, smoothing: float) -> None:
        self._smoothing = smoothing
        self._ema_raw, self._ema_count = 0.0, 0
        for index in range(self.size):
            self._ema[index] = self._next_ema(float(self._y[index]))
        self.smooth_pyramid.reset()
        self.version = next(_EDITS)

    def truncate_from(self, x: float) -> None:
        """Drop every point at or after `x`."""
        keep = int(np.searchsorted(self.x, x, side="left"))
        if keep < self.size:
            self.size = keep
            self.raw_pyramid.reset()
            self.set_smoothing(self._smoothing)

    @property
    def x(self) -> np.ndarray:
        return self._x[: self.size]

    @property
    def y(self) -> np.ndarray:
        return self._y[: self.size]

    @property
    def smoothed(self) -> np.ndarray:
        return self._ema[: self.size]

    def display(self, x_min: float, x_max: float, budget: int, smoothed: bool) -> tuple[np.ndarray, np.ndarray]:
        """What to draw for the steps in [x_min, x_max] (one point beyond each side, so lines reach the edge)."""
        x, y = self.x, (self.smoothed if smoothed else self.y)
        pyramid = self.smooth_pyramid if smoothed else self.raw_pyramid
        pyramid.update(y)
        lo = max(0, int(np.searchsorted(x, x_min, side="left")) - 1)
        hi = min(self.size, int(np.searchsorted(x, x_max, side="right")) + 1)
        return pyramid.view(x, y, lo, hi, budget)


def steady_range(low: float, high: float) -> tuple[float, float]:
    """A value range holding [low, high] whose ends sit on a grid of half its span's order of magnitude.

    A plot that follows its data with this range changes its axis only when the data cross a grid line (a loss
    falling from 9 to 6 moves it every 0.5), not with every new extreme: an axis whose range changes recomputes its
    ticks and their text at the next paint.
    """
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"the range [{low}, {high}] is not finite; curves hold finite values only")
    span = high - low
    if span <= 0:
        span = abs(high) * 0.1 or 1.0
    step = 10.0 ** math.floor(math.log10(span)) / 2
    bottom, top = math.floor(low / step) * step, math.ceil(high / step) * step
    return (bottom - step, top + step) if top <= bottom else (bottom, top)  # a flat curve: one step either side
