"""Length buckets (bertcore.data.batches), the one batching by length that pretraining and fine-tuning share."""

import random

import pytest

from bertcore.data.batches import LengthBuckets, length_sorted_batches


def test_batches_hold_neighbours_in_length_and_every_item_once():
    lengths = [9, 2, 7, 2, 5, 1, 8, 2, 6, 3]
    items = [f"item{i}" for i in range(len(lengths))]
    batches = length_sorted_batches(items, lengths, 3, random.Random("seed"))
    assert sorted(len(batch) for batch in batches) == [1, 3, 3, 3]  # the last batch is short
    ranked = sorted(batches, key=lambda batch: lengths[items.index(batch[0])])
    assert [item for batch in ranked for item in batch] == \
        ["item5", "item1", "item3", "item7", "item9", "item4", "item8", "item2", "item6", "item0"]  # ties keep order
    assert batches == length_sorted_batches(items, lengths, 3, random.Random("seed"))
    assert any(batches != length_sorted_batches(items, lengths, 3, random.Random(seed)) for seed in range(5))


def test_one_length_per_item():
    with pytest.raises(ValueError, match="3 items but 2 lengths"):
        length_sorted_batches([1, 2, 3], [1, 2], 2, random.Random(0))


def test_a_group_is_drawn_once_and_a_step_finds_its_group_and_slot():
    buckets = LengthBuckets(3)
    assert [buckets.locate(step) for step in (1, 3, 4, 7)] == [(0, 0), (0, 2), (1, 0), (2, 0)]
    draws = []

    def draw(group):
        def pool():
            draws.append(group)
            return list(range(6)), [6 - i for i in range(6)], random.Random(group)
        return pool

    first = buckets.batches(("rank0", 0), draw(0), 2)
    assert buckets.batches(("rank0", 0), draw(0), 2) is first and draws == [0]
    buckets.batches(("rank0", 1), draw(1), 2)
    buckets.batches(("rank0", 0), draw(0), 2)  # only the latest group is kept: a resume goes forward
    assert draws == [0, 1, 0]


def test_at_least_one_step_a_group():
    with pytest.raises(ValueError, match="length_buckets is 0; it must be >= 1"):
        LengthBuckets(0)
