"""A run's checkpoints seen from outside (the app's run watcher, `--resume PATH`, the checkpoint pickers): the
complete ones, the newest, and the one a resume continues from."""

from __future__ import annotations

import os
import re
from pathlib import Path

from bertcore.errors import RunFolderError
from bertcore.files.file_names import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    PYTORCH_FILE,
    SAFETENSORS_FILE,
    TRAINER_STATE_FILE,
)
from bertcore.files.run_folder import RunFolder

_NUMBER_IN_NAME = re.compile(r"(\d+)")


def list_checkpoints(run_dir: str | os.PathLike) -> list[tuple[int | None, Path]]:
    """Complete checkpoints under `<run>/checkpoints/` as (step or None, folder), oldest step first.

    A checkpoint is a folder holding `config.json` and model weights; folders still being written (hidden or
    temporary names, no weights yet) are left out. Other programs' names count too: the last number in a
    folder's name is its step ("ckpt-300" → 300); named ones ("final") sort last with step None.
    """
    root = Path(run_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        if not folder.is_dir() or folder.name.startswith(".") or folder.name.endswith((".tmp", ".partial")):
            continue
        if not (folder / CONFIG_FILE).exists():
            continue
        if not ((folder / SAFETENSORS_FILE).exists() or (folder / PYTORCH_FILE).exists()):
            continue
        numbers = _NUMBER_IN_NAME.findall(folder.name)
        found.append((int(numbers[-1]) if numbers else None, folder))
    found.sort(key=lambda item: (item[0] is None, item[0] or 0, item[1].name))
    return found


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint folder of a run: the one `latest` names, else the newest by time; or None."""
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        return None
    try:
        pointed = RunFolder(run_dir).read_latest_pointer()
    except RunFolderError:
        pointed = None  # a pointer leading outside the run is not followed
    if pointed is not None and any(folder == pointed for _, folder in checkpoints):
        return pointed
    return max(checkpoints, key=lambda item: (item[1].stat().st_mtime, item[0] or 0))[1]


def find_checkpoint(path: str | os.PathLike) -> Path:
    """The checkpoint to resume from `path`: a checkpoint folder itself, or the one a resume of a run folder (or
    of its checkpoints/ folder) continues from: the newest whose loss was sane (`RunFolder.resume_choice`).
    RunFolderError when there is none or `latest` leads outside the run."""
    path = Path(path)
    if (path / TRAINER_STATE_FILE).is_file():
        return path
    if path.name == CHECKPOINTS_DIR and not (path / CHECKPOINTS_DIR).is_dir():
        path = path.parent
    return RunFolder(path).checkpoint_to_resume()
