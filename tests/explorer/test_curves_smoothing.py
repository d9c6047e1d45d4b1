"""`explorer.runs.smooth` is TensorBoard's smoothing to 1e-12: checked against a point-by-point transcription of its
`classicSmoothing` (webapp/widgets/line_chart_v2/data_transformer.ts), written here independently of the module."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer.runs import smooth
from explorer.runs.smoothing import Smoother


def tensorboard_classic_smoothing(values: list[float], weight: float) -> list[float]:
    """TensorBoard's loop, one point at a time, as its TypeScript reads."""
    if not math.isfinite(weight):
        weight = 0.0
    weight = max(0.0, min(weight, 1.0))
    if all(value == values[0] for value in values):  # TypeScript's `==` on numbers: NaN equals nothing
        return list(values)
    last, accumulated, smoothed = 0.0, 0, []
    for value in values:
        if not math.isfinite(value):
            smoothed.append(value)
            continue
        last = last * weight + (1 - weight) * value
        accumulated += 1
        debias = 1 if weight == 1 else 1 - math.pow(weight, accumulated)
        smoothed.append(last / debias)
    return smoothed


def assert_same(ours: np.ndarray, theirs: list[float], scale: float) -> None:
    theirs = np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape
    same_kind = np.isfinite(ours) == np.isfinite(theirs)
    assert same_kind.all()
    assert np.array_equal(ours[~np.isfinite(ours)], theirs[~np.isfinite(theirs)], equal_nan=True)
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=0, atol=1e-12 * scale)


WEIGHTS = (0.0, 1e-3, 0.25, 0.5, 0.6, 0.8, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0)


@pytest.mark.parametrize("weight", WEIGHTS)
@pytest.mark.parametrize("size", [1, 2, 7, 33, 700, 5_000])
def test_smooth_equals_tensorboards_loop(weight, size):
    rng = np.random.default_rng(size)
    values = 2.5 + np.cumsum(rng.normal(scale=0.1, size=size))
    assert_same(smooth(values, weight), tensorboard_classic_smoothing(values.tolist(), weight), 2.5)


@pytest.mark.parametrize("weight", [0.6, 0.99, 0.999])
@pytest.mark.parametrize("scale", [1e-7, 1e9])
def test_smooth_holds_at_any_scale(weight, scale):
    values = scale * (1 + np.abs(np.random.default_rng(1).normal(size=3_000)))
    assert_same(smooth(values, weight), tensorboard_classic_smoothing(values.tolist(), weight), values.max())


@pytest.mark.parametrize("weight", [0.0, 0.6, 0.999, 1.0])
def test_non_finite_values_pass_through_without_counting(weight):
    values = [math.nan, 4.0, math.inf, 3.0, -math.inf, 5.0, math.nan, 2.0, 6.0]
    ours = smooth(values, weight)
    assert_same(ours, tensorboard_classic_smoothing(values, weight), 6.0)
    assert math.isnan(ours[0]) and ours[2] == math.inf and ours[4] == -math.inf
    if 0 < weight < 1:  # the first finite point is itself: the count started at the 4.0, not at the NaN
        assert ours[1] == pytest.approx(4.0, abs=1e-15)


def test_a_constant_series_is_left_as_it_is():
    assert smooth([3.0] * 50, 0.9).tolist() == [3.0] * 50
    assert smooth([3.0] * 50, 1.0).tolist() == [3.0] * 50  # not the zeros weight 1 gives any other series
    assert smooth([], 0.6).shape == (0,)
    # NaN equals nothing, not even the first value: a series holding one is smoothed (and keeps its NaN)
    values = [3.0, math.nan, 3.0]
    assert_same(smooth(values, 0.9), tensorboard_classic_smoothing(values, 0.9), 3.0)


def test_weights_out_of_range_are_clamped_as_tensorboard_does():
    values = [1.0, 2.0, 4.0, 3.0]
    for weight in (-0.5, 1.5, math.nan, math.inf):
        assert_same(smooth(values, weight), tensorboard_classic_smoothing(values, weight), 4.0)
    assert smooth(values, 1.0).tolist() == [0.0] * 4  # TensorBoard's own answer for weight 1


def test_smooth_leaves_its_input_alone_and_refuses_a_table():
    values = np.array([1.0, 5.0, 2.0])
    smooth(values, 0.5)
    assert values.tolist() == [1.0, 5.0, 2.0]
    with pytest.raises(ValueError, match="1-D"):
        smooth(np.ones((2, 3)), 0.5)


@pytest.mark.parametrize("weight", [0.6, 0.999])
def test_smoother_extends_as_points_arrive_and_agrees_with_smooth(weight):
    rng = np.random.default_rng(3)
    values = np.concatenate([[2.0, 2.0, 2.0], 2 + rng.normal(size=4_000)])
    values[[10, 500]] = math.nan
    smoother = Smoother(weight)
    assert smoother.extend(values[:3]).tolist() == [2.0, 2.0, 2.0]  # constant so far: as it is
    smoother.extend(values[3:4])
    assert smoother.restarted  # no longer constant: all of it was smoothed again
    for chunk in np.array_split(values[4:], 9):
        new = smoother.extend(chunk)
        assert new.size == chunk.size and not smoother.restarted
    assert_same(smoother.values, tensorboard_classic_smoothing(values.tolist(), weight), 4.0)
