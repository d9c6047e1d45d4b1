"""Which tab and command line each kind of run belongs to (pretraining: the Train tab and bert-train; fine-tuning:
the Fine-tune tab and bert-finetune), why a run folder is not for a given tab, and what a folder picked with *Open
run folder…* is when it is no run of either kind (`run_folder_verdict`): a Hugging Face Trainer output folder, a
TensorBoard log folder, a model checkpoint, or nothing of a run at all is said at once, instead of waiting for a
first step that will never come; a folder that may still become a run (empty, or a run only just started) is
watched, saying what for."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from bertcore.files.file_names import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    FINAL_DIR,
    LOCK_FILE,
    METRICS_FILE,
    PYTORCH_FILE,
    RUN_CONFIG_FILE,
    SAFETENSORS_FILE,
    checkpoint_step,
)
from bertcore.files.run_folder import read_run_config
from explorer.runs.curve_layout import layout_for_run

TAB_OF_KIND = {"pretraining": "Train", "finetuning": "Fine-tune"}
COMMAND_OF_KIND = {"pretraining": "bert-train", "finetuning": "bert-finetune"}

TRAINER_FILES = ("trainer_state.json", "training_args.bin")  # what transformers' Trainer writes into its output
TENSORBOARD_PREFIX = "events.out.tfevents."  # a TensorBoard event file's name
WEIGHT_FILES = (SAFETENSORS_FILE, PYTORCH_FILE, "model.safetensors.index.json", "pytorch_model.bin.index.json")
SCAN_LIMIT = 2_000  # entries read of a folder and of each of its subfolders: a home folder picked by mistake answers
SUBFOLDER_LIMIT = 200  # subfolders looked into (TensorBoard logs sit one or two levels down, Trainer's checkpoints one)


def wrong_tab_reason(folder: str | os.PathLike, kind: str) -> str | None:
    """Why the run in `folder` is not for the tab of runs of `kind` ("pretraining", "finetuning"): it holds a run
    of the other kind, and the tab to open it in. None for a run of that kind, or for a folder without a readable
    run_config.json (yet), which may still be watched until one appears."""
    try:
        config = read_run_config(folder)
    except (ValueError, OSError):
        return None
    found = layout_for_run(config).kind
    if found == kind:
        return None
    return f"{Path(folder)} holds a {found} run ({COMMAND_OF_KIND[found]}); open it in the {TAB_OF_KIND[found]} tab"


@dataclass(frozen=True)
class FolderVerdict:
    """Whether a tab of runs may watch a folder, and what to say: why not, or what the watch waits for ("" for a
    run that has steps to show)."""

    watch: bool
    message: str = ""


def run_folder_verdict(folder: str | os.PathLike, kind: str) -> FolderVerdict:
    """What the folder picked with *Open run folder…* in the tab of runs of `kind` is, for that tab."""
    folder = Path(folder)
    command = COMMAND_OF_KIND[kind]
    watches = f"this tab watches the folders that {command} --out writes"
    if problem := wrong_tab_reason(folder, kind):
        return FolderVerdict(False, f"Cannot open it here: {problem}.")
    names = _names(folder)
    if RUN_CONFIG_FILE in names or METRICS_FILE in names:
        if METRICS_FILE not in names:
            return FolderVerdict(True, f"The run in {folder} has started but written no step yet: waiting for its "
                                       "first step.")
        return FolderVerdict(True)
    if LOCK_FILE in names:  # held while a run prepares its corpus and model, before its run_config.json
        return FolderVerdict(True, f"A run is starting in {folder} (it holds the run's lock; no configuration yet): "
                                   "waiting for its first step.")
    found = _trainer_files(folder, names)
    if found:
        return FolderVerdict(False, f"{folder} is a Hugging Face Trainer output folder ({found}), not a {command} "
                                    f"run: {watches}.")
    if _has_tensorboard_events(folder, names):
        return FolderVerdict(False, f"{folder} is a TensorBoard log folder ({TENSORBOARD_PREFIX}* files), not a "
                                    f"{command} run: {watches}.")
    if CONFIG_FILE in names and any(name in names for name in WEIGHT_FILES):
        run = _run_around(folder)
        if run is not None:
            return FolderVerdict(False, f"{folder} is a checkpoint of the run in {run}: open that folder to watch "
                                        "the run.")
        return FolderVerdict(False, f"{folder} is a model checkpoint, not a run: open it in the Inspect tab with "
                                    f"Model ▸ Open checkpoint folder…; {watches}.")
    if not [name for name in names if not name.startswith(".")]:
        return FolderVerdict(True, f"{folder} is empty: waiting for a run to start in it ({command} --out "
                                   f"{folder}).")
    return FolderVerdict(False, f"{folder} is not a run folder: it holds none of a {command} run's files "
                                f"({RUN_CONFIG_FILE}, {METRICS_FILE}); {watches}.")


def _entries(folder: Path) -> list[os.DirEntry]:
    """At most SCAN_LIMIT entries of `folder`; none when it cannot be read."""
    try:
        with os.scandir(folder) as entries:
            return list(itertools.islice(entries, SCAN_LIMIT))
    except OSError:
        return []


def _names(folder: Path) -> set[str]:
    return {entry.name for entry in _entries(folder)}


def _subfolders(folder: Path) -> list[Path]:
    folders = []
    for entry in _entries(folder):
        try:
            if entry.is_dir():
                folders.append(Path(entry.path))
        except OSError:
            continue
        if len(folders) >= SUBFOLDER_LIMIT:
            break
    return folders


def _trainer_files(folder: Path, names: set[str]) -> str:
    """What marks `folder` as a Trainer's output, in words ("trainer_state.json", "checkpoint-500/trainer_state.json");
    "" when nothing does."""
    for name in TRAINER_FILES:
        if name in names:
            return name
    for subfolder in _subfolders(folder):
        if subfolder.name.startswith("checkpoint-") and (subfolder / TRAINER_FILES[0]).is_file():
            return f"{subfolder.name}/{TRAINER_FILES[0]}"
    return ""


def _has_tensorboard_events(folder: Path, names: set[str], depth: int = 2) -> bool:
    """Event files in `folder` or up to `depth` folders below it (a log folder holds one folder per run)."""
    if any(name.startswith(TENSORBOARD_PREFIX) for name in names):
        return True
    if depth == 0:
        return False
    return any(_has_tensorboard_events(subfolder, _names(subfolder), depth - 1) for subfolder in _subfolders(folder))


def _run_around(folder: Path) -> Path | None:
    """The run folder a checkpoint sits in (its final/ or checkpoints/step-N/), when there is one."""
    folder = folder.absolute()
    if folder.name == FINAL_DIR:
        run = folder.parent
    elif checkpoint_step(folder.name) is not None and folder.parent.name == CHECKPOINTS_DIR:
        run = folder.parent.parent
    else:
        return None
    return run if (run / RUN_CONFIG_FILE).is_file() or (run / METRICS_FILE).is_file() else None
