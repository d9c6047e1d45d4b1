"""The Runs tab on real files: its state headless (grouping, axes, log transforms, ranges, filters, export, live
growth) and its widgets through qtbot (the overlay drawn, ticks, smoothing, log axes on held-out points, a bad regex
said inline, the hover, the settings table, opening a run and a checkpoint)."""

from __future__ import annotations

import csv
import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest

from explorer.runs import smooth
from explorer.runs.curve_files import TENSORBOARD
from explorer.runs.workbench.follower import RunFollower, follow
from explorer.runs.workbench.overlay import DisplayMode, SeriesView, metric_group
from explorer.runs.workbench.state import WorkbenchState


def write_bert_run(folder: Path, lr: float, steps: int = 60, *, finished: bool = True, start: float = 0.0) -> Path:
    """A bert-train run folder as bertcore writes it: run_config.json, step and eval records, summary.json."""
    folder.mkdir(parents=True)
    (folder / "run_config.json").write_text(json.dumps({
        "training": {"steps": steps, "lr": lr, "batch_size": 8, "seq_len": 32, "preset": "tiny"},
        "model": {"num_hidden_layers": 2, "hidden_size": 32}}))
    lines = []
    for step in range(1, steps + 1):
        loss = 5.0 * math.exp(-step * lr * 100) + 0.5 + 0.1 * math.sin(step)
        lines.append({"kind": "step", "step": step, "total_steps": steps, "loss": loss, "learning_rate": lr,
                      "tokens": 100, "elapsed_seconds": start + step * 0.5})
        if step % 20 == 0:
            lines.append({"kind": "eval", "step": step, "loss": loss + 0.2, "num_examples": 16})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    if finished:
        (folder / "summary.json").write_text(json.dumps({"step": steps, "total_steps": steps}))
    return folder


def write_tensorboard_run(folder: Path, steps: int = 50) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in range(1, steps + 1):
        writer.add_scalar("train/loss", 3.0 / step, step, walltime=1.7e9 + 2 * step)
        if step % 10 == 0:
            writer.add_scalar("eval/loss", 3.5 / step - 0.2, step, walltime=1.7e9 + 2 * step)
    writer.close()
    return folder


@pytest.fixture
def runs_folder(tmp_path) -> Path:
    root = tmp_path / "runs"
    for index, lr in enumerate((1e-3, 3e-3, 1e-2)):
        write_bert_run(root / f"lr-{lr:g}", lr, start=index)
    pytest.importorskip("tensorboard")
    write_tensorboard_run(root / "tb" / "run-a")
    return root


def loaded_state(folder: Path) -> WorkbenchState:
    """A state fed by one round of a follower over `folder`, read in this thread."""
    follower, state, stop = RunFollower(), WorkbenchState(), threading.Event()
    follower.add_folder(folder)
    for batch in follow(follower, stop):
        state.apply(batch)
        if all(entry.curves for entry in state.runs.values()) and state.runs:
            break
    return state


def by_name(state: WorkbenchState, name: str):
    return next(entry for entry in state.runs.values() if entry.name == name)


# ---------------------------------------------------------------- the plain state
def test_metric_groups_put_held_out_points_on_their_training_metrics_plot():
    assert metric_group("eval/loss") == ("loss", True)
    assert metric_group("eval_loss") == ("loss", True)
    assert metric_group("train/loss") == ("loss", False)
    assert metric_group("loss") == ("loss", False)
    assert metric_group("train_loss") == ("train_loss", False)  # the Trainer's mean over the run: its own plot
    assert metric_group("eval/") == ("eval/", False)


def test_the_runs_folder_is_listed_with_kinds_status_and_best_held_out(runs_folder):
    state = loaded_state(runs_folder)
    names = [entry.name for entry in state.listed_runs()]
    assert set(names) == {"lr-0.001", "lr-0.003", "lr-0.01", "tb/run-a"}
    assert by_name(state, "tb/run-a").kind == TENSORBOARD
    entry = by_name(state, "lr-0.01")
    assert entry.facts.status == "finished" and entry.facts.shape == "L2/H32" and entry.last_step == 60
    evaluations = entry.curves["eval/loss"].values
    assert entry.best_held_out() == f"eval/loss {evaluations.min():.4g} @ {20 * (1 + int(np.argmin(evaluations))):,}"


def test_plots_overlay_every_ticked_run_per_metric(runs_folder):
    state = loaded_state(runs_folder)
    state.set_ticked(list(state.runs), True)
    plots = {plot.group: plot for plot in state.plots()}
    assert next(iter(plots)) == "loss"  # shared by every run
    members = {(entry.name, name, held_out) for entry, name, held_out in plots["loss"].members}
    assert ("tb/run-a", "train/loss", False) in members and ("tb/run-a", "eval/loss", True) in members
    assert ("lr-0.001", "loss", False) in members and ("lr-0.001", "eval/loss", True) in members
    state.set_shared_only(True)
    assert [plot.group for plot in state.plots()] == ["loss"]  # learning_rate: not in the TensorBoard run


def test_series_view_axes_log_and_smoothing(runs_folder):
    state = loaded_state(runs_folder)
    entry = by_name(state, "lr-0.001")
    curve = entry.curves["loss"]
    view = SeriesView(curve.source, entry.context, held_out=False)
    view.update(DisplayMode(), 0.6)
    np.testing.assert_array_equal(view.x, curve.steps)
    np.testing.assert_allclose(view.y_smooth, smooth(curve.values, 0.6), rtol=0, atol=1e-12)
    view.update(DisplayMode("tokens"), 0.6)
    np.testing.assert_array_equal(view.x, 100.0 * curve.steps)  # 100 tokens a step
    view.update(DisplayMode("relative", log_x=True, log_y=True), 0.6)
    np.testing.assert_allclose(view.x, np.log10(0.5 * curve.steps))  # bert-train: elapsed_seconds
    np.testing.assert_allclose(view.y, np.log10(curve.values))
    assert view.value_at(view.x[9]) == (10, pytest.approx(curve.values[9]), pytest.approx(
        smooth(curve.values, 0.6)[9]))
    view.update(DisplayMode("wall"), 0.6)
    assert len(view.x) == 0 and view.no_x == len(curve.steps)  # metrics.jsonl keeps no clock time


def test_log_axes_leave_out_non_positive_values_of_held_out_points_too_and_count_them(tmp_path):
    pytest.importorskip("tensorboard")
    run = write_tensorboard_run(tmp_path / "tb")
    state = loaded_state(run)
    entry = next(iter(state.runs.values()))
    held_out = entry.curves["eval/loss"]
    view = SeriesView(held_out.source, entry.context, held_out=True)
    view.update(DisplayMode(log_y=True), 0.0)
    positive = held_out.values > 0
    assert 0 < positive.sum() < len(positive)  # 3.5 / step − 0.2 goes below 0
    np.testing.assert_allclose(view.y, np.log10(held_out.values[positive]))
    assert view.non_positive == view.not_drawn == int((~positive).sum())
    view.update(DisplayMode("relative"), 0.0)
    np.testing.assert_allclose(view.x, 2.0 * held_out.steps - 2.0)  # wall time since the run's first point


def test_outliers_are_ignored_in_the_range_unless_asked():
    steps = np.arange(1, 201)
    values = np.ones(200)
    values[:5] = 1000.0  # a start far above the rest
    view = SeriesView(lambda: (steps, values, None, 1), lambda: (None, None, None), held_out=False)
    view.update(DisplayMode(), 0.0)
    assert view.y_extent(True) == (1.0, 1.0)
    assert view.y_extent(False) == (1.0, 1000.0)


def test_display_thins_for_drawing_only_and_keeps_spikes():
    steps = np.arange(100_000)
    values = np.zeros(100_000)
    values[54_321] = 9.0
    view = SeriesView(lambda: (steps, values, None, 1), lambda: (None, None, None), held_out=False)
    view.update(DisplayMode(), 0.0)
    x, y = view.display(-np.inf, np.inf, 800, smoothed=False)
    assert len(x) <= 2 * 800 + 2 and y.max() == 9.0
    assert len(view.y) == 100_000  # the values themselves are all kept


def test_a_bad_regex_is_a_message_and_the_previous_filter_stays(runs_folder):
    state = loaded_state(runs_folder)
    assert state.set_run_filter(r"lr-0\.0(01|1)$") is None
    assert {entry.name for entry in state.listed_runs()} == {"lr-0.001", "lr-0.01"}
    error = state.set_run_filter("lr-(")
    assert "not a regular expression" in error and "position" in error
    assert {entry.name for entry in state.listed_runs()} == {"lr-0.001", "lr-0.01"}
    state.set_ticked(list(state.runs), True)
    state.set_run_filter("")
    assert state.set_metric_filter("^learning") is None
    assert [plot.group for plot in state.plots()] == ["learning_rate"]
    assert "not a regular expression" in state.set_metric_filter("[")


def test_config_rows_mark_the_settings_that_differ(runs_folder):
    state = loaded_state(runs_folder)
    state.set_ticked([entry.run_id for entry in state.runs.values() if entry.name.startswith("lr")], True)
    _names, rows = state.config_rows()
    table = {key: (values, differs) for key, values, differs in rows}
    assert table["training.lr"][1] and sorted(table["training.lr"][0]) == ["0.001", "0.003", "0.01"]
    assert table["training.batch_size"] == (["8", "8", "8"], False)
    assert [key for key, _, _ in state.config_rows(differing_only=True)[1]] == ["training.lr"]


def test_export_csv_holds_every_point_raw_and_smoothed(runs_folder, tmp_path):
    state = loaded_state(runs_folder)
    with pytest.raises(ValueError, match="nothing to export"):
        state.export_csv(tmp_path / "none.csv")
    entry = by_name(state, "lr-0.003")
    state.set_ticked([entry.run_id], True)
    state.set_metric_filter("^loss$")
    state.set_smoothing(0.9)
    rows = list(csv.DictReader(open(state.export_csv(tmp_path / "shown.csv"), encoding="utf-8")))
    train = [row for row in rows if row["metric"] == "loss"]
    assert [float(row["value"]) for row in train] == entry.curves["loss"].values.tolist()
    np.testing.assert_allclose([float(row["smoothed"]) for row in train], smooth(entry.curves["loss"].values, 0.9),
                               atol=1e-12)
    held_out = [row for row in rows if row["metric"] == "eval/loss"]
    assert len(held_out) == 3 and {row["smoothed"] for row in held_out} == {""} and held_out[0]["held_out"] == "1"


def test_a_live_run_grows_and_a_series_view_extends_without_rebuilding(tmp_path):
    run = write_bert_run(tmp_path / "live", 1e-3, steps=10, finished=False)
    follower, state, stop = RunFollower(), WorkbenchState(), threading.Event()
    follower.add_folder(run)
    state.apply(list(follower.poll()))
    entry = next(iter(state.runs.values()))
    assert entry.facts.status == "running"  # its metrics grew just now, no summary yet
    view = SeriesView(entry.curves["loss"].source, entry.context, held_out=False)
    view.update(DisplayMode(), 0.6)
    version = view.version
    with open(run / "metrics.jsonl", "a") as file:
        for step in range(11, 16):
            file.write(json.dumps({"kind": "step", "step": step, "loss": 1.0 / step, "tokens": 100}) + "\n")
    grown = []
    state.curves_changed.connect(grown.append)
    state.apply(list(follower.poll()))
    assert grown == [{entry.run_id}] and entry.curves["loss"].size == 15
    assert view.update(DisplayMode(), 0.6) and view.version == version + 1
    np.testing.assert_allclose(view.y_smooth, smooth(entry.curves["loss"].values, 0.6), atol=1e-12)
    stop.set()


# ---------------------------------------------------------------- the widgets
@pytest.fixture
def tab(qtbot, runs_folder, tmp_path):
    from PySide6.QtCore import QSettings

    from explorer.runs._qt.workbench.workbench_tab import RunsWorkbench

    workbench = RunsWorkbench(folders=[str(runs_folder)], interval_s=0.2,
                              settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(workbench)
    workbench.resize(1400, 900)
    workbench.show()
    qtbot.waitUntil(lambda: len(workbench.state.runs) == 4 and all(e.curves for e in workbench.state.runs.values()),
                    timeout=20_000)
    yield workbench
    assert workbench.shutdown(20_000)


@pytest.mark.slow
def test_ticked_runs_are_drawn_in_their_colours_with_held_out_points(qtbot, tab):
    assert tab.run_list.model().rowCount() == 4
    model = tab.run_list.model()
    for row in range(model.rowCount()):  # ticking through the list, as a click does
        from PySide6.QtCore import Qt

        model.setData(model.index(row, 0), Qt.CheckState.Checked.value, Qt.ItemDataRole.CheckStateRole)
    tab.plots.draw_all()
    assert tab.plots.plot_names()[0] == "loss"
    entry = by_name(tab.state, "lr-0.003")
    x, y = tab.plots.item_data("loss", entry.run_id, "loss", smoothed=True)
    np.testing.assert_allclose(y, smooth(entry.curves["loss"].values, 0.6), atol=1e-12)
    x, y = tab.plots.item_data("loss", entry.run_id, "eval/loss")
    assert x.tolist() == [20, 40, 60]
    tab.set_smoothing(0.0)
    tab.plots.draw_all()
    x, y = tab.plots.item_data("loss", entry.run_id, "loss", smoothed=True)
    np.testing.assert_array_equal(y, entry.curves["loss"].values)


@pytest.mark.slow
def test_log_y_reaches_the_held_out_points_and_the_axis(qtbot, tab):
    tb = by_name(tab.state, "tb/run-a")
    tab.state.set_ticked([tb.run_id], True)
    tab.log_y_check.setChecked(True)
    tab.plots.draw_all()
    plot = tab.plots.plots["loss"]
    assert plot.plot.getAxis("left").logMode and "(x1e" not in plot.plot.getAxis("left").labelString()
    values = tb.curves["eval/loss"].values
    _, y = tab.plots.item_data("loss", tb.run_id, "eval/loss")
    np.testing.assert_allclose(y, np.log10(values[values > 0]))
    assert "at or below 0 not drawn on log y" in plot.note.text()


@pytest.mark.slow
def test_a_bad_metric_regex_is_said_inline(qtbot, tab):
    tab.metric_filter.setText("loss(")
    assert tab.metric_filter_error.isVisible() and "not a regular expression" in tab.metric_filter_error.text()
    tab.metric_filter.setText("loss")
    assert not tab.metric_filter_error.isVisible()


@pytest.mark.slow
def test_hover_reads_every_ticked_runs_value(qtbot, tab):
    tab.state.set_ticked([entry.run_id for entry in tab.state.runs.values() if entry.name.startswith("lr")], True)
    tab.plots.draw_all()
    text = tab.plots.plots["loss"].readout_text(30.0)
    for name in ("lr-0.001", "lr-0.003", "lr-0.01"):
        entry = by_name(tab.state, name)
        assert name in text and f"{entry.curves['loss'].values[29]:.5g}" in text
    assert "step 30" in text


@pytest.mark.slow
def test_opening_a_run_and_a_checkpoint(qtbot, tab, runs_folder):
    entry = by_name(tab.state, "lr-0.01")
    with qtbot.waitSignal(tab.openRunFolder) as opened:
        tab.open_in_tab(entry.run_id)
    assert opened.args == [str(entry.folder), "Train"]
    tb = by_name(tab.state, "tb/run-a")
    tab.open_in_tab(tb.run_id)
    assert "the Train and Fine-tune tabs open" in tab.message_label.text()


@pytest.mark.slow
def test_the_window_has_the_runs_tab_and_opens_a_run_in_the_train_tab(qtbot, settings, runs_folder):
    from explorer.app import _add_training_tab
    from explorer.window._qt.main_window import MainWindow

    window = MainWindow(settings)
    qtbot.addWidget(window)
    try:
        titles = [window.tabs.tabText(index) for index in range(window.tabs.count())]
        assert "Runs" in titles and window.runs_tab.objectName() == "runsWorkbench"
        window.open_run_folder(str(runs_folder / "lr-0.001"), "Train")
        assert "no Train tab" in window.runs_tab.message_label.text()
        _add_training_tab(window)
        window.open_run_folder(str(runs_folder / "lr-0.001"), "Train")
        train = window.tabs.currentWidget()
        assert window.tabs.tabText(window.tabs.currentIndex()) == "Train" and train.run_dir == runs_folder / "lr-0.001"
    finally:
        window.close()


def shown_ticks(axis) -> list[tuple[float, str]]:
    """(the value a tick stands at, the text drawn beside it) of every tick an axis draws over its range now, as
    pyqtgraph's AxisItem.generateDrawSpecs asks for them."""
    low, high = axis.range
    size = axis.height() if axis.orientation in ("left", "right") else axis.width()
    ticks = []
    for spacing, values in axis.tickValues(min(low, high), max(low, high), size):
        texts = axis.tickStrings(values, axis.autoSIPrefixScale * axis.scale, spacing)
        ticks.extend(zip(values, texts, strict=True))
    return ticks


@pytest.mark.slow
def test_a_value_axis_names_its_values_after_any_change_of_the_axes(qtbot, tab):
    """Part 1's screenshot: with log x on, the learning-rate plot's axis read 1 … 3 for rates of 0.001 … 0.003.
    pyqtgraph 0.14 computes an SI scale even while disabling it, so restyling a plot that holds data scaled its
    ticks by 1,000 with no prefix shown."""
    tab.state.set_ticked([entry.run_id for entry in tab.state.runs.values() if entry.name.startswith("lr")], True)
    tab.plots.draw_all()
    for change in (lambda: tab.log_x_check.setChecked(True), lambda: tab.axis_box.setCurrentIndex(2),
                   lambda: tab.log_x_check.setChecked(False), lambda: tab.log_y_check.setChecked(True)):
        change()
        tab.plots.draw_all()
        plot = tab.plots.plots["learning_rate"]
        axis = plot.plot.getAxis("left")
        axis.setRange(*plot.plot.getViewBox().viewRange()[1])
        ticks = shown_ticks(axis)
        assert ticks
        for value, text in ticks:
            meant = 10.0**value if tab.state.mode.log_y else value
            assert float(text) == pytest.approx(meant, rel=0.02, abs=1e-12), (value, text)
        low, high = plot.plot.getViewBox().viewRange()[1]
        assert (10.0**low if tab.state.mode.log_y else low) < 0.002 < (10.0**high if tab.state.mode.log_y else high)


@pytest.mark.parametrize("held_out", [False, True])
def test_a_series_view_kept_up_to_date_equals_one_built_afresh(held_out):
    """Whatever changes in turn (the smoothing, log y, the x axis, log x, points arriving, the run starting
    again), a view that redid only what changed holds the arrays and counts of a view built now."""
    rng = np.random.default_rng(7)
    curve = {"steps": np.zeros(0, dtype=np.int64), "values": np.zeros(0), "generation": 1}
    tokens = (np.arange(1, 2001), np.arange(1, 2001) * 50.0 - 500.0)  # tokens seen: at or below 0 for a while
    elapsed = (np.arange(1, 2001), np.r_[np.arange(1, 1001) * 0.5, np.arange(1, 1001) * 0.5 + 100.0])

    def grow(count: int) -> None:
        start = len(curve["steps"]) + 1
        values = np.exp(-np.arange(start, start + count) / 300) + rng.normal(0, 0.05, count) - 0.02
        values[rng.random(count) < 0.02] = np.nan
        curve["steps"] = np.r_[curve["steps"], np.arange(start, start + count)]
        curve["values"] = np.r_[curve["values"], values]

    def source():
        return curve["steps"], curve["values"], None, curve["generation"]

    def context():
        return None, tokens, elapsed

    kept = SeriesView(source, context, held_out)
    mode, smoothing = DisplayMode(), 0.6
    grow(300)
    changes = [lambda m, s: (m, 0.9), lambda m, s: (DisplayMode(m.axis, m.log_x, True), s),
               lambda m, s: (DisplayMode("tokens", m.log_x, m.log_y), s),
               lambda m, s: (DisplayMode(m.axis, True, m.log_y), s), lambda m, s: (m, 0.0),
               lambda m, s: (DisplayMode("relative", m.log_x, m.log_y), s),
               lambda m, s: (DisplayMode(m.axis, m.log_x, False), 0.95), lambda m, s: (DisplayMode(), s)]
    for round_ in range(40):
        what = round_ % 5
        if what in (0, 2):
            grow(int(rng.integers(1, 120)))
        elif what == 1:
            mode, smoothing = changes[int(rng.integers(len(changes)))](mode, smoothing)
        elif what == 3 and round_ == 23:
            curve["steps"], curve["values"] = curve["steps"][:50], curve["values"][:50]
            curve["generation"] += 1  # the run started again
        kept.update(mode, smoothing)
        fresh = SeriesView(source, context, held_out)
        fresh.update(mode, smoothing)
        for name in ("x", "y", "steps", "x_smooth", "y_smooth"):
            np.testing.assert_allclose(getattr(kept, name), getattr(fresh, name), rtol=0, atol=1e-12,
                                       err_msg=f"{name} after round {round_}, {mode}, smoothing {smoothing}")
        assert (kept.not_drawn, kept.non_positive, kept.no_x) == (fresh.not_drawn, fresh.non_positive, fresh.no_x)
        assert kept.y_extent(False) == fresh.y_extent(False)
        for x in (kept.x[:1].tolist() + kept.x[-1:].tolist()):
            (step, value, smoothed), expected = kept.value_at(x), fresh.value_at(x)
            assert (step, value) == expected[:2]
            assert smoothed is expected[2] is None if held_out else smoothed == pytest.approx(expected[2], rel=1e-12)


@pytest.mark.slow
def test_a_run_that_starts_again_is_drawn_anew(qtbot, tab, runs_folder):
    """A resumed bert-train run rewrites its metrics.jsonl shorter: the tab's curves start again, and so do the
    plot's items (they held the old curve's points)."""
    entry = by_name(tab.state, "lr-0.001")
    tab.state.set_ticked([entry.run_id], True)
    tab.plots.draw_all()
    assert len(tab.plots.item_data("loss", entry.run_id, "loss")[0]) == 60
    metrics = runs_folder / "lr-0.001" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()[:25]
    replacement = metrics.with_name("metrics.new")
    replacement.write_text("".join(line + "\n" for line in lines))
    replacement.replace(metrics)
    qtbot.waitUntil(lambda: entry.curves["loss"].size < 60, timeout=10_000)
    tab.plots.draw_all()
    x, y = tab.plots.item_data("loss", entry.run_id, "loss")
    np.testing.assert_array_equal(y, entry.curves["loss"].values)
    assert x.tolist() == list(range(1, len(y) + 1)) and len(y) < 60


@pytest.mark.slow
def test_a_redraw_pass_in_slices_draws_what_a_whole_draw_does(qtbot, tab, monkeypatch):
    """With a slice of no time at all each slice is one step (a curve's arrays, or an item's data): the pass still
    ends with every item drawn, its canvas repaintable again; an event in the middle ends it and the next redraws."""
    from explorer.runs._qt.workbench import metric_plots

    monkeypatch.setattr(metric_plots, "SLICE_S", 0.0)
    tab.state.set_ticked(list(tab.state.runs), True)
    plots = tab.plots
    plots.redraw()
    assert plots.busy()  # one step done, the rest waiting for the event loop
    tab.set_smoothing(0.3)  # an event mid-pass
    qtbot.waitUntil(lambda: not plots.busy(), timeout=10_000)
    steps_before = plots.redraw_count
    entry = by_name(tab.state, "lr-0.003")
    _, y = plots.item_data("loss", entry.run_id, "loss", smoothed=True)
    np.testing.assert_allclose(y, smooth(entry.curves["loss"].values, 0.3), atol=1e-12)
    assert all(plot.canvas.viewport().updatesEnabled() and not plot.dirty for plot in plots.plots.values()
               if plots.visible(plot))
    plots.redraw()
    qtbot.waitUntil(lambda: not plots.busy(), timeout=10_000)
    assert plots.redraw_count == steps_before + 1
