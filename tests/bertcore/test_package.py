"""The front door: `import bertcore` is cheap (no torch) and every public name resolves from it."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bertcore

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_importing_the_package_and_its_config_does_not_import_torch():
    output = run_python(
        "import sys, bertcore\n"
        "bertcore.BertConfig, bertcore.TrainingConfig, bertcore.preset('tiny')\n"
        "import bertcore.models.config, bertcore.training.settings\n"
        "import bertcore.files.run_folder, bertcore.errors, bertcore.files.atomic\n"
        "import bertcore.training.divergence\n"
        "bertcore.CheckpointError, bertcore.TrainingError\n"
        "print('torch' in sys.modules)\n"
        "print(bertcore.load_pretrained.__module__, 'torch' in sys.modules)\n"
    )
    assert output.split() == ["False", "bertcore.models.checkpoint", "True"]


def test_bert_train_help_does_not_import_torch():
    output = run_python(
        "import contextlib, io, sys\n"
        "from bertcore.cli.train import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as help_text, contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print('--divergence-factor' in help_text.getvalue(), 'torch' in sys.modules)\n"
    )
    assert output.split() == ["True", "False"]


def test_bert_finetune_help_does_not_import_torch():
    output = run_python(
        "import contextlib, io, sys\n"
        "from bertcore.cli.finetune import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as help_text, contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print('--init-from' in help_text.getvalue(), '--demo' in help_text.getvalue(), 'torch' in sys.modules)\n"
    )
    assert output.split() == ["True", "True", "False"]


def test_every_public_name_resolves_and_is_listed():
    expected = {"BertConfig", "preset", "BertModel", "BertForPreTraining", "BertTokenizer", "mask_like_bert",
                "load_pretrained", "save_pretrained", "inspect", "inspect_encoding", "Trainer", "TrainingConfig",
                "CheckpointError", "__version__"}
    assert expected <= set(bertcore.__all__)
    assert set(bertcore.__all__) <= set(dir(bertcore))
    for name in bertcore.__all__:
        assert getattr(bertcore, name) is not None
    from bertcore.analysis.inspection import inspect
    from bertcore.models.checkpoint import CheckpointError, load_pretrained
    from bertcore.training.pretraining import TrainingConfig

    assert bertcore.load_pretrained is load_pretrained and bertcore.inspect is inspect
    assert bertcore.CheckpointError is CheckpointError and bertcore.TrainingConfig is TrainingConfig
    assert {"training", "files", "models", "analysis", "cli"} <= set(dir(bertcore))
    assert bertcore.training.pretraining.Trainer is bertcore.Trainer  # submodules are attributes too
    with pytest.raises(AttributeError, match="no attribute 'Nonsense'"):
        bertcore.Nonsense  # noqa: B018


def test_one_version_for_the_package_the_distribution_and_the_app():
    import explorer

    assert explorer.__version__ == bertcore.__version__
    try:
        installed = importlib.metadata.version("bert-explorer")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("bert-explorer is not installed (pip install -e .)")
    assert installed == bertcore.__version__
