"""The coming steps' batches made by worker processes (BatchesAhead): the same batches in order, errors at their
step, a step out of order made at once; and a training run with workers logs what a run without them logs."""

from __future__ import annotations

import os

import pytest
import torch

from bertcore.training.batches_ahead import BatchesAhead
from bertcore.training.pretraining import PretrainingTask, Trainer
from tests.bertcore.test_trainer import TINY_MODEL, corpus_path, make_config  # noqa: F401 (a fixture)


def made_by(step: int) -> dict:
    """A batch that says which process made it; step 4 cannot be made."""
    if step == 4:
        raise ValueError("no batch for step 4")
    return {"step": step, "pid": os.getpid(), "ids": torch.full((2, 3), step)}


def test_workers_make_each_step_s_batch_in_order_in_other_processes():
    batches = BatchesAhead(made_by, first_step=1, last_step=3, workers=2)
    try:
        made = [batches.batch(step) for step in (1, 2, 3)]
    finally:
        batches.close()
    assert [b["step"] for b in made] == [1, 2, 3]
    assert all(torch.equal(b["ids"], torch.full((2, 3), b["step"])) for b in made)
    assert all(b["pid"] != os.getpid() for b in made)


def test_without_workers_every_batch_is_made_here():
    batches = BatchesAhead(made_by, first_step=1, last_step=3, workers=0)
    assert [batches.batch(step)["pid"] for step in (1, 2, 3)] == [os.getpid()] * 3


def test_an_error_making_a_batch_surfaces_at_its_step():
    batches = BatchesAhead(made_by, first_step=2, last_step=6, workers=2)
    try:
        assert [batches.batch(step)["step"] for step in (2, 3)] == [2, 3]
        with pytest.raises(ValueError, match="no batch for step 4"):
            batches.batch(4)
    finally:
        batches.close()


def test_a_step_out_of_order_is_made_here_and_the_workers_stop():
    batches = BatchesAhead(made_by, first_step=1, last_step=9, workers=1)
    assert batches.batch(1)["pid"] != os.getpid()
    sixth = batches.batch(6)
    assert (sixth["step"], sixth["pid"]) == (6, os.getpid())
    assert batches.batch(7)["pid"] == os.getpid()  # the workers were stopped: everything is made here now


@pytest.mark.slow
def test_a_run_with_batch_workers_logs_what_a_run_without_logs(corpus_path, tmp_path, monkeypatch):  # noqa: F811
    def run(name: str, **changes) -> list[dict]:
        config = make_config(corpus_path, tmp_path / name, length_buckets=2, **changes)
        return [{k: v for k, v in stats.to_dict().items() if k not in ("tokens_per_second", "elapsed_seconds")}
                for stats in Trainer(config, model_config=TINY_MODEL).steps()]

    plain = run("plain", steps=6)
    monkeypatch.setattr(PretrainingTask, "batch_workers", {"cpu": 2})
    assert run("workers", steps=6) == plain
    # Stopped after step 3 and resumed: the workers start again at step 4.
    config = make_config(corpus_path, tmp_path / "resumed", length_buckets=2, steps=6, checkpoint_every=3)
    first = Trainer(config, model_config=TINY_MODEL)
    logged = []
    for stats in first.steps():
        logged.append(stats)
        if stats.step == 3:
            first.request_stop()
    first.close()
    second = Trainer(config, model_config=TINY_MODEL, resume=True)
    logged += list(second.steps())
    second.close()
    assert [{k: v for k, v in s.to_dict().items() if k not in ("tokens_per_second", "elapsed_seconds")}
            for s in logged] == plain
