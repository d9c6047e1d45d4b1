"""The divergence monitor on loss curves written down: healthy noisy runs never trip it, an explosion does."""

from __future__ import annotations

import math
import random

import pytest

from bertcore.training.divergence import DivergenceMonitor


def feed(monitor: DivergenceMonitor, losses) -> list[int]:
    """The steps at which the monitor warned (started rising)."""
    warned = []
    for step, loss in enumerate(losses, start=1):
        monitor.update(step, loss)
        if monitor.started_rising:
            warned.append(step)
        if monitor.diverged:
            break
    return warned


@pytest.mark.parametrize("seed", range(5))
def test_healthy_noisy_curves_never_trip_it(seed):
    rng = random.Random(seed)
    # From uniform guessing (ln 8000 + ln 2) down to 2 nats, then a plateau; ±40% batch noise, occasional spikes.
    curve = [(9.7 - 2.0) * math.exp(-step / 300) + 2.0 for step in range(3000)]
    noisy = [loss * rng.uniform(0.6, 1.4) * (3 if rng.random() < 0.01 else 1) for loss in curve]
    monitor = DivergenceMonitor(factor=4.0, patience=10)
    assert feed(monitor, noisy) == [] and not monitor.diverged
    small = [0.05 * rng.uniform(0.2, 5.0) for _ in range(500)]  # a memorised corpus: tiny, very noisy losses
    assert feed(DivergenceMonitor(factor=4.0, patience=10), small) == []


def test_an_explosion_warns_then_diverges_after_patience_steps():
    losses = [4.0, 3.9, 3.8, 3.8, 3.7] + [5.0 * 1.5**k for k in range(30)]
    monitor = DivergenceMonitor(factor=4.0, patience=10)
    warned = feed(monitor, losses)
    assert len(warned) == 1 and monitor.diverged and monitor.steps_above == 10
    assert monitor.best == pytest.approx(min(monitor.best, 4.0)) and monitor.best_step <= 5
    assert monitor.describe(warned[0] + 9).startswith(f"the smoothed loss is {monitor.smoothed:.4g} at step")
    assert not monitor.confirms(monitor.smoothed) and not monitor.confirms(float("nan"))


def test_off_it_only_tracks_the_average_and_state_round_trips():
    monitor = DivergenceMonitor(factor=0, patience=3)
    feed(monitor, [4.0] + [1e6] * 20)
    assert not monitor.diverged and not monitor.rising and monitor.smoothed > 1e5
    copy = DivergenceMonitor(factor=0, patience=3)
    copy.load_state_dict(monitor.state_dict())
    assert copy == monitor
