"""The Train tab's three analysis timelines driven through qtbot: records in, what is drawn out (the best head's curve,
the onset line, the heads × steps heatmap, the probe lines, BLiMP, the collapse warning), and the marker and captions
following the step slider, alone and in the Train tab (a run folder opened with records)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication

from explorer.train._qt.health_timeline import HealthTimeline
from explorer.train._qt.probe_timeline import ProbeTimeline
from explorer.train._qt.syntax_timeline import SyntaxTimeline
from explorer.train.analysis_timeline import COLLAPSE_FRACTION, AnalysisTimeline
from tests.explorer.analysis_records import record
from tests.explorer.conftest import shown

LAYERS, HEADS = 2, 3


def uas_grid(step: int) -> np.ndarray:
    """Every head's UAS at a step: distinct values, so a misplaced row or column shows."""
    return np.arange(LAYERS * HEADS).reshape(LAYERS, HEADS) / 100 + step / 10_000


def run_records() -> list[dict]:
    """Five records: the best head's UAS 0.10, 0.11, 0.16, 0.30, 0.31 at steps 0 … 400 (onset at step 200: a
    quarter of the 0.21 rise is 0.1525); BLiMP at steps 0 and 400; layer 2 head 1 collapsing at step 300."""
    best = [0.10, 0.11, 0.16, 0.30, 0.31]
    records = []
    for index, step in enumerate(range(0, 500, 100)):
        entropy = np.full((LAYERS, HEADS), 2.9)
        if step >= 300:
            entropy[1, 0] = 0.05
        probe = {"task": "upos", "accuracy": [0.4 + index / 100, 0.5 + index / 50, 0.45],
                 "control_accuracy": [0.3, 0.3, 0.3], "selectivity": [0.1 + index / 100, 0.2 + index / 50, 0.15],
                 "majority_baseline": 0.16, "test_words": 321}
        records.append(record(step, layers=LAYERS, heads=HEADS, best=best[index], uas=uas_grid(step),
                              entropy=entropy, probe=probe, blimp={"accuracy": 0.5 + step / 4000}
                              if step in (0, 400) else None))
    return records


@pytest.fixture
def timeline():
    timeline = AnalysisTimeline()
    timeline.add_all(run_records())
    return timeline


def test_the_syntax_timeline_draws_the_best_head_the_onset_and_every_head(qtbot, timeline):
    view = shown(qtbot, SyntaxTimeline(), (900, 600))
    view.follow(timeline)
    steps, best = view.best_curve.getData()
    assert steps.tolist() == [0, 100, 200, 300, 400] and best.tolist() == [0.10, 0.11, 0.16, 0.30, 0.31]
    assert view.onset_line.isVisible() and view.onset_line.value() == 200
    assert "Structure onset at step 200" in view.caption.text()
    assert "a quarter" not in view.caption.text() and "25%" in view.caption.toolTip()  # the rule, in the tooltip
    # heads grouped by layer, layer-major rows; one column per record
    expected = np.stack([uas_grid(step).reshape(-1) for step in range(0, 500, 100)], axis=1)
    assert np.array_equal(view.heatmap_values, expected)
    assert view.levels == (0.0, pytest.approx(expected.max()))
    baseline_y = view.baseline_curve.getData()[1]
    assert baseline_y.tolist() == [0.29, 0.29]  # the best of Clark's offsets in the record: "+1"


def test_the_syntax_timeline_follows_the_chosen_step(qtbot, timeline):
    view = shown(qtbot, SyntaxTimeline(), (900, 600))
    view.follow(timeline)
    assert not view.markers[0].isVisible()  # no step chosen: the newest record is described
    assert "Step 400: best head L2·H3 UAS 0.310" in view.caption.text()
    timeline.select_step(230)
    assert all(marker.isVisible() and marker.value() == 230 for marker in view.markers)
    assert "Step 230 (record of step 200, the nearest): best head L2·H3 UAS 0.160" in view.caption.text()
    assert view.chosen_dot.getData()[0].tolist() == [200]
    def laid_out() -> bool:  # the caption's new text re-lays the view out in the next events
        QApplication.processEvents()
        return view.uas_plot.vb.sceneBoundingRect().width() > 100

    qtbot.waitUntil(laid_out)
    middle = view.uas_plot.vb.mapViewToScene(view.uas_plot.vb.viewRect().center())
    where = view.graphics.mapFromScene(QPointF(view.step_scene_x(300), middle.y()))
    with qtbot.waitSignal(view.stepChosen) as chosen:  # a click on a step plot chooses its step
        qtbot.mouseClick(view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=where)
    assert abs(chosen.args[0] - 300) <= 5  # a pixel is a few steps


def test_no_onset_is_marked_while_the_rise_is_small(qtbot):
    timeline = AnalysisTimeline()
    timeline.add_all([record(0, best=0.10), record(100, best=0.12)])
    view = shown(qtbot, SyntaxTimeline())
    view.follow(timeline)
    assert not view.onset_line.isVisible()
    assert "No structure onset yet" in view.caption.text() and "0.020" in view.caption.text()


def test_a_hidden_timeline_draws_what_came_when_it_is_shown(qtbot, timeline):
    view = SyntaxTimeline()
    qtbot.addWidget(view)
    view.follow(AnalysisTimeline())
    drawn = view.redraw_count
    view.timeline.add_all(run_records())
    assert view.redraw_count == drawn  # hidden: nothing drawn yet
    view.show()
    qtbot.waitExposed(view)
    assert view.redraw_count == drawn + 1 and view.best_curve.getData()[0].tolist() == [0, 100, 200, 300, 400]


def test_the_probe_timeline_draws_each_layers_accuracy_selectivity_and_blimp(qtbot, timeline):
    view = shown(qtbot, ProbeTimeline(), (900, 600))
    view.follow(timeline)
    assert view.accuracy_curves.names == ["embeddings", "layer 1", "layer 2"]
    accuracy = timeline.probe("accuracy")
    for layer, curve in enumerate(view.accuracy_curves.curves):
        steps, values = curve.getData()
        assert steps.tolist() == [0, 100, 200, 300, 400] and np.allclose(values, accuracy[:, layer])
    selectivity = view.selectivity_curves.curves[1].getData()[1]
    assert np.allclose(selectivity, [0.2, 0.22, 0.24, 0.26, 0.28])
    assert view.majority_curve.getData()[1].tolist() == [0.16] * 5
    steps, blimp = view.blimp_curve.getData()
    assert steps.tolist() == [0, 400] and blimp.tolist() == [0.5, 0.6]  # the records without BLiMP are skipped
    assert not view.blimp_note.isVisible()
    timeline.select_step(110)
    text = view.caption.text()
    assert "Step 110 (record of step 100, the nearest): the POS probe is best at layer 1: accuracy 0.520" in text
    assert "selectivity 0.220" in text and "BLiMP 0.500 (record of step 0)" in text


def test_a_model_without_an_mlm_head_says_why_it_has_no_blimp(qtbot):
    timeline = AnalysisTimeline()
    reason = "this BertModel has no masked-LM head, so it has no pseudo-log-likelihood"
    timeline.add_all([record(0, blimp_unavailable=reason), record(100)])
    view = shown(qtbot, ProbeTimeline())
    view.follow(timeline)
    assert view.blimp_note.isVisible() and reason in view.blimp_note.text()
    assert view.blimp_curve.getData()[0] is None or not len(view.blimp_curve.getData()[0])


def test_the_health_timeline_warns_of_collapsed_heads_by_name(qtbot, timeline):
    view = shown(qtbot, HealthTimeline(), (900, 600))
    view.follow(timeline)
    warning = view.warning_label
    assert warning.isVisible()
    threshold = COLLAPSE_FRACTION * math.log(22)  # 200 tokens over 10 sentences, + [CLS] and [SEP]
    assert warning.text().startswith("⚠ 1 of 6 heads has collapsed")
    assert f"under {threshold:.3f} nats" in warning.text() and "L2·H1 (0.050 nats, since step 300)" in warning.text()
    # one thin line per head in its layer's colour, and the threshold beside them
    assert len(view.entropy_curves) == LAYERS * HEADS
    assert view.entropy_curves[3].getData()[1].tolist() == [2.9, 2.9, 2.9, 0.05, 0.05]
    assert np.allclose(view.threshold_curve.getData()[1], threshold)
    label = view.threshold_label  # the dashed line named, at its newest end
    assert label.isVisible() and label.toPlainText() == "collapsed below"
    assert label.pos().x() == 400 and label.pos().y() == pytest.approx(threshold)
    timeline.select_step(0)
    assert "Step 0 over 200 tokens: anisotropy 0.100 (embeddings) … 0.100 (layer 2)" in view.caption.text()


def test_a_healthy_run_says_so(qtbot):
    timeline = AnalysisTimeline()
    timeline.add_all([record(0), record(100)])
    view = shown(qtbot, HealthTimeline())
    view.follow(timeline)
    assert view.warning_label.text() == "No head has collapsed."


def test_each_key_is_one_line_of_text_tall_and_the_best_head_has_room_under_it(qtbot, timeline):
    """Under Xvfb the keys' white boxes (pyqtgraph's 9 px margins: 39 px for one line) hid the top half of a step plot
    in a 1600 × 1000 window, the curves under them gone."""
    views = [shown(qtbot, view, (900, 600)) for view in (SyntaxTimeline(), ProbeTimeline(), HealthTimeline())]
    for view in views:
        view.follow(timeline)
    keys = [views[0].uas_legend, views[1].accuracy_legend, views[2].anisotropy_curves.legend]
    for key in keys:
        line = max(label.boundingRect().height() for _sample, label in key.items)
        assert key.boundingRect().height() <= line + 2
    top = views[0].uas_plot.viewRange()[1][1]
    assert top >= 1.3 * 0.31  # the best head reaches 0.31: the key sits above it


# ---- in the Train tab ----

@pytest.fixture
def panel(qtbot):
    from explorer.train._qt.training_panel import TrainingPanel

    panel = TrainingPanel(poll_interval_ms=50)
    shown(qtbot, panel, (1400, 950))
    yield panel
    panel.shutdown()


def write_run(folder, records, steps: int = 400) -> None:
    """A finished bert-train run folder: its config, step records and the analysis records."""
    folder.mkdir(parents=True, exist_ok=True)
    config = {"training": {"steps": steps, "preset": "tiny"}, "model": {"num_hidden_layers": LAYERS}}
    (folder / "run_config.json").write_text(json.dumps(config))
    lines = [{"kind": "step", "step": step, "total_steps": steps, "loss": 9 - step / 100, "mlm_loss": 8.0,
              "nsp_loss": 0.7, "mlm_accuracy": 0.1, "nsp_accuracy": 0.5, "learning_rate": 1e-3, "grad_norm": 1.0,
              "tokens": 100, "tokens_per_second": 1000.0, "elapsed_seconds": step / 10} for step in range(1, steps + 1)]
    lines[100:100] = records[:3]
    lines += records[3:]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (folder / "summary.json").write_text(json.dumps({"step": steps}))


@pytest.mark.slow
def test_a_run_folder_opened_shows_its_records_on_the_loss_plots_step_axis(qtbot, panel, tmp_path):
    write_run(tmp_path / "run", run_records())
    assert panel.watch_run_folder(tmp_path / "run")
    qtbot.waitUntil(lambda: len(panel.analysis) == 5, timeout=5000)
    panel.view_tabs.setCurrentWidget(panel.syntax_timeline)
    qtbot.waitUntil(lambda: panel.syntax_timeline.redraw_count > 0, timeout=5000)
    assert panel.syntax_timeline.onset_line.value() == 200
    assert "5 analysis records, step 0 to 400" in panel.analysis_bar.status_label.text()
    # the timeline's step axis is the loss plot's: a step stands at the same x on screen
    def screen_x(graphics, plot, step):
        return graphics.viewport().mapToGlobal(graphics.mapFromScene(plot.vb.mapViewToScene(QPointF(step, 0)))).x()

    for step in (0, 200, 400):
        for plot in panel.syntax_timeline.step_plots:
            assert abs(screen_x(panel.syntax_timeline.graphics, plot, step)
                       - screen_x(panel.plots.graphics, panel.plots.loss_plot, step)) <= 2
    # the slider's snapshot (a probe of a checkpoint) moves the loss plots' marker and every timeline's
    panel.probes.snapshotShown.emit(300)
    assert panel.analysis.step == 300
    assert panel.syntax_timeline.markers[0].value() == 300 and panel.plots.markers[0].value() == 300
    # without probe snapshots, a click on a timeline chooses that step itself
    panel.health_timeline.stepChosen.emit(120)
    assert panel.analysis.step == 120 and panel.plots.markers[0].value() == 120
    panel.view_tabs.setCurrentWidget(panel.health_timeline)
    qtbot.waitUntil(lambda: "record of step 100" in panel.health_timeline.caption.text(), timeout=5000)
    # a record appended later (a post-hoc analysis elsewhere) reaches the views, and is no sign of the run going on
    with (tmp_path / "run" / "metrics.jsonl").open("a") as stream:
        stream.write(json.dumps({**record(450, layers=LAYERS, heads=HEADS), "post_hoc": True}) + "\n")
    qtbot.waitUntil(lambda: len(panel.analysis) == 6, timeout=5000)
    assert panel.lifecycle.state.value == "finished"


@pytest.mark.slow  # the Train tab's set-up and shut-down: ~3 s on two busy cores
def test_another_run_shown_forgets_the_records(qtbot, panel, tmp_path):
    write_run(tmp_path / "one", run_records())
    panel.watch_run_folder(tmp_path / "one")
    qtbot.waitUntil(lambda: len(panel.analysis) == 5, timeout=5000)
    write_run(tmp_path / "two", [])
    panel.watch_run_folder(tmp_path / "two")
    qtbot.waitUntil(lambda: panel.run_dir == tmp_path / "two", timeout=5000)
    assert len(panel.analysis) == 0 and panel.analysis.step is None
    assert "No analysis records in this run yet" in panel.analysis_bar.status_label.text()
