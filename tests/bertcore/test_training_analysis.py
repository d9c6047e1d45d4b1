"""Analysis records while a run trains (bertcore.analysis.schedule, the training loop's analysis hook): off by
default; due at step 0, every N steps and the last step; each equal to analysis_record on the checkpoint of its
step, whether measured in the loop's thread or on a copy in a background thread; at most one in flight in the
background, a record due meanwhile deferred and the steps passed over said; one record per step through a stop and
a resume; a measurement that fails is a warning and training goes on; a treebank that cannot serve is refused
before training. bert-train's side: test_bert_train_analysis.py."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

import bertcore
from bertcore.analysis import schedule as schedule_module
from bertcore.analysis.records import analysis_record, shipped_analysis_data
from bertcore.analysis.run_analysis import read_analysis_records
from bertcore.analysis.schedule import AnalysisSchedule
from bertcore.errors import LinguisticDataError
from bertcore.models.checkpoint import load_pretrained
from bertcore.training.pretraining import Trainer, TrainingConfig
from tests.bertcore.analysis_runs import MODEL, SMALL, run_config

pytestmark = pytest.mark.usefixtures("one_thread")


def without_seconds(record: dict) -> dict:
    return {key: value for key, value in record.items() if key != "seconds"}


def trained(config: TrainingConfig, analysis: AnalysisSchedule | None, **options) -> list:
    with Trainer(config, model_config=MODEL, analysis=analysis, **options) as trainer:
        return list(trainer.steps())


def post_hoc(run: Path, record: dict) -> dict:
    """analysis_record on the checkpoint of the record's step, with the record's index."""
    model, tokenizer = load_pretrained(run / "checkpoints" / f"step-{record['step']:06d}")
    treebank, test, pairs = shipped_analysis_data()
    return analysis_record(model, tokenizer, treebank, pairs, test_treebank=test, settings=SMALL,
                           index=record["index"])


def test_analysis_is_off_unless_asked_for_and_needs_something_to_measure_with(tmp_path):
    assert TrainingConfig().analysis_every == 0 and TrainingConfig().treebank is None
    with pytest.raises(ValueError, match="analysis_every is 3, but the loop was given nothing to measure the model "
                                         r"with: pass analysis=bertcore.AnalysisSchedule\(\)"):
        Trainer(run_config(tmp_path, analysis_every=3), model_config=MODEL)
    with pytest.raises(ValueError, match="analysis_every must be"):
        TrainingConfig(analysis_every=-1)
    with pytest.raises(ValueError, match="treebank is ''; give the path of a CoNLL-U file"):
        TrainingConfig(treebank="")
    assert bertcore.AnalysisSchedule is AnalysisSchedule


@pytest.mark.slow
def test_without_analysis_every_a_run_writes_no_records(tmp_path):
    stats = trained(run_config(tmp_path, steps=2), AnalysisSchedule(settings=SMALL))  # a hook, but nothing due
    assert [s.analysis for s in stats] == [None, None]
    assert read_analysis_records(tmp_path / "run") == []
    assert "analysis" not in stats[0].to_dict()


@pytest.mark.slow
def test_records_are_due_at_0_every_n_and_the_last_step_and_equal_the_checkpoints_record(tmp_path):
    config = run_config(tmp_path, steps=5, analysis_every=2, checkpoint_every=1)
    stats = trained(config, AnalysisSchedule(settings=SMALL))
    records = read_analysis_records(tmp_path / "run")
    assert [(r["step"], r["index"]) for r in records] == [(0, 0), (2, 1), (4, 2), (5, 3)]
    assert [r["blimp"] is not None for r in records] == [True, False, True, False]  # blimp_every 2: by index
    # each step record carries the record finished since the previous one: step 0's comes with step 1
    assert [(s.step, s.analysis and s.analysis["step"]) for s in stats] == [(1, 0), (2, 2), (3, None), (4, 4),
                                                                            (5, 5)]
    assert [s.analysis for s in stats if s.analysis] == records
    for record in records[1:]:
        assert without_seconds(record) == {"kind": "analysis", "step": record["step"],
                                           **without_seconds(post_hoc(tmp_path / "run", record))}
    with Trainer(config.replace(out_dir=str(tmp_path / "again"), analysis_every=0), model_config=MODEL) as fresh:
        treebank, test, pairs = shipped_analysis_data()
        expected = analysis_record(fresh.model, fresh.tokenizer, treebank, pairs, test_treebank=test, settings=SMALL,
                                   index=0)
    assert without_seconds(records[0]) == {"kind": "analysis", "step": 0, **without_seconds(expected)}
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert kinds[:3] == ["step", "checkpoint", "analysis"]  # step 1, its checkpoint, then step 0's record


def measured(record: dict) -> dict:
    """The record without its timings and without what says when it ran (a deferred record's due and skipped steps)."""
    return {key: value for key, value in without_seconds(record).items() if key not in ("due_step", "skipped_steps")}


@pytest.mark.slow
def test_in_the_background_the_records_are_those_of_the_same_weights(tmp_path):
    trained(run_config(tmp_path / "inline", steps=5, analysis_every=2, checkpoint_every=1),
            AnalysisSchedule(settings=SMALL))
    inline = {r["step"]: without_seconds(r) for r in read_analysis_records(tmp_path / "inline" / "run")}
    config = run_config(tmp_path / "background", steps=5, analysis_every=2, checkpoint_every=1)
    schedule = AnalysisSchedule(in_background=True, settings=SMALL, threads=1)
    stats = trained(config, schedule)
    run = Path(config.out_dir)
    records = read_analysis_records(run)
    assert [s.analysis for s in stats if s.analysis] == records and schedule.uncarried_records == []
    assert (records[0]["step"], records[-1]["step"]) == (0, 5)  # the first and the last are never deferred
    compared = 0
    for record in records:
        if record["step"] in inline and inline[record["step"]]["index"] == record["index"]:
            assert measured(record) == inline[record["step"]]
            compared += 1
        if record["step"]:
            assert measured(record) == {"kind": "analysis", "step": record["step"],
                                        **without_seconds(post_hoc(run, record))}
    assert compared >= 2


class GatedSchedule(AnalysisSchedule):
    """A background schedule whose records wait for the test to open a gate: a record in flight for as long as the
    test wants."""

    def __init__(self):
        super().__init__(in_background=True, settings=SMALL, threads=1)
        self.gate = threading.Event()
        self.started: list[int] = []
        self.finished: list[int] = []

    def _record_maker(self, due, step, skipped):
        make = super()._record_maker(due, step, skipped)

        def gated(model, stop):
            self.started.append(step)
            self.gate.wait(timeout=60)
            record = make(model, stop)
            self.finished.append(step)
            return record

        return gated


@pytest.mark.slow
def test_a_record_due_while_one_is_in_flight_is_deferred_and_the_steps_passed_over_are_said(tmp_path):
    config = run_config(tmp_path, steps=9, analysis_every=2, checkpoint_every=1)
    schedule = GatedSchedule()
    stats = []
    with Trainer(config, model_config=MODEL, analysis=schedule) as trainer:
        for step in trainer.steps():
            stats.append(step)
            if step.step == 5:  # steps 2 and 4 fell due while step 0's record waited at the gate
                assert schedule.started == [0]
                schedule.gate.set()
                deadline = time.monotonic() + 60
                while schedule.finished != [0] and time.monotonic() < deadline:
                    time.sleep(0.01)
    # step 6 (due too) hands over step 0's record, so step 6's is deferred to step 7; step 8's is passed over for
    # the last step's, which is never deferred
    records = read_analysis_records(tmp_path / "run")
    assert [(r["step"], r.get("due_step"), r.get("skipped_steps"), r["index"]) for r in records] == [
        (0, None, None, 0), (7, 6, [2, 4], 3), (9, None, [8], 5)]
    assert [(s.step, s.analysis["step"]) for s in stats if s.analysis] == [(6, 0), (8, 7), (9, 9)]
    assert schedule.started == [0, 7, 9]  # never two at once, never one queued behind another
    for record in records[1:]:
        assert measured(record) == {"kind": "analysis", "step": record["step"],
                                    **without_seconds(post_hoc(tmp_path / "run", record))}


@pytest.mark.slow
def test_a_stopped_and_resumed_run_keeps_one_record_per_step_and_the_straight_runs_values(tmp_path):
    straight = run_config(tmp_path / "straight", steps=6, analysis_every=2)
    trained(straight, AnalysisSchedule(settings=SMALL))
    expected = [without_seconds(r) for r in read_analysis_records(tmp_path / "straight" / "run")]
    config = run_config(tmp_path / "stopped", steps=6, analysis_every=2)
    with Trainer(config, model_config=MODEL, analysis=AnalysisSchedule(settings=SMALL)) as trainer:
        for stats in trainer.steps():
            if stats.step == 4:  # its record is written, then the stop's checkpoint
                trainer.request_stop()
    trained(config, AnalysisSchedule(settings=SMALL), resume=True)
    # and once more from the checkpoint of step 2: the records after it are dropped with the rest, then made again
    trained(config, AnalysisSchedule(settings=SMALL), resume=str(tmp_path / "stopped" / "run" / "checkpoints" /
                                                                   "step-000002"))
    records = [without_seconds(r) for r in read_analysis_records(tmp_path / "stopped" / "run")]
    assert [r["step"] for r in records] == [0, 2, 4, 6]
    assert records == expected  # a resumed run continues exactly: the same weights, the same records


@pytest.mark.slow
def test_a_failing_measurement_is_a_warning_and_training_goes_on(tmp_path, monkeypatch):
    calls = []
    real = schedule_module.iter_analysis_record

    def fails_the_second_time(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("something unforeseen")
        yield from real(*args, **kwargs)

    monkeypatch.setattr(schedule_module, "iter_analysis_record", fails_the_second_time)
    stats = trained(run_config(tmp_path, steps=5, analysis_every=2), AnalysisSchedule(settings=SMALL))
    assert [s.step for s in stats] == [1, 2, 3, 4, 5]
    assert [r["step"] for r in read_analysis_records(tmp_path / "run")] == [0]
    assert stats[1].warning == ("the analysis of step 2 failed (RuntimeError: something unforeseen); the run goes on "
                                "without analysis records")
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {"kind": "warning", "step": 2, "message": stats[1].warning} in lines
    assert len(calls) == 2  # no more tries after the failure


def test_a_treebank_that_cannot_serve_is_refused_before_training(tmp_path):
    broken = tmp_path / "broken.conllu"
    broken.write_text("1\tword\n\n")
    with pytest.raises(LinguisticDataError, match=r"broken\.conllu line 1"):
        Trainer(run_config(tmp_path, analysis_every=2, treebank=str(broken)), model_config=MODEL,
                analysis=AnalysisSchedule(settings=SMALL))
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
