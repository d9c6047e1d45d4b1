"""How many torch threads an inspection gets: one for small inputs, all of them for large ones on idle cores.
Qt-free; the Inspect tab hands an `InspectionThreads` to its worker (`LatestJobWorker(torch_threads=...)`).
"""

from __future__ import annotations

import os

import torch

from explorer.inspector.state import InspectRequest

SINGLE_THREAD_FLOPS = 2e9  # mini at 30 tokens is ~0.25 GFLOP, base at 30 ~5, mini at 512 ~4, base at 512 ~100


class InspectionThreads:
    """How many torch threads an inspection gets (`explorer.common._qt.workers`, rule 4).

    A forward pass of a small input is a few hundred tiny kernels, and with two OpenMP threads each kernel
    waits for the slower thread; when anything else wants a core (the training tab, the GUI thread, another
    program) that wait costs a time slice per kernel, and a 7 ms inspection took 100–400 ms in measurements
    on a busy 2-core machine. So inspections below `SINGLE_THREAD_FLOPS` run on one thread; larger ones use
    every thread unless the load average says other work holds the cores (then one thread was faster even
    for base at 512).
    """

    def __init__(self, max_threads: int | None = None):
        # Read here, in the GUI thread: in the worker thread the count is whatever the last job set.
        self.max_threads = max_threads or torch.get_num_threads()

    def __call__(self, request: InspectRequest) -> int:
        try:
            large = estimated_flops(request) >= SINGLE_THREAD_FLOPS
        except AttributeError:  # a request without a real model (tests): nothing to size
            large = False
        return self.max_threads if large and not _cores_busy() else 1


def estimated_flops(request: InspectRequest) -> float:
    """Multiply-adds ×2 of one forward pass: the dense layers plus the attention products."""
    config = request.model.config
    positions, hidden, layers = len(request.encoding), config.hidden_size, config.num_hidden_layers
    dense = 2 * positions * layers * (4 * hidden * hidden + 2 * hidden * config.intermediate_size)
    attention = 4 * layers * positions * positions * hidden
    return float(dense + attention)


def _cores_busy() -> bool:
    """True when other work already holds half the cores (1-minute load average): then a second thread
    mostly waits for a core; one thread was 1.7–10× faster in every case measured with a busy 2-core machine."""
    try:
        return os.getloadavg()[0] >= (os.cpu_count() or 1) / 2
    except (AttributeError, OSError):  # no load average on this platform
        return False
