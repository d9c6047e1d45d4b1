"""Which checkpoint of a run a resume continues from: the step folders, the `latest` pointer, and each checkpoint's
sanity record (sanity.json). Resuming without naming a checkpoint continues from the newest one whose loss was
sane (`resume_choice`): after a NaN or a diverging loss, the checkpoints written once the loss had gone bad are
passed over (and named), and pruning never deletes the newest sane checkpoint.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.errors import RunFolderError
from bertcore.files.atomic import write_json_atomic
from bertcore.files.file_names import (
    CHECKPOINT_PREFIX,
    CONFIG_FILE,
    SANITY_FILE,
    TRAINER_STATE_FILE,
    checkpoint_name,
    checkpoint_step,
)
from bertcore.files.reading import RUN_JSON_LIMIT, read_bytes, read_json
from bertcore.files.run_write_errors import run_write_error

# `latest` holds one folder name ("step-000500\n"); anything longer is not a pointer bertcore wrote.
_POINTER_LIMIT = 4096


@dataclass(frozen=True)
class ResumeChoice:
    """The checkpoint a resume continues from (`RunFolder.resume_choice`)."""

    folder: Path
    skipped: tuple[Path, ...] = ()  # newer checkpoints passed over: written after the loss went bad, newest first
    sane: bool | None = True  # whether its loss was sane (False only for a named one; None: it does not say)

    def note(self) -> str | None:
        """A sentence about what was passed over (or that a named checkpoint is not sane), or None."""
        if self.skipped:
            names = ", ".join(folder.name for folder in self.skipped)
            return (f"resuming from {self.folder.name}, the newest checkpoint written while the loss was sane; "
                    f"passed over the newer {names}, written after the loss went bad (NaN, or exploding). To "
                    f"continue from one of them anyway, name it: --resume {self.skipped[0]}")
        if self.sane is False:
            return (f"resuming from {self.folder.name} as asked, although it was written after the loss went bad "
                    "(NaN, or exploding)")
        return None


class CheckpointChoice:
    """The checkpoints of a run as a resume sees them (a base class of bertcore.files.run_folder.RunFolder, which
    sets what these read: path, checkpoints_dir, latest_pointer_path)."""

    def checkpoint_folders(self) -> list[Path]:
        """The visible step-NNNNNN folders inside checkpoints/, oldest step first (not checked for completeness)."""
        if not self.checkpoints_dir.is_dir():
            return []
        found = [(checkpoint_step(p.name), p) for p in self.checkpoints_dir.iterdir()]
        return [folder for step, folder in sorted((s, p) for s, p in found if s is not None) if folder.is_dir()]

    def checkpoint_sanity(self, folder: Path) -> dict[str, Any] | None:
        """A checkpoint's sanity.json ({"step", "sane", "smoothed_loss", "reason"}), or None when it has none
        (written before there was one) or it is unreadable (not a regular file, too big, not JSON)."""
        try:
            values = read_json(Path(folder) / SANITY_FILE, limit=RUN_JSON_LIMIT)
        except (OSError, ValueError):
            return None
        return values if isinstance(values, dict) and isinstance(values.get("sane"), bool) else None

    def is_sane(self, folder: Path) -> bool | None:
        """Whether the loss was sane when `folder` was written and its weights have not proved bad since; None
        when its sanity.json does not say (a checkpoint written before there was one)."""
        values = self.checkpoint_sanity(folder)
        return None if values is None else values["sane"]

    def mark_unsound(self, folder: Path, reason: str) -> None:
        """Record in `folder`'s sanity.json that its weights proved bad after it was written (`reason` says how,
        e.g. "its weights gave a loss of nan at step 41"): a resume passes over it from now on.
        RunFolderWriteError when it cannot be written."""
        values = self.checkpoint_sanity(folder) or {"step": checkpoint_step(Path(folder).name)}
        values.update(sane=False, reason=reason)
        path = Path(folder) / SANITY_FILE
        with run_write_error(path, "the checkpoint's sanity record"):
            write_json_atomic(path, values)

    def is_resumable(self, folder: Path) -> bool:
        """A complete checkpoint of this run: inside checkpoints/ (symlinks resolved), with config and trainer state."""
        return (self._inside_checkpoints(folder) and (folder / TRAINER_STATE_FILE).is_file()
                and (folder / CONFIG_FILE).is_file())

    def read_latest_pointer(self) -> Path | None:
        """The checkpoint `latest` names (it may be missing or incomplete), or None without a usable pointer (none,
        or not a regular file of a folder name).

        RunFolderError when it names anything but a folder directly inside checkpoints/."""
        try:
            name = read_bytes(self.latest_pointer_path, limit=_POINTER_LIMIT).decode("utf-8").strip()
        except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
            return None
        if not name:
            return None
        candidate = self.checkpoints_dir / name
        if name in (".", "..") or "/" in name or "\\" in name or not self._inside_checkpoints(candidate):
            raise RunFolderError(
                f"{self.latest_pointer_path} names {name!r}, which leads outside the run's {self.checkpoints_dir}; "
                f"it must name a {checkpoint_name(500)} folder in it. Delete the pointer (the newest checkpoint is "
                "then used) or write that folder's name into it")
        return candidate

    def latest_resumable(self) -> Path | None:
        """The checkpoint a resume continues from: `latest` when it names a complete one, else the newest complete
        step folder; None when there is none. RunFolderError when `latest` leads outside the run."""
        pointed = self.read_latest_pointer()
        if pointed is not None and self.is_resumable(pointed):
            return pointed
        complete = [folder for folder in self.checkpoint_folders() if self.is_resumable(folder)]
        return complete[-1] if complete else None

    def checkpoint_to_resume(self, path: str | os.PathLike | None = None) -> Path:
        """The checkpoint to continue from: `path` (which must be a complete checkpoint of this run), or, when
        None or the run folder itself, the newest one whose loss was sane (see `resume_choice`).
        RunFolderError naming the problem otherwise."""
        return self.resume_choice(path).folder

    def resume_candidates(self) -> list[Path]:
        """The complete checkpoints a resume without a named one may continue from, the preferred first: the one
        `latest` names, then the older ones, newest first (without a usable pointer: all, newest first)."""
        complete = [folder for folder in self.checkpoint_folders() if self.is_resumable(folder)]
        pointed = self.read_latest_pointer()
        if pointed is None or not self.is_resumable(pointed):
            return complete[::-1]
        step = checkpoint_step(pointed.name)
        older = [folder for folder in complete if folder.name != pointed.name
                 and (step is None or checkpoint_step(folder.name) < step)]
        return [pointed, *older[::-1]]

    def resume_choice(self, path: str | os.PathLike | None = None, *,
                      judge: Callable[[Path], bool] | None = None) -> ResumeChoice:
        """The checkpoint to continue from, and the newer ones passed over.

        A named checkpoint (`path`, not the run folder itself) is that one, sane or not, if it is a complete
        checkpoint of this run. Otherwise the newest of `resume_candidates` whose loss was sane: a checkpoint
        whose sanity.json says it was not (written while the loss was exploding, or its weights gave a NaN or
        an exploding loss afterwards) is skipped; `judge(folder)` decides for one without sanity.json (the
        loop reads its trainer_state.pt), and without a judge such a checkpoint counts as sane.
        RunFolderError when there is no checkpoint, or none sane."""
        if path is not None and Path(path).resolve() not in (self.path.resolve(), self.checkpoints_dir.resolve()):
            folder = Path(path)
            if not self._inside_checkpoints(folder):
                raise RunFolderError(
                    f"cannot resume from {folder}: it is not a checkpoint of the run folder {self.path} (it resolves "
                    f"to {folder.resolve()}). Resume one of {self.checkpoints_dir / (CHECKPOINT_PREFIX + '*')}, or "
                    "start a new run from those weights with init_from (--init-from)")
            if not self.is_resumable(folder):
                raise RunFolderError(f"{folder} is not a complete checkpoint (it needs {CONFIG_FILE} and "
                                     f"{TRAINER_STATE_FILE}); resume another one, or the run folder's latest")
            return ResumeChoice(folder, (), self._judged(folder, judge))
        candidates = self.resume_candidates()
        if not candidates:
            raise RunFolderError(f"there is no checkpoint to resume in {self.path}; start a new run without --resume")
        skipped: list[Path] = []
        for folder in candidates:
            if self._judged(folder, judge) is not False:
                return ResumeChoice(folder, tuple(skipped), True)
            skipped.append(folder)
        raise RunFolderError(
            f"every checkpoint in {self.checkpoints_dir} ({', '.join(f.name for f in skipped)}) was written after "
            "the loss went bad (NaN, or exploding), so there is none sane to resume from. Start a new run with a "
            f"lower learning rate, or resume one of them anyway by naming it (--resume {skipped[0]})")

    def newest_sane_checkpoint(self, before: Path | None = None, *,
                               judge: Callable[[Path], bool] | None = None) -> Path | None:
        """The newest complete checkpoint whose loss was sane (older than `before` when given), or None; one
        without sanity.json counts as sane unless `judge(folder)` says otherwise."""
        limit = checkpoint_step(Path(before).name) if before is not None else None
        for folder in reversed(self.checkpoint_folders()):
            if limit is not None and checkpoint_step(folder.name) >= limit:
                continue
            if self.is_resumable(folder) and self._judged(folder, judge) is not False:
                return folder
        return None

    def _judged(self, folder: Path, judge: Callable[[Path], bool] | None) -> bool | None:
        sane = self.is_sane(folder)
        if sane is None and judge is not None:
            sane = bool(judge(folder))
        return sane

    def _inside_checkpoints(self, folder: Path) -> bool:
        """`folder` is (after resolving symlinks and '..') a direct child of this run's checkpoints/."""
        return Path(folder).resolve().parent == self.checkpoints_dir.resolve()
