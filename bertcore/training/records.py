"""A step's statistics as a metrics.jsonl record and back, for the statistics that carry their metrics by name
(a fine-tuning task's, a pretraining objective's other than mlm+nsp): one flat JSON object per record."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


def step_record(stats: Any) -> dict[str, Any]:
    """A step dataclass with a `metrics` mapping as a flat "step" record: its fields, then its metrics by name; its
    evaluation, checkpoint and warning are records of their own."""
    values = {"kind": "step", **dataclasses.asdict(stats)}
    for name in ("metrics", "eval", "checkpoint", "warning"):
        del values[name]
    return {**values, **stats.metrics}


def metric_numbers(record: Mapping[str, Any], leave_out: set[str]) -> dict[str, float]:
    """The record's numbers outside `leave_out` (a record's fixed fields): its metrics by name."""
    return {key: float(value) for key, value in record.items()
            if key not in leave_out and isinstance(value, int | float) and not isinstance(value, bool)}
