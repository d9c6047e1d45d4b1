"""Where the shipped assets live: the default corpus, vocabulary and trained checkpoint.

`assets/` sits beside the packages in the repository and is not copied into a wheel, so the app
resolves it from the checkout (the README installs in editable mode) or from the
`BERT_EXPLORER_ASSETS` environment variable, and says plainly when it cannot find it.
"""

from __future__ import annotations

import os
from pathlib import Path

ASSETS_ENV_VAR = "BERT_EXPLORER_ASSETS"


def assets_dir() -> Path:
    """The assets folder; FileNotFoundError with the fix when it is missing."""
    override = os.environ.get(ASSETS_ENV_VAR)
    folder = Path(override) if override else Path(__file__).resolve().parents[2] / "assets"
    if not folder.is_dir():
        raise FileNotFoundError(
            f"the assets folder {folder} does not exist; run from a checkout of bert-explorer "
            f"(pip install -e .) or set {ASSETS_ENV_VAR} to the folder that holds corpus/ and default-model/"
        )
    return folder


def default_corpus_path() -> Path:
    """Tiny Shakespeare, the built-in pretraining corpus."""
    return assets_dir() / "corpus" / "tinyshakespeare.txt"


def default_vocab_path() -> Path:
    """The WordPiece vocabulary trained on the default corpus (uncased)."""
    return assets_dir() / "vocab.txt"


def default_checkpoint_dir() -> Path:
    """The small BERT trained on the default corpus by `bert-train` (may not exist yet)."""
    return assets_dir() / "default-model"
