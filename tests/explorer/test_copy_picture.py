"""Export ▸ Copy picture, in every view that exports a PNG: the image put on the clipboard (read back through
QApplication.clipboard()) is the one its PNG entry writes, pixel for pixel; a view with nothing to show says so and
leaves the clipboard alone."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication, QMessageBox

from explorer.common._qt.exporting import export_png


def copy_action(menu):
    found = [action for action in menu.actions() if action.text() == "Copy picture"]
    assert len(found) == 1, [action.text() for action in menu.actions()]
    return found[0]


def copied(menu) -> QImage:
    """Trigger the menu's Copy picture on a clipboard holding something else; the image it holds then."""
    clipboard = QApplication.clipboard()
    marker = QImage(3, 3, QImage.Format.Format_ARGB32)
    marker.fill(QColor("magenta"))
    clipboard.setImage(marker)
    copy_action(menu).trigger()
    return clipboard.image()


def same_pixels(image: QImage, path) -> bool:
    written = QImage(str(path))
    argb = QImage.Format.Format_ARGB32
    return image.size() == written.size() and image.convertToFormat(argb) == written.convertToFormat(argb)


@pytest.fixture
def refused(monkeypatch) -> list[str]:
    said: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning", lambda _parent, title, text: said.append(f"{title}: {text}"))
    return said


@pytest.mark.slow
def test_every_views_copy_is_its_png(qtbot, window, tmp_path, refused):
    window.inspect_tab.flush_input()
    panel = window.inspect_tab.attention_panel
    image = copied(panel.export_menu)
    assert same_pixels(image, panel.export_png(tmp_path / "attention.png"))
    assert image.width() > 100

    for tab, menu, parts in (
            (window.explain_tab, window.explain_tab.export.menu(),
             lambda: [window.explain_tab.attribution_view, window.explain_tab.faithfulness_plot]),
            (embeddings := next(window.tabs.widget(i) for i in range(window.tabs.count())
                                if window.tabs.tabText(i) == "Embeddings"),
             embeddings.export_button.menu(), lambda: embeddings.projection_pane.scatter_plot)):
        window.tabs.setCurrentWidget(tab)
        qtbot.waitExposed(tab)
        image = copied(menu)
        assert same_pixels(image, export_png(parts(), tmp_path / "view.png")), tab.objectName()
    assert refused == []


@pytest.mark.slow
def test_a_view_with_nothing_to_copy_says_so(qtbot, window, refused):
    lens = window.inspect_tab.logit_lens  # nothing masked: no logit lens
    image = copied(lens.export_button.menu())
    assert refused == ["Nothing to copy: Could not copy the picture:\nthere is no logit lens to copy; mask a token "
                       "first"]
    assert image.size().width() == 3  # the clipboard keeps what it held
    head_lab = next(window.tabs.widget(i) for i in range(window.tabs.count()) if window.tabs.tabText(i) == "Head lab")
    copied(head_lab.export_button.menu())
    assert "there is no pruning curve" in refused[-1]


@pytest.mark.slow
def test_a_runs_plots_copy_holds_its_colour_key(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from explorer.runs._qt.workbench.workbench_tab import RunsWorkbench
    from tests.explorer.test_workbench import write_bert_run

    for index, lr in enumerate((1e-3, 3e-3)):
        write_bert_run(tmp_path / "runs" / f"lr-{lr:g}", lr, start=index)
    tab = RunsWorkbench(folders=[str(tmp_path / "runs")], interval_s=0.2,
                        settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(tab)
    tab.resize(1400, 900)
    tab.show()
    qtbot.waitUntil(lambda: len(tab.state.runs) == 2 and all(e.curves for e in tab.state.runs.values()),
                    timeout=20_000)
    tab.state.set_ticked(list(tab.state.runs), True)
    tab.plots.draw_all()
    plot = tab.plots.plots["loss"]
    qtbot.waitUntil(plot.key.isVisible)
    image = copied(plot.export.menu())
    assert same_pixels(image, export_png(plot.picture_parts(), tmp_path / "loss.png"))
    assert image.height() == 2 * (plot.canvas.height() + plot.key.height())  # the key under the plot, at 2x
    assert tab.shutdown(20_000)
