"""The window and the Hugging Face cache: `bert-explorer org/name`, the cache picker, the download dialog.

Every test runs in a private HF home and cache (tests/hub_fixtures.py) with a real tiny BERT, saved by
bertcore.save_pretrained, laid out in a fake snapshot; downloads come from a fake Hub on 127.0.0.1. Nothing reads
~/.cache or reaches the network.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel

from bertcore.models.hub_download import download_model
from explorer import app
from explorer.window._qt.hub_download_dialog import PROGRESS_STEPS, HubDownloadDialog
from explorer.window._qt.main_window import MainWindow
from explorer.window._qt.model_loader import LAST_CHECKPOINT_KEY
from explorer.window._qt.model_picker import ModelPicker
from tests.hub_fixtures import (
    COMMIT_A,
    HUB_COMMIT,
    cache_repo,
    hub_config,
    hub_env_fixture,  # noqa: F401 (a fixture: tests ask for it as `hub_env`)
    permissions_enforced,
    safetensors_bytes,
    serve_fixture,  # noqa: F401 (a fixture: tests ask for it as `serve`)
)

WAIT_MS = 15_000


@pytest.fixture(autouse=True)
def private_hub(hub_env: Path) -> Path:
    return hub_env


@pytest.fixture
def checkpoint_files(tiny_checkpoint: Path) -> dict[str, bytes]:
    """The files of a real tiny BERT (save_pretrained): what a Hub repo of it holds."""
    return {path.name: path.read_bytes() for path in tiny_checkpoint.iterdir() if path.is_file()}


@pytest.fixture
def cached_tiny(hub_env: Path, checkpoint_files: dict[str, bytes]) -> Path:
    """org/tiny-bert in the cache: its snapshot folder."""
    return cache_repo(hub_env, "org/tiny-bert", checkpoint_files)


@pytest.fixture
def window(qtbot, settings) -> MainWindow:
    window = MainWindow(settings)
    qtbot.addWidget(window)
    return window


def model_label(window: MainWindow) -> str:
    return window.findChild(QLabel, "modelLabel").text()


# -- `bert-explorer org/name` -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_start_up_opens_a_cached_repo_id_and_names_it_by_the_repo_id(qtbot, window, cached_tiny):
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.start_up("org/tiny-bert")

    assert window.inspect_tab.state.model_info.path == str(cached_tiny)
    assert window.windowTitle().startswith("org/tiny-bert") and model_label(window).startswith("org/tiny-bert")
    assert COMMIT_A not in window.windowTitle() + model_label(window)
    assert window.settings.value(LAST_CHECKPOINT_KEY) == str(cached_tiny)  # the folder: reopens without refs
    assert not window.findChild(QLabel, "errorLabel").isVisibleTo(window)


@pytest.mark.slow
def test_the_command_line_resolves_a_repo_id_headless(qtbot, cached_tiny, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(app.signal, "signal", lambda *_args: None)  # leave pytest's own Ctrl+C handler alone
    args = app.build_parser().parse_args(["org/tiny-bert", "--no-training-tab"])

    window = app.open_window(args)
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.inspect_tab.state.model_info is not None, timeout=WAIT_MS)

    assert window.inspect_tab.state.model_info.path == str(cached_tiny)
    assert window.windowTitle().startswith("org/tiny-bert")


@pytest.mark.slow
def test_a_repo_id_not_in_the_cache_says_so_and_falls_back(qtbot, settings, tiny_checkpoint, hub_env: Path):
    settings.setValue(LAST_CHECKPOINT_KEY, str(tiny_checkpoint))
    window = MainWindow(settings)
    qtbot.addWidget(window)

    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.start_up("org/absent")

    assert window.inspect_tab.state.model_info.path == str(tiny_checkpoint)
    error = window.findChild(QLabel, "errorLabel").text()
    assert error.startswith("Could not open org/absent: ")
    assert f"org/absent is not in the Hugging Face cache ({hub_env})" in error
    assert "Download from the Hub" in error and "Traceback" not in error and "Showing tiny-bert" in error


@pytest.mark.slow
def test_a_snapshot_folder_opened_by_path_is_named_by_its_repo_id(qtbot, window, cached_tiny):
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        window.load_checkpoint(str(cached_tiny))
    assert window.windowTitle().startswith("org/tiny-bert") and COMMIT_A not in window.windowTitle()


# -- Model ▸ Open from Hugging Face cache… ---------------------------------------------------------------------------

@pytest.fixture
def picker_cache(hub_env: Path, checkpoint_files: dict[str, bytes], cached_tiny: Path) -> Path:
    """org/tiny-bert, org/other-bert (both real) and org/roberta-tiny (a family not loadable yet)."""
    cache_repo(hub_env, "org/other-bert", checkpoint_files)
    cache_repo(hub_env, "org/roberta-tiny", {
        "config.json": hub_config("roberta", ["RobertaForMaskedLM"]),
        "model.safetensors": safetensors_bytes({"roberta.embeddings.word_embeddings.weight": ((10, 8), "F32")})})
    return hub_env


def test_the_picker_lists_the_cache_off_the_gui_thread(qtbot, picker_cache):
    threads = []

    def listing():
        threads.append(threading.current_thread())
        from bertcore.models.hub_listing import scan_cache

        return scan_cache()

    picker = ModelPicker(scan=listing)
    qtbot.addWidget(picker)
    with qtbot.waitSignal(picker.listed, timeout=WAIT_MS) as listed:
        picker.refresh()

    assert listed.args == [3] and threads and threads[0] is not threading.main_thread()
    assert sorted(picker.visible_repo_ids()) == ["org/other-bert", "org/roberta-tiny", "org/tiny-bert"]
    assert [picker.table.model().headerData(column, Qt.Orientation.Horizontal) for column in range(6)] == [
        "Name", "Size on disk", "Parameters", "Layers × heads", "Head", "Last used"]


def test_the_picker_filters_greys_unsupported_families_and_opens_a_model(qtbot, window, picker_cache):
    picker = window.open_model_picker()
    qtbot.waitUntil(lambda: len(picker.visible_repo_ids()) == 3, timeout=WAIT_MS)
    proxy = picker.table.model()
    row_of = {proxy.index(row, 0).data(): row for row in range(proxy.rowCount())}
    tiny = [proxy.index(row_of["org/tiny-bert"], column).data() for column in range(5)]
    assert tiny[0] == "org/tiny-bert" and tiny[1].endswith("MB") and tiny[3] == "3 × 2"
    assert tiny[4] == "pretraining (MLM + NSP)"
    roberta = proxy.index(row_of["org/roberta-tiny"], 0)
    assert roberta.data(Qt.ItemDataRole.ToolTipRole).startswith(
        "org/roberta-tiny cannot be opened: no tokenizer file this program reads")
    assert not roberta.flags() & Qt.ItemFlag.ItemIsSelectable and not picker.select("org/roberta-tiny")

    qtbot.keyClicks(picker.filter_edit, "OTHER")
    assert picker.visible_repo_ids() == ["org/other-bert"]
    picker.filter_edit.clear()
    qtbot.keyClicks(picker.filter_edit, "tiny")
    assert sorted(picker.visible_repo_ids()) == ["org/roberta-tiny", "org/tiny-bert"]

    index = proxy.index(picker.visible_repo_ids().index("org/tiny-bert"), 0)
    centre = picker.table.visualRect(index).center()
    with qtbot.waitSignal(window.modelChanged, timeout=WAIT_MS):
        # a double-click as a mouse sends it: QTest's mouseDClick alone is the second press without the first
        qtbot.mouseClick(picker.table.viewport(), Qt.MouseButton.LeftButton, pos=centre)
        qtbot.mouseDClick(picker.table.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    assert not picker.isVisible()
    assert window.windowTitle().startswith("org/tiny-bert")
    assert window.inspect_tab.state.model_info.path.endswith(f"models--org--tiny-bert/snapshots/{COMMIT_A}")


@pytest.fixture
def broken_cache(picker_cache: Path, checkpoint_files: dict[str, bytes]) -> Path:
    """picker_cache, and beside its models: a repo without config.json, a refs/main holding a path, a GPT-2, a repo
    that cannot be read."""
    hub_env = picker_cache
    cache_repo(hub_env, "org/no-config", {"model.safetensors": checkpoint_files["model.safetensors"]})
    path_ref = cache_repo(hub_env, "org/path-ref", checkpoint_files)
    (path_ref.parent.parent / "refs" / "main").write_text(f"../../models--org--tiny-bert/snapshots/{COMMIT_A}")
    cache_repo(hub_env, "openai/gpt2", {"config.json": hub_config("gpt2", ["GPT2LMHeadModel"]),
                                        "model.safetensors": checkpoint_files["model.safetensors"]})
    locked = cache_repo(hub_env, "org/locked", checkpoint_files).parent.parent
    locked.chmod(0)
    yield hub_env
    locked.chmod(0o755)


@pytest.mark.slow
def test_the_picker_lists_what_it_cannot_open_greyed_with_the_reason(qtbot, broken_cache: Path):
    """Broken entries were left out silently: a model the user had downloaded was simply not there."""
    picker = ModelPicker()
    qtbot.addWidget(picker)
    with permissions_enforced(), qtbot.waitSignal(picker.listed, timeout=WAIT_MS) as listed:
        picker.refresh()  # the listing's thread starts here, where permission bits count

    assert listed.args == [7]
    proxy = picker.table.model()
    cells = {proxy.index(row, 0).data(): [proxy.index(row, column).data() for column in range(5)]
             for row in range(proxy.rowCount())}
    assert cells["org/no-config"] == ["org/no-config", "—", "—", "—", "no config.json"]
    assert cells["org/path-ref"][4] == "refs/main holds no commit hash"
    assert cells["openai/gpt2"][4] == "model_type 'gpt2' is not a BERT family"
    assert cells["org/locked"][4] == "unreadable: permission denied"
    assert cells["org/roberta-tiny"][4].startswith("MLM · no tokenizer file this program reads (vocab.txt")
    assert cells["org/tiny-bert"][4] == "pretraining (MLM + NSP)"
    for name in ("org/no-config", "org/path-ref", "openai/gpt2", "org/locked", "org/roberta-tiny"):
        index = proxy.index(picker.visible_repo_ids().index(name), 0)
        assert not index.flags() & Qt.ItemFlag.ItemIsSelectable and not picker.select(name)
        assert index.data(Qt.ItemDataRole.ForegroundRole).color() == picker.palette().color(
            QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
    path_tip = proxy.index(picker.visible_repo_ids().index("org/path-ref"), 4).data(Qt.ItemDataRole.ToolTipRole)
    assert path_tip.startswith("org/path-ref cannot be opened: org/path-ref's ref ") and "40 hex digits" in path_tip
    assert path_tip.endswith(str(broken_cache / "models--org--path-ref"))
    assert picker.status_label.text() == (f"2 models to open in {broken_cache}; 5 greyed cannot be opened (the Head "
                                          "column says why; hover for more).")

    chosen: list[str] = []
    picker.modelChosen.connect(chosen.append)
    centre = picker.table.visualRect(proxy.index(picker.visible_repo_ids().index("org/path-ref"), 0)).center()
    qtbot.mouseClick(picker.table.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    qtbot.mouseDClick(picker.table.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    assert chosen == [] and picker.result() != picker.DialogCode.Accepted
    assert picker.selected_model() is None and not picker.open_button.isEnabled()

    picker.show_unopenable.setChecked(False)
    assert sorted(picker.visible_repo_ids()) == ["org/other-bert", "org/tiny-bert"]
    assert picker.status_label.text().endswith("; 5 that cannot be opened are hidden.")
    picker.show_unopenable.setChecked(True)
    qtbot.keyClicks(picker.filter_edit, "path")
    assert picker.visible_repo_ids() == ["org/path-ref"] and not picker.open_button.isEnabled()


def test_a_cache_that_cannot_be_read_is_said_in_the_picker(qtbot, hub_env: Path, cached_tiny: Path):
    picker = ModelPicker()
    qtbot.addWidget(picker)
    hub_env.chmod(0)
    try:
        with permissions_enforced(), qtbot.waitSignal(picker.listed, timeout=WAIT_MS):
            picker.refresh()
    finally:
        hub_env.chmod(0o755)
    assert picker.status_label.text() == (f"Could not read the Hugging Face cache: {hub_env} cannot be read "
                                          "(Permission denied); check its permissions, or set HF_HUB_CACHE (or "
                                          "HF_HOME) to a cache you can read")
    assert picker.visible_repo_ids() == [] and not picker.open_button.isEnabled()


def test_an_empty_cache_says_where_it_looked_and_how_to_fill_it(qtbot, hub_env: Path):
    picker = ModelPicker()
    qtbot.addWidget(picker)
    with qtbot.waitSignal(picker.listed, timeout=WAIT_MS):
        picker.refresh()
    text = picker.status_label.text()
    assert str(hub_env) in text and "Download from the Hub" in text
    assert not picker.open_button.isEnabled()


# -- Model ▸ Download from the Hub… ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_download_shows_its_progress_and_opens_the_model(qtbot, window, serve, checkpoint_files, hub_env: Path):
    serve({"org/tiny-bert": checkpoint_files})
    dialog = window.open_hub_download()
    values: list[int] = []
    dialog.progress_bar.valueChanged.connect(values.append)
    qtbot.keyClicks(dialog.repo_edit, "org/tiny-bert")

    with qtbot.waitSignals([dialog.downloaded, window.modelChanged], timeout=WAIT_MS):
        qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)

    assert values[-1] == PROGRESS_STEPS and values == sorted(values) and len(set(values)) > 2
    total = sum(len(content) for content in checkpoint_files.values())
    assert dialog.progress_bar.text() == f"{total / 1e6:.1f} MB of {total / 1e6:.1f} MB (100%)"
    assert not dialog.isVisible()
    assert window.windowTitle().startswith("org/tiny-bert")
    assert window.inspect_tab.state.model_info.path == str(hub_env / "models--org--tiny-bert" / "snapshots"
                                                           / HUB_COMMIT)


@pytest.mark.slow
def test_cancelling_a_download_says_cancelled_and_keeps_nothing(qtbot, serve, checkpoint_files, hub_env: Path,
                                                                monkeypatch: pytest.MonkeyPatch):
    from bertcore.models import hub_download

    monkeypatch.setattr(hub_download, "_READ_BYTES", 1024)  # the weights arrive in many reads,
    monkeypatch.setattr(hub_download, "_PROGRESS_BYTES", 1024)  # each of them reported
    serve({"org/tiny-bert": checkpoint_files})

    def download_held_inside_the_weights(repo_id, *, progress, cancel):
        def report(done, total, filename):
            progress(done, total, filename)
            deadline = time.monotonic() + 10
            while filename == "model.safetensors" and not cancel() and time.monotonic() < deadline:
                time.sleep(0.01)  # until the user has pressed Cancel: no race with the download finishing

        return download_model(repo_id, progress=report, cancel=cancel)

    dialog = HubDownloadDialog(download=download_held_inside_the_weights)
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.start("org/tiny-bert")
    qtbot.waitUntil(lambda: "model.safetensors" in dialog.status_label.text(), timeout=WAIT_MS)
    assert dialog.cancel_button.isEnabled() and not dialog.download_button.isEnabled()

    with qtbot.waitSignal(dialog.ended, timeout=WAIT_MS) as ended:
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)

    assert ended.args == ["cancelled"]
    assert dialog.status_label.text() == "Download cancelled: nothing of org/tiny-bert was kept."
    storage = hub_env / "models--org--tiny-bert"
    assert not storage.exists() or not list(storage.rglob("*"))
    qtbot.waitUntil(lambda: dialog.download_button.isEnabled(), timeout=WAIT_MS)


@pytest.mark.slow
def test_a_stalled_download_says_so_and_cancel_acts_at_once(qtbot, serve, checkpoint_files, hub_env: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    """Cancel waited for the stalled read's timeout: 67 s, then a timeout error instead of "cancelled"."""
    from explorer.window._qt import hub_download_dialog

    monkeypatch.setattr(hub_download_dialog, "QUIET_SECONDS", 1)
    serve({"org/tiny-bert": checkpoint_files}, bodies={"model.safetensors": "stall"})
    dialog = HubDownloadDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.start("org/tiny-bert")
    qtbot.waitUntil(lambda: "nothing received for" in dialog.status_label.text(), timeout=WAIT_MS)
    assert dialog.status_label.text().startswith("Downloading org/tiny-bert: model.safetensors — nothing received "
                                                 "for ") and "\u00a0s; the Hub or the network is slow" in (
        dialog.status_label.text())
    assert "Cancel stops the download at once" in dialog.status_label.text()

    clicked = time.monotonic()
    with qtbot.waitSignal(dialog.ended, timeout=WAIT_MS) as ended:
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)

    assert ended.args == ["cancelled"] and time.monotonic() - clicked < 1.5
    assert dialog.status_label.text() == "Download cancelled: nothing of org/tiny-bert was kept."
    storage = hub_env / "models--org--tiny-bert"
    assert not storage.exists() or not list(storage.rglob("*"))
    qtbot.waitUntil(lambda: dialog.download_button.isEnabled(), timeout=WAIT_MS)


def test_a_failed_download_shows_bertcores_message_as_it_is(qtbot, serve):
    hub = serve({})
    dialog = HubDownloadDialog()
    qtbot.addWidget(dialog)
    with qtbot.waitSignal(dialog.ended, timeout=WAIT_MS) as ended:
        dialog.start("org/missing")
    assert ended.args == ["failed"]
    assert dialog.status_label.text() == (f"there is no model org/missing on {hub.url} (404); check the spelling "
                                          "(org/name, as on the model's page)")
    assert hub.url in dialog.where_label.text()
