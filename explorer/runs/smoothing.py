"""TensorBoard's smoothing of a curve, exactly, and fast enough to redraw fifty 100,000-point runs at once. Qt-free.

TensorBoard (`webapp/widgets/line_chart_v2/data_transformer.ts`, `classicSmoothing`) smooths with a debiased
exponential moving average: starting from 0, each finite value y gives

    last = weight × last + (1 − weight) × y        smoothed = last / (1 − weight ** count)

where count is the number of finite values so far (the division undoes the pull towards the start at 0). A value
that is not finite (NaN, ±inf: a diverged step) is passed through as it is and neither moves `last` nor counts. A
series whose values all equal the first is left as it is. The weight is clamped to [0, 1]; a weight that is not a
number counts as 0. Weight 1 therefore gives 0 everywhere, as TensorBoard's does.

The recurrence is computed without a Python loop over the points (`_recurrence`): the points are cut into blocks,
each block's moving average from 0 is a cumulative sum scaled by powers of the weight, and the blocks are joined
by the same recurrence over the blocks' ends (a far shorter one). It agrees with the point-by-point loop to
rounding (tests/explorer/test_curves_smoothing.py holds it to 1e-12 of the series' scale).

`Smoother` extends a smoothed series as points arrive (a live run), so a redraw smooths only the new points.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["Smoother", "smooth"]

# A block is at most this long: the cumulative sums inside it lose about BLOCK × 1e-16 of the series' scale at
# worst (measured against the loop: ~1e-14 in practice), and the weight's powers over it stay far from overflow.
_BLOCK = 1024
_LARGEST_SCALE = 1e100  # the weight's inverse powers inside a block stay below this


def _clamped(weight: float) -> float:
    weight = float(weight)
    if not math.isfinite(weight):
        return 0.0
    return min(1.0, max(0.0, weight))


def _recurrence(terms: np.ndarray, weight: float) -> np.ndarray:
    """a[k] = weight × a[k−1] + terms[k], from a[−1] = 0, for 0 ≤ weight < 1, without a loop over the points."""
    count = terms.size
    if count == 0 or weight == 0.0:
        return terms.copy()
    if weight ** count < 1e-18 and count > 64 and weight < 0.5:
        # A short memory: a[k] is the sum of the last few terms, weighted (what is older is below rounding).
        span = math.ceil(math.log(1e-18) / math.log(weight))
        out = terms.copy()
        factor = 1.0
        for lag in range(1, min(span, count)):
            factor *= weight
            out[lag:] += factor * terms[:-lag]
        return out
    block = max(1, min(_BLOCK, count, int(math.log(_LARGEST_SCALE) / -math.log(weight))))
    if count <= 32 or block == 1:  # too short to be worth arrays
        out, running = terms.copy(), 0.0
        for index in range(count):
            running = out[index] = weight * running + terms[index]
        return out
    blocks = -(-count // block)
    padded = np.zeros(blocks * block)
    padded[:count] = terms
    padded = padded.reshape(blocks, block)  # (blocks, block)
    powers = weight ** np.arange(block)  # weight ** i, i = 0 … block − 1
    # Inside a block from 0: a[i] = Σ_{j ≤ i} weight^(i − j) t[j] = weight^i × Σ_{j ≤ i} t[j] / weight^j.
    local = np.cumsum(padded / powers, axis=1) * powers  # (blocks, block)
    if blocks > 1:
        # What each block carries in: the value at the end of the block before, itself the same recurrence
        # over the blocks' own ends with the weight of a whole block.
        ends = _recurrence(local[:, -1].copy(), weight**block)  # (blocks,)
        local[1:] += ends[:-1, None] * (powers * weight)[None, :]
    return local.reshape(-1)[:count]


def smooth(values, weight: float) -> np.ndarray:
    """TensorBoard's smoothing of `values` (any 1-D sequence of numbers) with `weight` in [0, 1]; a new float64
    array of the same length. See the module docstring for the formula and its rules."""
    values = np.array(values, dtype=np.float64)  # a copy: the result
    if values.ndim != 1:
        raise ValueError(f"smooth takes a 1-D series of values; it was given an array of shape {values.shape}")
    weight = _clamped(weight)
    if values.size == 0 or bool(np.all(values == values[0])):
        return values  # TensorBoard leaves a constant series as it is (its #786); NaN never equals the first
    finite = np.isfinite(values)
    values[finite], _ = _smooth_finite(values[finite], weight, last=0.0, count=0)
    return values


def _smooth_finite(values: np.ndarray, weight: float, *, last: float, count: int) -> tuple[np.ndarray, float]:
    """The smoothed values of finite `values`, continuing from TensorBoard's `last` after `count` finite points,
    and `last` after them."""
    if values.size == 0:
        return values, last
    if weight == 1.0:
        return np.full(values.size, last), last  # last × 1 + 0 × y: it never moves, and there is no debiasing
    scale = max(float(np.max(np.abs(values))), abs(last)) or 1.0
    scale = 2.0 ** math.floor(math.log2(scale))  # exact: the recurrence runs on values near 1 whatever their size
    terms = values * ((1.0 - weight) / scale)
    terms[0] += weight * last / scale
    averages = _recurrence(terms, weight) * scale
    return averages / _debias(weight, count, values.size), float(averages[-1])


def _debias(weight: float, count: int, size: int) -> np.ndarray:
    """1 − weight ** k for k = count + 1 … count + size. Where weight ** k is near 1 the subtraction magnifies any
    difference in the power a thousandfold, so those powers are Python's (the C library's `pow`, as a browser's
    Math.pow), not numpy's vectorised ones, which may differ in the last bit; past the point where weight ** k is
    below half a unit in the last place of 1, 1 − weight ** k is exactly 1."""
    debias = np.ones(size)
    if weight == 0.0:
        return debias
    last_below_one = int(math.log(2.0**-54) / math.log(weight)) + 1  # weight ** k < 2 ** −54 beyond it
    head = max(0, min(size, last_below_one - count))
    if head:
        counts = np.arange(count + 1, count + head + 1, dtype=np.float64)
        powers = weight**counts
        near_one = int(np.searchsorted(-powers, -0.5))  # powers fall with k: those above 1/2 come first
        powers[:near_one] = [weight ** int(k) for k in counts[:near_one]]
        debias[:head] = 1.0 - powers
    return debias


class Smoother:
    """A series smoothed as its values arrive: `extend(values)` returns the smoothed values of the points just
    added, and `values` holds all of them, equal to `smooth(every value so far, weight)`.

    While every value so far equals the first, the series is constant and stays as it is; the first value that
    differs makes it smooth the whole series once, and `restarted` is then True until the next `extend`: what
    was returned before no longer holds."""

    def __init__(self, weight: float):
        self.weight = _clamped(weight)
        self._raw = np.zeros(0)
        self._smoothed = np.zeros(0)
        self._size = 0
        self._last = 0.0  # TensorBoard's `last` after the finite points so far
        self._count = 0  # finite points so far
        self._constant = True
        self.restarted = False

    @property
    def values(self) -> np.ndarray:
        return self._smoothed[: self._size]

    def extend(self, values) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        self.restarted = False
        start = self._size
        self._grow(start + values.size)
        self._raw[start : start + values.size] = values
        self._size += values.size
        raw = self._raw[: self._size]
        if self._constant:
            if raw.size == 0 or bool(np.all(raw == raw[0])):
                self._smoothed[start : self._size] = raw[start:]
                return self._smoothed[start : self._size]
            self._constant = False  # from now on it smooths: all of it, once
            self.restarted = start > 0
            start = 0
        new = raw[start:]
        smoothed = new.copy()
        finite = np.isfinite(new)
        finite_values = new[finite]
        smoothed[finite], self._last = _smooth_finite(finite_values, self.weight, last=self._last, count=self._count)
        self._count += finite_values.size
        self._smoothed[start : self._size] = smoothed
        return self._smoothed[start : self._size]

    def _grow(self, size: int) -> None:
        if size > self._raw.size:
            capacity = max(1024, 2 * size)
            self._raw = np.resize(self._raw, capacity)
            self._smoothed = np.resize(self._smoothed, capacity)
