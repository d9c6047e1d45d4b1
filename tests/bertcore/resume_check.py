"""One check that a pretraining run stopped part-way and resumed continues exactly as one that never stopped.

The objectives' and the masking recipes' tests both ask it of their runs; the step numbers and every logged value
but the timings must agree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bertcore.models.config import BertConfig
from bertcore.training.pretraining import Trainer
from bertcore.training.settings import TrainingConfig

TIMINGS = {"tokens_per_second", "elapsed_seconds", "kind"}


def assert_resumes_exactly(config: TrainingConfig, model_config: BertConfig, stop_after: int = 3) -> Path:
    """Run `config` straight through, then again in an "interrupted" folder beside it, stopped after step
    `stop_after` and resumed; assert both logged the same steps and values. Returns the interrupted run's folder."""
    straight = [stats.to_dict() for stats in Trainer(config, model_config=model_config).steps()]
    interrupted = config.replace(out_dir=str(Path(config.out_dir).with_name("interrupted")))
    first = Trainer(interrupted, model_config=model_config)
    before = []
    for stats in first.steps():
        before.append(stats.to_dict())
        if stats.step == stop_after:
            first.request_stop()
    after = [stats.to_dict() for stats in Trainer(interrupted, resume=True).steps()]

    def numbers(records):
        return [value for record in records for key, value in sorted(record.items()) if key not in TIMINGS]

    assert [record["step"] for record in before + after] == list(range(1, config.steps + 1))
    assert numbers(before + after) == pytest.approx(numbers(straight), rel=1e-5)
    return Path(interrupted.out_dir)
