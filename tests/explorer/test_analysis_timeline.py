"""The Train tab's analysis timeline without Qt: records in, the arrays, the structure onset and the collapsed heads
out, each checked against numbers worked out by hand here."""

import json
import math

import numpy as np
import pytest

from explorer.train.analysis_timeline import (
    COLLAPSE_FRACTION,
    AnalysisTimeline,
    collapse_threshold,
    read_analysis_records,
    structure_onset,
)
from tests.explorer.analysis_records import record


def test_structure_onset_is_the_first_record_past_a_quarter_of_the_rise():
    steps = [0, 100, 200, 300, 400, 500]
    best = [0.10, 0.11, 0.14, 0.16, 0.30, 0.28]
    onset = structure_onset(steps, best)
    # rise 0.30 - 0.10 = 0.20; a quarter of it on top of the start: 0.15, first passed at step 300 (0.16)
    assert onset.threshold == pytest.approx(0.15)
    assert onset.step == 300
    assert (onset.start_uas, onset.peak_uas, onset.peak_step) == (0.10, 0.30, 400)
    assert "structure onset at step 300" in onset.text


def test_a_rise_under_the_minimum_is_no_onset():
    onset = structure_onset([0, 100, 200], [0.10, 0.13, 0.149])
    assert onset.step is None
    assert "no structure onset yet" in onset.text and "0.049" in onset.text
    assert structure_onset([0], [0.2]) is None  # one record: nothing rises


def test_records_are_kept_in_step_order_one_per_step():
    timeline = AnalysisTimeline()
    events = []
    timeline.changed.connect(lambda _timeline, what: events.append(what))
    assert timeline.add_all([record(200, best=0.2), record(0, best=0.1), record(100, best=0.15)]) == 3
    assert events == ["records"]  # a batch is announced once
    assert timeline.steps == [0, 100, 200]
    assert timeline.best_uas().tolist() == [0.1, 0.15, 0.2]
    timeline.add(record(100, best=0.17))  # a resumed run measures step 100 again: the new record replaces it
    assert timeline.steps == [0, 100, 200] and timeline.best_uas()[1] == 0.17
    assert timeline.uas().shape == (3, 2, 3)
    assert timeline.probe("accuracy").shape == (3, 3)
    assert timeline.offset_baseline() == ("+1", 0.29)
    assert timeline.nearest(149) == 1 and timeline.nearest(150) == 1 and timeline.nearest(151) == 2
    assert timeline.nearest(-50) == 0 and timeline.nearest(10_000) == 2


def test_what_is_no_record_of_this_run_is_refused_and_counted():
    timeline = AnalysisTimeline()
    timeline.add(record(0))
    assert not timeline.add(record(100, layers=3))  # another model's shape
    assert not timeline.add({"kind": "analysis", "step": 5, "uas": [[0.1, 0.2], [0.3]]})  # ragged
    assert not timeline.add({"kind": "analysis", "uas": [[0.1]]})  # no step
    assert not timeline.add("not a record")
    assert timeline.refused == 4 and timeline.steps == [0]


def test_figures_a_record_lacks_are_nan_not_a_failure():
    timeline = AnalysisTimeline()
    broken = record(100)
    broken["probe"] = {"accuracy": [0.5, None, 0.7]}  # None: a NaN the record could not write in JSON
    del broken["health"]
    timeline.add_all([record(0), broken])
    accuracy = timeline.probe("accuracy")
    assert accuracy[1, 0] == 0.5 and math.isnan(accuracy[1, 1]) and accuracy[1, 2] == 0.7
    assert np.isnan(timeline.health("anisotropy")[1]).all()
    assert np.isnan(timeline.attention_entropy()[1]).all()


def test_blimp_is_read_from_the_records_that_scored_it():
    timeline = AnalysisTimeline()
    timeline.add_all([record(0, blimp={"accuracy": 0.52}), record(100), record(200, blimp={"accuracy": 0.58})])
    steps, accuracy = timeline.blimp()
    assert steps.tolist() == [0, 200] and accuracy.tolist() == [0.52, 0.58]
    assert timeline.blimp_unavailable() is None
    timeline.add(record(300, blimp_unavailable="this model has no masked-LM head"))
    assert timeline.blimp_unavailable() == "this model has no masked-LM head"


def test_a_head_whose_entropy_falls_under_the_threshold_is_named_with_the_step_it_collapsed_at():
    # 200 real tokens over 10 sentences, none skipped: 20 tokens + [CLS] and [SEP] = 22 keys a row; ln 22 = 3.091
    threshold = COLLAPSE_FRACTION * math.log(22)
    assert collapse_threshold(record(0)) == pytest.approx(threshold)
    healthy = np.full((2, 3), 2.9)
    early = healthy.copy()
    early[1, 2] = threshold * 0.5  # layer 2 head 3 collapses at step 100 and stays collapsed
    later = early.copy()
    later[0, 0] = threshold * 0.9  # layer 1 head 1 at step 200
    recovered = healthy.copy()
    recovered[0, 1] = threshold * 0.2  # collapsed at step 100 …
    timeline = AnalysisTimeline()
    timeline.add_all([record(0, entropy=healthy), record(100, entropy=np.minimum(early, recovered)),
                      record(200, entropy=later)])
    collapsed = timeline.collapsed_heads()
    # … layer 1 head 2 recovered by step 200: only the heads collapsed at the newest record are named
    assert [(head.name, head.since_step) for head in collapsed] == [("L2·H3", 100), ("L1·H1", 200)]
    assert collapsed[0].entropy == pytest.approx(threshold * 0.5)
    assert collapsed[0].threshold == pytest.approx(threshold)


def test_skipped_sentences_do_not_count_as_rows():
    # 180 tokens over the 9 sentences scored (one of 10 skipped): 20 + 2 keys a row
    assert collapse_threshold(record(0, tokens=180, skipped=1)) == pytest.approx(COLLAPSE_FRACTION * math.log(22))
    assert collapse_threshold({"sentences": 3}) is None


def test_the_chosen_step_is_announced():
    timeline = AnalysisTimeline()
    events = []
    timeline.changed.connect(lambda _timeline, what: events.append(what))
    timeline.select_step(120)
    timeline.select_step(120)
    assert events == ["step"] and timeline.step == 120
    timeline.clear()
    assert timeline.step is None and events[-1] == "records"


def test_records_are_read_from_a_run_folders_metrics(tmp_path):
    lines = [{"kind": "step", "step": 1, "loss": 9.0}, record(0), {"kind": "eval", "step": 50, "loss": 8.0},
             record(100, post_hoc=True)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [item["step"] for item in read_analysis_records(tmp_path)] == [0, 100]
    assert [item["step"] for item in read_analysis_records(tmp_path, up_to_step=50)] == [0]
    assert read_analysis_records(tmp_path / "nothing-here") == []
