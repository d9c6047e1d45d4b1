"""Exporting the attention arrays as NPZ from the attention panel's menu: written off the GUI thread (MiniLM's at 512
tokens froze the window for ~14 s and lost its clicks), with progress and Cancel; the file is complete and correct;
a cancelled or failed write is said and leaves no file, nor any part of one."""

from __future__ import annotations

import time

import numpy as np
import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFileDialog, QMessageBox, QPushButton

from explorer.common._qt.background_write import BackgroundWrite
from explorer.common._qt.gui_gc import collect_garbage_in_gui_thread
from explorer.common.attention_math import compute_rollout
from explorer.common.export_data import npz_writing
from explorer.inspector._qt.attention_panel import AttentionPanel
from explorer.inspector.demo_inspection import demo_inspection
from tests.explorer.conftest import shown

WAIT_MS = 60_000
# MiniLM's 6 × 12 heads at 352 tokens: the compressed write and the rollout take over a second on a shared core
LAYERS, HEADS, TOKENS = 6, 12, 352
LONGEST_GAP_S = 1.0  # the event loop turns at least this often while the file is written (it froze 4 s here)


@pytest.fixture
def panel(qtbot):
    collect_garbage_in_gui_thread()  # as the window has by the time it exports: a worker thread exists
    panel = shown(qtbot, AttentionPanel(), (1000, 640))
    yield panel
    assert BackgroundWrite.shutdown_all(30_000)


@pytest.fixture(scope="module")
def large_inspection():
    return demo_inspection(num_tokens=TOKENS, num_layers=LAYERS, num_heads=HEADS, seed=3)


def npz_action(panel):
    return next(action for action in panel.export_menu.actions() if action.text().endswith("as NPZ…"))


def answering(monkeypatch, path) -> None:
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *_args: (str(path), "NumPy arrays (*.npz)"))


@pytest.mark.slow
def test_the_window_keeps_answering_while_the_arrays_are_written_and_the_file_is_right(
        qtbot, panel, monkeypatch, tmp_path, large_inspection):
    panel.set_inspection(large_inspection)
    panel.set_head_enabled(1, 3, False)  # the rollout written is the one under the head mask shown
    path = tmp_path / "attention.npz"
    answering(monkeypatch, path)
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start(10)
    started = time.perf_counter()
    npz_action(panel).trigger()
    returned = time.perf_counter() - started
    qtbot.waitUntil(lambda: not BackgroundWrite.running, timeout=WAIT_MS)
    timer.stop()
    assert returned < LONGEST_GAP_S, f"the menu held the GUI thread {returned:.2f} s"
    gaps = np.diff([started, *ticks])
    assert len(ticks) > 20 and gaps.max() < LONGEST_GAP_S, f"{len(ticks)} ticks, longest gap {gaps.max():.2f} s"
    with np.load(path) as written:
        assert sorted(written.files) == ["attentions", "head_mask", "rollout", "tokens"]
        np.testing.assert_array_equal(written["attentions"], large_inspection.attentions)
        assert list(written["tokens"]) == list(large_inspection.encoding.tokens)
        mask = np.ones((LAYERS, HEADS), np.float32)
        mask[1, 3] = 0
        np.testing.assert_array_equal(written["head_mask"], mask)
        np.testing.assert_allclose(written["rollout"], compute_rollout(large_inspection.attentions, mask), atol=1e-6)
    assert [item.name for item in tmp_path.iterdir()] == ["attention.npz"]  # no part file left


@pytest.mark.slow
def test_cancel_leaves_no_file_and_a_file_that_was_there_as_it_was(qtbot, panel, monkeypatch, tmp_path,
                                                                   large_inspection):
    panel.set_inspection(large_inspection)
    path = tmp_path / "attention.npz"
    path.write_bytes(b"an older export")
    answering(monkeypatch, path)
    npz_action(panel).trigger()
    write = next(iter(BackgroundWrite.running))
    qtbot.waitUntil(lambda: write.fraction > 0, timeout=WAIT_MS)
    qtbot.mouseClick(write.dialog.findChild(QPushButton), Qt.MouseButton.LeftButton)  # the dialog's Cancel
    qtbot.waitUntil(lambda: not BackgroundWrite.running, timeout=WAIT_MS)
    assert write.outcome == "cancelled"
    assert path.read_bytes() == b"an older export" and sorted(item.name for item in tmp_path.iterdir()) == [
        "attention.npz"]


@pytest.mark.slow
def test_a_failed_write_is_said_and_leaves_nothing(qtbot, panel, monkeypatch, tmp_path):
    panel.set_inspection(demo_inspection(num_tokens=40, num_layers=2, num_heads=3))
    folder = tmp_path / "gone"
    folder.mkdir()
    path = folder / "attention.npz"
    answering(monkeypatch, path)
    opened = []
    monkeypatch.setattr(QMessageBox, "open", lambda box: opened.append(box.text()))

    def failing_writing(path, arrays):  # the disk fills half-way
        steps = npz_writing(path, arrays)
        yield next(steps)
        yield next(steps)
        raise OSError(28, "No space left on device")

    import explorer.inspector._qt.attention_export as attention_export

    monkeypatch.setattr(attention_export, "npz_writing", failing_writing)
    npz_action(panel).trigger()
    qtbot.waitUntil(lambda: not BackgroundWrite.running, timeout=WAIT_MS)
    assert opened and "No space left on device" in opened[0] and str(path) in opened[0]
    assert "Nothing was written" in opened[0]
    assert list(folder.iterdir()) == []


def test_the_writing_is_the_same_file_as_numpys_own(tmp_path):
    """The chunked writing gives what np.savez_compressed gives: the same arrays, read without pickle."""
    rng = np.random.default_rng(0)
    arrays = {"attentions": rng.random((2, 3, 9, 9), dtype=np.float32), "tokens": np.array(["[CLS]", "a", "<s>"]),
              "empty": np.zeros((0, 4), np.float32), "big": rng.random(400_000).astype(np.float32)}
    steps = list(npz_writing(tmp_path / "mine.npz", arrays))
    fractions = [fraction for fraction, _ in steps]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0 and len(steps) > 2
    with np.load(tmp_path / "mine.npz", allow_pickle=False) as mine:
        assert sorted(mine.files) == sorted(arrays)
        for name, array in arrays.items():
            np.testing.assert_array_equal(mine[name], array)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        list(npz_writing(tmp_path / "missing" / "x.npz", arrays))
    stopped = npz_writing(tmp_path / "stopped.npz", arrays)
    next(stopped)
    next(stopped)
    stopped.close()  # what Cancel does between two chunks
    assert sorted(item.name for item in tmp_path.iterdir()) == ["mine.npz"]
