"""Length buckets: batches of similar length, so that padding to a batch's longest sequence wastes little.

Steps come in groups of k (`length_buckets`): one pool of examples is drawn per group, sorted by length (stably:
ties keep the pool's order) and cut into batches that are dealt out in a seeded random order. Every batch is a pure
function of the group's seed, so a run resumed mid-group gets the very batches it would have had. Pretraining
(bertcore.data.batches) and fine-tuning (bertcore.tasks.finetune_data) both batch this way.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")


def length_sorted_batches(items: Sequence[Item], lengths: Sequence[int], batch_size: int,
                          rng: random.Random) -> list[list[Item]]:
    """`items` sorted by `lengths` (stable), cut into batches of `batch_size` (the last may be short), shuffled
    by `rng`."""
    if len(items) != len(lengths):
        raise ValueError(f"{len(items)} items but {len(lengths)} lengths; give one length per item")
    order = sorted(range(len(items)), key=lengths.__getitem__)
    batches = [[items[i] for i in order[start : start + batch_size]] for start in range(0, len(order), batch_size)]
    rng.shuffle(batches)
    return batches


class LengthBuckets(Generic[Item]):
    """The batches of the current group of `length_buckets` steps, drawn once and kept until another group (or
    another batch size, rank or world size: any change of `key`) is asked for."""

    def __init__(self, length_buckets: int):
        if length_buckets < 1:
            raise ValueError(f"length_buckets is {length_buckets}; it must be >= 1 (1 = no length bucketing)")
        self.length_buckets = length_buckets
        self._group: tuple[Hashable, list[list[Item]]] | None = None

    def locate(self, step: int) -> tuple[int, int]:
        """(group, slot) of training step `step` (1-based): its group of steps and its place in it."""
        return divmod(step - 1, self.length_buckets)

    def batches(self, key: Hashable, draw: Callable[[], tuple[Sequence[Item], Sequence[int], random.Random]],
                batch_size: int) -> list[list[Item]]:
        """The group's batches; `draw()` gives its pool, each item's length and the random source that deals the
        batches out, and is called only when `key` names another group than the one kept."""
        if self._group is None or self._group[0] != key:
            items, lengths, rng = draw()
            self._group = (key, length_sorted_batches(items, lengths, batch_size, rng))
        return self._group[1]
