"""The next step's batch, made on a second thread while this step computes: on a GPU the CPU's sampling, collation
and masking then overlap the device's work instead of leaving the device idle between steps."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class BatchesAhead:
    """`batch(step)` is `make(step)`; with `ahead=True` it also starts `make(step + 1)` on a worker thread, and the
    next call takes that result. `make` must be a pure function of the step (every task's train_batch is: its
    samplers and masks are seeded by the step, never by the global RNG), so the batches are the same either way.
    One batch is made at a time, so `make` is never run twice at once. An error raised making a batch surfaces
    from the call that asks for that step, as it would without the thread."""

    def __init__(self, make: Callable[[int], Any], last_step: int, ahead: bool):
        self._make, self._last_step = make, last_step
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="next-batch") if ahead else None
        self._pending: tuple[int, Future] | None = None

    def batch(self, step: int) -> Any:
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] == step:
            batch = pending[1].result()
        else:
            if pending is not None:  # made for another step: let it finish, so that `make` never runs twice at once
                pending[1].exception()
            batch = self._make(step)
        if self._executor is not None and step < self._last_step:
            self._pending = (step + 1, self._executor.submit(self._make, step + 1))
        return batch

    def close(self) -> None:
        """Let the thread go, after the batch it is making (if any); its result is dropped."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor, self._pending = None, None
