"""A finished run's checkpoints analysed afterwards (bertcore.analysis.run_analysis.analyse_checkpoints): a record per
checkpoint step appended to metrics.jsonl, equal to analysis_record on that checkpoint's weights; progress a part at
a time; Cancel leaves nothing half-done and a second pass appends only the missing steps; a run folder a live run
holds, a folder that is no run, and a treebank too small are refused with what to do."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import bertcore
from bertcore.analysis.records import RecordSettings, analysis_record, shipped_analysis_data
from bertcore.analysis.run_analysis import analyse_checkpoints, read_analysis_records
from bertcore.analysis.treebank import shipped_treebank_path
from bertcore.errors import AnalysisError, RunFolderBusyError
from bertcore.files.run_folder import RunFolder
from bertcore.models.checkpoint import load_pretrained
from bertcore.training.pretraining import Trainer
from tests.bertcore.analysis_runs import MODEL, SMALL, run_config

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A run of 6 steps with checkpoints at 2, 4 and 6 and final/ (step 6), without analysis records."""
    folder = tmp_path_factory.mktemp("finished")
    with Trainer(run_config(folder), model_config=MODEL) as trainer:
        for _ in trainer.steps():
            pass
    return folder / "run"


def fresh_copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    return copy


def without_seconds(record: dict) -> dict:
    return {key: value for key, value in record.items() if key != "seconds"}


@pytest.mark.slow
def test_each_checkpoint_gets_the_record_of_its_weights(finished_run, tmp_path):
    run = fresh_copy(finished_run, tmp_path)
    before = (run / "metrics.jsonl").read_text()
    progress = list(analyse_checkpoints(run, settings=SMALL))
    assert progress[0].done == 0 and progress[0].total == 3 and progress[0].what == "3 checkpoints to analyse"
    assert [p.step for p in progress if p.record is not None] == [2, 4, 6]  # final/ is step 6's weights again
    assert [p.done for p in progress if p.record is not None] == [1, 2, 3]
    assert progress[-1].what == "done" and progress[-1].fraction == 1.0
    fractions = [p.fraction for p in progress]
    assert fractions == sorted(fractions)
    assert any(p.part == 2 and p.parts == 4 for p in progress)  # part by part: syntax, test words, probe, BLiMP
    text = (run / "metrics.jsonl").read_text()
    assert text.startswith(before)  # appended, nothing else touched
    records = read_analysis_records(run)
    assert [(r["kind"], r["step"], r["post_hoc"]) for r in records] == [("analysis", step, True) for step in (2, 4, 6)]
    treebank, test, pairs = shipped_analysis_data()
    for record in records:
        model, tokenizer = load_pretrained(run / "checkpoints" / f"step-{record['step']:06d}")
        expected = analysis_record(model, tokenizer, treebank, pairs, test_treebank=test, settings=SMALL)
        assert without_seconds(record) == {"kind": "analysis", "step": record["step"], "post_hoc": True,
                                           **without_seconds(expected)}
        assert record["index"] is None and record["blimp"]["pairs"] == 67  # on its own: always BLiMP
    assert [json.loads(line)["kind"] for line in text.splitlines()][-3:] == ["analysis"] * 3


@pytest.mark.slow
def test_cancel_leaves_nothing_half_done_and_a_second_pass_appends_only_what_is_missing(finished_run, tmp_path):
    run = fresh_copy(finished_run, tmp_path)
    progress = analyse_checkpoints(run, settings=SMALL)
    for update in progress:
        if update.step == 4 and update.part == 1:  # the second checkpoint, a part in: Cancel
            break
    progress.close()
    assert [r["step"] for r in read_analysis_records(run)] == [2]
    assert not (run / "run.lock").exists()  # the lock is held only for an append
    again = list(analyse_checkpoints(run, settings=SMALL))
    assert again[0].what == "2 checkpoints to analyse (1 step already analysed)"
    assert [r["step"] for r in read_analysis_records(run)] == [2, 4, 6]
    third = list(analyse_checkpoints(run, settings=SMALL))
    assert [(p.done, p.total, p.what) for p in third] == [(0, 0, "0 checkpoints to analyse (3 steps already "
                                                                   "analysed)"), (0, 0, "done")]
    assert [r["step"] for r in read_analysis_records(run)] == [2, 4, 6]


@pytest.mark.slow
def test_the_runs_own_record_settings_are_kept_and_a_torn_last_line_stays_apart(finished_run, tmp_path):
    run = fresh_copy(finished_run, tmp_path)
    own = RecordSettings(sentences=8, test_sentences=5, pairs_per_paradigm=0)
    with (run / "metrics.jsonl").open("a") as metrics:  # a record of the run's own, and a crash's torn line
        metrics.write(json.dumps({"kind": "analysis", "step": 2, "settings": own.to_dict()}) + "\n")
        metrics.write('{"kind": "step", "st')
    list(analyse_checkpoints(run))
    records = read_analysis_records(run)
    assert [r["step"] for r in records] == [2, 4, 6]
    assert all(r["settings"] == own.to_dict() and r["sentences"] == 8 and r["blimp"] is None for r in records[1:])
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert '{"kind": "step", "st' in lines  # the torn line alone on its line, the records whole after it
    assert [json.loads(line)["step"] for line in lines[lines.index('{"kind": "step", "st') + 1 :]] == [4, 6]


def bare_run(tmp_path: Path) -> Path:
    """A run folder as far as a look tells (its metrics.jsonl), without checkpoints."""
    run = tmp_path / "bare"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"kind": "step", "step": 1, "loss": 9.0}) + "\n")
    return run


def test_a_run_a_live_training_holds_is_refused(tmp_path):
    run = bare_run(tmp_path)
    with RunFolder(run).lock():
        with pytest.raises(RunFolderBusyError, match=r"is in use by a training run \(process \d+ holds .*run.lock\); "
                                                     "its checkpoints can be analysed once it has stopped"):
            next(analyse_checkpoints(run, settings=SMALL))
    assert read_analysis_records(run) == []


def test_what_is_no_run_or_too_small_a_treebank_is_named(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(AnalysisError, match="is not a training run's folder"):
        next(analyse_checkpoints(tmp_path / "empty"))
    small = tmp_path / "small.conllu"
    small.write_text("\n\n".join(shipped_treebank_path("dev").read_text().split("\n\n", 5)[:5]) + "\n\n")
    with pytest.raises(AnalysisError, match=r"small.conllu holds \d sentences; a record measures the first 10 and "
                                            "tests its probe on the next 6, so it needs at least 11"):
        next(analyse_checkpoints(bare_run(tmp_path), settings=SMALL, treebank=small))
    assert [(p.total, p.what) for p in analyse_checkpoints(bare_run(tmp_path / "b"), settings=SMALL)] == [
        (0, "0 checkpoints to analyse"), (0, "done")]
    assert bertcore.analyse_checkpoints is analyse_checkpoints
    assert bertcore.read_analysis_records is read_analysis_records
