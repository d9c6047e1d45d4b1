"""The coming steps' batches, made by worker processes while the device computes, so that the CPU's sampling,
collation and masking (20.6 ms of a 68.6 ms BERT-base step at 256 × 128 on an H200, measured) could overlap the
device's work instead of leaving it idle between steps.

Two workers on CUDA for pretraining (a task asks for them: PretrainingTask.batch_workers). On that H200
(benchmarks/train_loop_speed.py, base at 256 × 128, runs alternating so that neither order has the first run's
warm-up): three runs with two forked workers made 290,599–330,135 tokens/s against 216,267–242,036 for three making
each batch in turn, 1.40× by the medians. An earlier try that timed the workers' run first in one process had them
at 0.43×: that was the warm-up. A thread instead of processes was 0.37×: it holds the GIL that the training thread
needs to launch kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

# A worker that has made no batch for this long is taken for stuck (e.g. a lock held at fork time); the run then
# stops with the loader's error instead of waiting for ever. Far above any batch's time.
WORKER_TIMEOUT_SECONDS = 300


class _StepBatches(Dataset):
    """Item `step` is `make(step)`: a DataLoader over a range of steps yields their batches in order."""

    def __init__(self, make: Callable[[int], Any]):
        self.make = make

    def __getitem__(self, step: int) -> Any:
        return self.make(step)


class BatchesAhead:
    """`batch(step)` is `make(step)`. With `workers > 0` the steps first_step..last_step are made in that order by
    that many forked processes, a few ahead of the step asking; a step asked for out of that order is made here.
    `make` must be a pure function of the step (every task's train_batch is: its samplers and masks are seeded by
    the step, never by the global RNG), so the batches are the same either way. An error raised making a batch
    surfaces from the call that asks for that step."""

    def __init__(self, make: Callable[[int], Any], first_step: int, last_step: int, workers: int):
        self._make = make
        self._next_step = first_step
        self._iterator = None
        if workers > 0 and first_step <= last_step:
            loader = DataLoader(
                _StepBatches(make), batch_size=None, sampler=range(first_step, last_step + 1), num_workers=workers,
                prefetch_factor=2, multiprocessing_context="fork", timeout=WORKER_TIMEOUT_SECONDS,
                # The workers' seeds come from this generator, not from the global RNG the run's dropout uses.
                generator=torch.Generator().manual_seed(0))
            self._iterator = iter(loader)

    def batch(self, step: int) -> Any:
        if self._iterator is not None and step == self._next_step:
            self._next_step += 1
            return next(self._iterator)
        self.close()  # out of order (never in the loop): the workers' batches are for other steps
        return self._make(step)

    def close(self) -> None:
        """Stop the workers (a batch they are making is dropped)."""
        iterator, self._iterator = self._iterator, None
        if iterator is not None:
            iterator._shutdown_workers()
