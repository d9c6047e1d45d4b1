"""The next step's batch made on a second thread (BatchesAhead): the same batches, one at a time, errors at their
step; and a training run with it logs what a run without it logs."""

from __future__ import annotations

import threading
import time

import pytest

from bertcore.training.batches_ahead import BatchesAhead
from bertcore.training.loop import TrainingLoop
from bertcore.training.pretraining import Trainer
from tests.bertcore.test_trainer import TINY_MODEL, corpus_path, make_config  # noqa: F401 (a fixture)


class Recorder:
    """make(step) -> ("batch", step), noting the thread of each call and whether two ever overlapped."""

    def __init__(self, fail_at: int | None = None, seconds: float = 0.0):
        self.calls: list[tuple[int, str]] = []
        self.overlapped = False
        self._busy = threading.Lock()
        self.fail_at, self.seconds = fail_at, seconds

    def __call__(self, step: int):
        if not self._busy.acquire(blocking=False):
            self.overlapped = True
            self._busy.acquire()
        try:
            self.calls.append((step, threading.current_thread().name))
            time.sleep(self.seconds)
            if step == self.fail_at:
                raise ValueError(f"no batch for step {step}")
            return ("batch", step)
        finally:
            self._busy.release()


def test_ahead_gives_each_step_its_own_batch_made_on_the_worker_thread():
    make = Recorder(seconds=0.01)
    batches = BatchesAhead(make, last_step=5, ahead=True)
    try:
        assert [batches.batch(step) for step in range(1, 6)] == [("batch", s) for s in range(1, 6)]
    finally:
        batches.close()
    assert [step for step, _ in make.calls] == [1, 2, 3, 4, 5]  # each once: none beyond the last step
    assert make.calls[0][1] == threading.current_thread().name  # the first has nothing ahead of it
    assert all(thread.startswith("next-batch") for _, thread in make.calls[1:])
    assert not make.overlapped


def test_without_ahead_every_batch_is_made_when_asked_for():
    make = Recorder()
    batches = BatchesAhead(make, last_step=3, ahead=False)
    assert [batches.batch(step) for step in (1, 2, 3)] == [("batch", 1), ("batch", 2), ("batch", 3)]
    assert {thread for _, thread in make.calls} == {threading.current_thread().name}


def test_an_error_making_a_batch_surfaces_at_its_step():
    batches = BatchesAhead(Recorder(fail_at=3), last_step=5, ahead=True)
    try:
        assert batches.batch(1) == ("batch", 1)
        assert batches.batch(2) == ("batch", 2)  # step 3's batch failed meanwhile, on the worker thread
        with pytest.raises(ValueError, match="no batch for step 3"):
            batches.batch(3)
    finally:
        batches.close()


def test_asking_out_of_order_waits_for_the_batch_being_made():
    make = Recorder(seconds=0.05)
    batches = BatchesAhead(make, last_step=9, ahead=True)
    try:
        batches.batch(1)  # starts step 2's on the worker
        assert batches.batch(5) == ("batch", 5)  # not step 2's: made here, after the worker's is done
    finally:
        batches.close()
    assert not make.overlapped


@pytest.mark.slow
def test_a_run_with_batches_made_ahead_logs_what_a_run_without_logs(corpus_path, tmp_path, monkeypatch):  # noqa: F811
    def run(name: str) -> list[dict]:
        config = make_config(corpus_path, tmp_path / name, steps=6, length_buckets=2)
        return [{k: v for k, v in stats.to_dict().items() if k not in ("tokens_per_second", "elapsed_seconds")}
                for stats in Trainer(config, model_config=TINY_MODEL).steps()]

    plain = run("plain")
    monkeypatch.setattr(TrainingLoop, "batches_ahead_on", ("cpu",))
    assert run("ahead") == plain
