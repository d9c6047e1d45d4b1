"""The one progress record that long analyses yield, so a GUI can show a bar, draw partial results and cancel.

Long work in bertcore is a generator (as `Trainer.steps()` is): each `yield` is a point where the consumer may
stop by simply not asking for more (or `close()`-ing it). Between two yields the model is left as it was found
(training mode restored), so an abandoned generator holds no state hostage.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class Progress(Generic[ResultT]):
    done: int  # units finished: batches, inputs, evaluations (says which in the yielding function's docstring)
    total: int | None  # units in all; None when the input had no length
    result: ResultT  # the result so far (a running sum, a partial curve); final when done == total

    @property
    def fraction(self) -> float | None:
        """done / total in [0, 1], or None when the total is unknown."""
        if not self.total:
            return None
        return self.done / self.total


def run_to_end(progress: Iterable[Progress[ResultT]]) -> Progress[ResultT] | None:
    """Exhaust a progress generator; its last record (None if it yielded nothing)."""
    last = deque(progress, maxlen=1)
    return last[0] if last else None
