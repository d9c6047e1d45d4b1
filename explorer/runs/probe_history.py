"""Probe snapshots taken during training: for each step, the inspection of every probe sentence pair.

Qt-free. The training panel adds a snapshot each time the probe worker re-inspects the pairs with the
current weights; the step slider asks for the snapshot nearest to a step. Memory stays bounded on long
runs: past `max_snapshots` steps, every other snapshot in the older part is dropped (the first and the
newest are always kept), so the slider still spans the whole run at a coarser spacing.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbePair:
    """A sentence pair re-inspected during training."""

    text_a: str
    text_b: str | None = None

    @property
    def caption(self) -> str:
        return self.text_a if not self.text_b else f"{self.text_a}  ‖  {self.text_b}"


class ProbeHistory:
    """step → {ProbePair: Inspection}, with nearest-step lookup for the step slider."""

    def __init__(self, max_snapshots: int = 400):
        if max_snapshots < 2:
            raise ValueError(f"max_snapshots is {max_snapshots}; keep at least 2 (the first and the newest)")
        self.max_snapshots = max_snapshots
        self._steps: list[int] = []  # sorted
        self._snapshots: dict[int, dict[ProbePair, Any]] = {}

    def __len__(self) -> int:
        return len(self._steps)

    def clear(self) -> None:
        self._steps.clear()
        self._snapshots.clear()

    def add(self, step: int, inspections: dict[ProbePair, Any]) -> None:
        """Store the inspections taken at `step` (merged with any already stored for that step)."""
        step = int(step)
        if step not in self._snapshots:
            bisect.insort(self._steps, step)
            self._snapshots[step] = {}
        self._snapshots[step].update(inspections)
        if len(self._steps) > self.max_snapshots:
            self._thin()

    def _thin(self) -> None:
        # Drop every other snapshot of the older half; the first and the newest half stay intact.
        half = len(self._steps) // 2
        older, newer = self._steps[:half], self._steps[half:]
        kept = older[::2]
        for step in older[1::2]:
            del self._snapshots[step]
        self._steps = kept + newer

    def steps(self, pair: ProbePair | None = None) -> list[int]:
        """The steps stored, oldest first; with `pair`, only those holding that pair."""
        if pair is None:
            return list(self._steps)
        return [step for step in self._steps if pair in self._snapshots[step]]

    def pairs(self) -> list[ProbePair]:
        """Every pair seen in any snapshot, in first-seen order."""
        seen: dict[ProbePair, None] = {}
        for step in self._steps:
            for pair in self._snapshots[step]:
                seen.setdefault(pair, None)
        return list(seen)

    def nearest_step(self, step: int) -> int | None:
        """The stored step closest to `step` (the earlier one on a tie); None when empty."""
        if not self._steps:
            return None
        index = bisect.bisect_left(self._steps, step)
        if index == 0:
            return self._steps[0]
        if index == len(self._steps):
            return self._steps[-1]
        before, after = self._steps[index - 1], self._steps[index]
        return before if step - before <= after - step else after

    def get(self, step: int, pair: ProbePair) -> Any | None:
        """The inspection of `pair` at exactly `step`, or None."""
        return self._snapshots.get(int(step), {}).get(pair)

    def nearest(self, step: int, pair: ProbePair) -> tuple[int, Any] | tuple[None, None]:
        """(stored step, inspection) nearest to `step` among snapshots that hold `pair`."""
        steps = [s for s in self._steps if pair in self._snapshots[s]]
        if not steps:
            return None, None
        index = bisect.bisect_left(steps, step)
        candidates = steps[max(0, index - 1) : index + 1]
        best = min(candidates, key=lambda s: (abs(s - step), s))
        return best, self._snapshots[best][pair]

    def at(self, step: int) -> dict[ProbePair, Any]:
        """All inspections stored at exactly `step` (empty dict when none)."""
        return dict(self._snapshots.get(int(step), {}))
