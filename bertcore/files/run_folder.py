"""A training run's folder, whole: the one place that reads, writes, locks and prunes its files, and chooses the
checkpoint a resume continues from.

Shared by the training loop (bertcore.training.loop: pretraining and fine-tuning), the command lines and the
app's run watcher. Torch-free: what a loop stores in a checkpoint it writes itself, through `write_checkpoint`'s
callback. The folder's layout, and the name of each file in it, are in bertcore.files.file_names.

In reading order:
- `RunFolder`: the files of one run by name and the operations on them. A checkpoint is filled in a hidden
  staging folder and renamed into place (bertcore.files.atomic), and only then is `latest` replaced, so a crash,
  a kill or a full disk never leaves a half checkpoint as the latest. `latest` must name a folder inside
  checkpoints/; a pointer (or a --resume path) leading elsewhere is refused.
- Which checkpoint a resume continues from (`RunFolder.resume_choice`, `ResumeChoice`): the step folders, the
  `latest` pointer, and each checkpoint's sanity record (sanity.json). Resuming without naming a checkpoint
  continues from the newest one whose loss was sane: after a NaN or a diverging loss, the checkpoints written once
  the loss had gone bad are passed over (and named), and pruning never deletes the newest sane checkpoint.
- A run's checkpoints seen from outside (the app's run watcher, `--resume PATH`, the checkpoint pickers): the
  complete ones, the newest, and the one a resume continues from (`list_checkpoints`, `latest_checkpoint`,
  `find_checkpoint`).
- The lock that keeps two training runs out of one folder (`RunLock`, <run>/run.lock; `RunFolder.lock()` takes
  it), and a run folder held by one training loop across its `steps()` loops (`RunClaim`): the lock is let go
  when a loop ends and taken back for the next loop or save only if no other run changed the folder meanwhile.

Nothing is written through a symbolic link: files are replaced by rename (which replaces a link, never what it
leads to), and the files opened in place (run.lock, metrics.jsonl) are opened without following a link; a link,
folder, FIFO or device where one of them belongs is a RunFolderError saying so. A run folder whose checkpoints/
or final/ is a link is refused outright (`refuse_linked_folders`): pruning would delete folders it did not make.
metrics.jsonl is written and read while it grows in bertcore.files.metrics_log; a failed write says why and what
to do through bertcore.files.atomic.run_write_error.

Every file is read through bertcore.files.reading: only a regular file, of a bounded size, never opened in a way
that waits (a FIFO) or reads without end (a link to /dev/zero), and JSON nested too deeply is a damaged file, not
a RecursionError. The app polls a watched run's files on its GUI thread, so a read must never block.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import warnings
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.errors import (
    CheckpointWriteError,
    RunFolderBusyError,
    RunFolderError,
    RunFolderWriteError,
    TrainingError,
)
from bertcore.files.atomic import (
    NotAFileError,
    describe_os_error,
    open_plain_file,
    remove_atomically,
    remove_leftovers,
    run_write_error,
    staged_folder,
    write_json_atomic,
    write_text_atomic,
)
from bertcore.files.file_names import (
    CHECKPOINT_PREFIX,
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    FINAL_DIR,
    LATEST_POINTER,
    LOCK_FILE,
    METRICS_FILE,
    PYTORCH_FILE,
    RUN_CONFIG_FILE,
    SAFETENSORS_FILE,
    SANITY_FILE,
    SUMMARY_FILE,
    TRAINER_STATE_FILE,
    VOCAB_FILE,
    checkpoint_name,
    checkpoint_step,
)
from bertcore.files.metrics_log import MetricsLog, MetricsTail
from bertcore.files.reading import RUN_JSON_LIMIT, read_bytes, read_json

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

# `latest` holds one folder name ("step-000500\n"); anything longer is not a pointer bertcore wrote.
_POINTER_LIMIT = 4096


class RunFolder:
    """The files of one training run by name, and the operations on them. Creating one touches nothing."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.run_config_path = self.path / RUN_CONFIG_FILE
        self.metrics_path = self.path / METRICS_FILE
        self.summary_path = self.path / SUMMARY_FILE
        self.vocab_path = self.path / VOCAB_FILE
        self.final_dir = self.path / FINAL_DIR
        self.checkpoints_dir = self.path / CHECKPOINTS_DIR
        self.latest_pointer_path = self.checkpoints_dir / LATEST_POINTER
        self.lock_path = self.path / LOCK_FILE

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def checkpoint_path(self, step: int) -> Path:
        return self.checkpoints_dir / checkpoint_name(step)

    def looks_like_run(self) -> bool:
        return looks_like_run_dir(self.path)

    def lock(self) -> RunLock:
        """The folder's lock, taken (RunFolderBusyError when another holds it); release it when done."""
        return RunLock(self.lock_path).acquire()

    def start(self, resume: bool | str | os.PathLike = False, *,
              judge: Callable[[Path], bool] | None = None) -> ResumeChoice | None:
        """Where a run in this folder starts: None for a new run, else the checkpoint a resume continues from
        (`resume=True`: the newest sane one, see `resume_choice`; a path: that checkpoint), with the newest one known
        to be sane (`ResumeChoice.last_good`). Touches nothing. RunFolderError when checkpoints/ or final/ is a link
        or there is nothing to resume; ValueError when a new run would start where a run has checkpoints."""
        self.refuse_linked_folders()
        if resume:
            return self.resume_choice(None if resume is True else resume, judge=judge)
        if self.checkpoint_folders():
            raise ValueError(f"{self.path} already holds a run with checkpoints; resume it (--resume) or choose "
                             "another output folder (--out)")
        return None

    def begin(self, tokenizer, run_config: dict[str, Any], *, resumed_at_step: int | None = None,
              note: str | None = None) -> MetricsLog:
        """Make the folder ready for a run's writes (under its lock) and open its metrics: the folder made and
        cleared of what a crashed writer left, the vocabulary and run_config.json written for a new run (a resumed
        one keeps its own, unless they are missing), metrics.jsonl started afresh for a new run or cut after
        `resumed_at_step` for a resumed one, and `note` (what a resume passed over) as its "warning" record."""
        self.create()
        new = resumed_at_step is None
        if new or not self.vocab_path.exists():  # a new run: not a killed run's vocabulary
            self.write_vocabulary(tokenizer)
        if new or not self.run_config_path.exists():
            self.write_run_config(run_config)
        metrics = self.open_metrics(resumed_at_step, fresh=new)
        if note is not None:
            metrics.write({"kind": "warning", "step": resumed_at_step or 0, "message": note})
        return metrics

    def create(self) -> None:
        """Make the folder and checkpoints/, and delete what a crashed writer left (call it under the lock).
        RunFolderError when checkpoints/ or final/ is a symbolic link (`refuse_linked_folders`)."""
        self.refuse_linked_folders()
        with run_write_error(self.path, "the run folder"):
            self.checkpoints_dir.mkdir(parents=True, exist_ok=True)
        for folder in (self.path, self.checkpoints_dir):
            remove_leftovers(folder)

    def refuse_linked_folders(self, *, final: bool = True) -> None:
        """RunFolderError when checkpoints/ (or final/, unless `final` is False) is a symbolic link: the run would
        write its checkpoints into (and prune them from) whatever folder the link leads to, which it did not make.
        A link to the run folder itself is fine: everything then stays in the folder it leads to."""
        for folder in (self.checkpoints_dir, self.final_dir) if final else (self.checkpoints_dir,):
            if folder.is_symlink():
                target = link_target(folder)
                raise RunFolderError(
                    f"{folder} is a symbolic link (to {target}); a run writes its checkpoints and final weights "
                    f"only into folders it made, never through a link, since pruning would delete folders in "
                    f"{target}. To keep checkpoints on another disk, make the whole run folder there "
                    f"(--out /other/disk/{self.path.name}, or link the run folder itself); delete the link "
                    f"{folder} (what it leads to is left alone), then try again")

    def write_vocabulary(self, tokenizer) -> None:
        """The run's vocab.txt and tokenizer_config.json, as `tokenizer.save(folder)` writes them."""
        with run_write_error(self.vocab_path, "the vocabulary"):
            tokenizer.save(self.path)

    # ---- run_config.json and summary.json
    def read_run_config(self) -> dict[str, Any]:
        """run_config.json as a dict; ValueError naming the file when it is missing or unreadable."""
        return read_run_config(self.path)

    def read_training_settings(self) -> dict[str, Any]:
        """The "training" settings run_config.json records, with `out_dir` pointed at this folder: what a resumed
        run continues with. ValueError naming the file when it is missing, unreadable or records none."""
        recorded = self.read_run_config().get("training")
        if not isinstance(recorded, dict):
            raise ValueError(f"{self.run_config_path} records no training settings; it was not written by "
                             "bert-train or this app, so it cannot be resumed")
        return {**recorded, "out_dir": str(self.path)}

    def write_run_config(self, values: dict[str, Any]) -> None:
        with run_write_error(self.run_config_path, "the run configuration"):
            write_json_atomic(self.run_config_path, values)

    def read_summary(self) -> dict[str, Any] | None:
        """summary.json as a dict, or None when the run has not written one (or it is unreadable: not a regular
        file, too big, not JSON)."""
        try:
            values = read_json(self.summary_path, limit=RUN_JSON_LIMIT)
        except (OSError, ValueError):
            return None
        return values if isinstance(values, dict) else None

    def write_summary(self, values: dict[str, Any]) -> None:
        with run_write_error(self.summary_path, "the run summary"):
            write_json_atomic(self.summary_path, values)

    # ---- metrics.jsonl
    def open_metrics(self, resumed_at_step: int | None = None, *, fresh: bool = False) -> MetricsLog:
        """The metrics writer: `fresh` starts a new curve (a new run in an old folder); `resumed_at_step` drops
        the records after that step; neither appends (a loop iterated again)."""
        if fresh:
            with run_write_error(self.metrics_path, "the metrics file"), contextlib.suppress(FileNotFoundError):
                self.metrics_path.unlink()
        return MetricsLog(self.metrics_path, truncate_after_step=resumed_at_step)

    def metrics_tail(self) -> MetricsTail:
        return MetricsTail(self.metrics_path)

    # ---- writing checkpoints (which one a resume takes: below)
    def write_checkpoint(self, step: int, write_files: Callable[[Path], None], *, keep: int,
                         protect: Iterable[Path | None] = (), sane: bool = True,
                         smoothed_loss: float | None = None) -> Path:
        """Write checkpoints/step-NNNNNN whole, point `latest` at it and delete the oldest checkpoints beyond the
        newest `keep` (never one in `protect`, nor the newest sane one); returns the folder. `write_files(folder)`
        fills a staging folder; its sanity.json records `sane` (the loss was sane when it was written) and
        `smoothed_loss`.

        On a write error (disk full, ...; a library's own exception becomes an OSError through
        bertcore.files.atomic.library_write) nothing half-written stays, `latest` still names the previous
        checkpoint, and CheckpointWriteError says so."""
        self.refuse_linked_folders(final=False)  # linked since create(): not a folder to write into nor prune
        folder = self.checkpoint_path(step)
        previous = self.latest_resumable()
        loss = smoothed_loss if smoothed_loss is not None and math.isfinite(smoothed_loss) else None
        sanity = {"step": step, "sane": sane, "smoothed_loss": loss,
                  "reason": None if sane else "written while the smoothed loss was far above its best"}
        try:
            with staged_folder(folder) as staging:
                write_files(staging)
                write_json_atomic(staging / SANITY_FILE, sanity)
            write_text_atomic(self.latest_pointer_path, folder.name + "\n")
        except OSError as error:
            kept = f"{previous} is still the latest checkpoint" if previous else "there is no earlier checkpoint"
            raise CheckpointWriteError(
                f"could not write the checkpoint of step {step} to {folder}: {describe_os_error(error)}. Nothing "
                f"half-written was left and {kept}. Free disk space (or fix the folder's permissions), then resume the "
                "run (--resume)", folder, error.errno) from error
        self.prune_checkpoints(keep, protect=(folder, *protect))
        return folder

    def write_final(self, write_files: Callable[[Path], None]) -> Path:
        """Write final/ whole (`write_files` fills a staging folder); CheckpointWriteError on a write error."""
        try:
            with staged_folder(self.final_dir) as staging:
                write_files(staging)
        except OSError as error:
            raise CheckpointWriteError(
                f"could not write the final weights to {self.final_dir}: {describe_os_error(error)}. The checkpoints "
                f"in {self.checkpoints_dir} are intact; free disk space and resume the run (--resume) to write them",
                self.final_dir, error.errno) from error
        return self.final_dir

    def prune_checkpoints(self, keep: int, protect: Iterable[Path | None] = ()) -> list[Path]:
        """Delete the oldest step folders beyond the newest `keep`, sparing those in `protect` and the newest sane
        one (after a NaN or a divergence it is the one to go back to); returns them. A folder is renamed away
        before it is deleted, so an interruption never leaves half a checkpoint under its name; a link to a
        folder elsewhere is left alone."""
        self.refuse_linked_folders(final=False)
        spared = {folder.name for folder in protect if folder is not None}
        newest_sane = self.newest_sane_checkpoint()
        if newest_sane is not None:
            spared.add(newest_sane.name)
        folders = self.checkpoint_folders()
        deleted = [folder for folder in folders[: max(0, len(folders) - keep)]
                   if folder.name not in spared and not folder.is_symlink()]
        for folder in deleted:
            remove_atomically(folder)
        return deleted

    # ---- which checkpoint a resume continues from
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
            sane = self._judged(folder, judge)
            last_good = folder if sane is not False else self.newest_sane_checkpoint(before=folder)
            return ResumeChoice(folder, (), sane, last_good)
        candidates = self.resume_candidates()
        if not candidates:
            raise RunFolderError(f"there is no checkpoint to resume in {self.path}; start a new run without --resume")
        skipped: list[Path] = []
        for folder in candidates:
            if self._judged(folder, judge) is not False:
                return ResumeChoice(folder, tuple(skipped), True, folder)
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


@dataclass(frozen=True)
class ResumeChoice:
    """The checkpoint a resume continues from (`RunFolder.resume_choice`)."""

    folder: Path
    skipped: tuple[Path, ...] = ()  # newer checkpoints passed over: written after the loss went bad, newest first
    sane: bool | None = True  # whether its loss was sane (False only for a named one; None: it does not say)
    # The newest checkpoint known to be sane: `folder`, or, when it was written after the loss went bad, the newest
    # sane one before it (the one to go back to after a NaN or a divergence); None when there is none.
    last_good: Path | None = None

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


def link_target(path: Path) -> str:
    """Where a symbolic link leads, for a message (what reading it failed with, when it cannot be read)."""
    try:
        return os.readlink(path)
    except OSError as error:
        return f"? ({describe_os_error(error)})"


# ---- reading a run folder (the app's run watcher) ---------------------------------------------------------

def read_run_config(run_dir: str | os.PathLike) -> dict:
    """The run's `run_config.json` as a dict; ValueError naming the file when it is missing or unreadable (not a
    regular file, too big, not JSON)."""
    path = Path(run_dir) / RUN_CONFIG_FILE
    try:
        values = read_json(path, limit=RUN_JSON_LIMIT, what="a run_config.json")
    except FileNotFoundError:
        raise ValueError(
            f"{path} does not exist; open the folder that `bert-train --out` wrote (it holds "
            f"{RUN_CONFIG_FILE} and {METRICS_FILE})"
        ) from None
    except ValueError as error:
        raise ValueError(f"{error}; is the run folder damaged?") from None
    if not isinstance(values, dict):
        raise ValueError(f"{path} holds a {type(values).__name__}, not a JSON object; is the run folder damaged?")
    return values

def looks_like_run_dir(path: str | os.PathLike) -> bool:
    """A folder with a metrics file or a run config, i.e. something `bert-train` wrote."""
    folder = Path(path)
    return folder.is_dir() and ((folder / METRICS_FILE).exists() or (folder / RUN_CONFIG_FILE).exists())


# ---- a run's checkpoints seen from outside (the app's run watcher, `--resume PATH`, the checkpoint pickers) --

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


# ---- the lock: one writer in a run folder at a time ----------------------------------------------------------

class RunLock:
    """An exclusive lock on a run folder: one writer (one process, one open Trainer) at a time.

    `fcntl.flock` on <run>/run.lock, which holds the holder's pid for the message of whoever is refused. The
    kernel drops a flock when its holder closes the file, exits or dies (even by kill -9), so a lock file left
    by a dead process is no obstacle: its lock died with it. Two opens of the file conflict even within one
    process, so a second Trainer on the same folder in the same app is refused too. Where there is no fcntl
    (Windows), or the file system cannot lock, a RuntimeWarning says that two runs in one folder are not
    refused there, and training goes on.

    Use as a context manager, or `acquire()` / `release()`; a lock that is garbage-collected, or still held at
    interpreter exit, is released.

    The lock file is opened without following a link: a link, folder, FIFO or device named run.lock is a
    RunFolderError, never truncated or written through. A folder where the lock file cannot be written
    (read-only, permissions) is a RunFolderWriteError naming the folder and the fix.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)  # <run>/run.lock (bertcore.files.file_names names it)
        self.folder = self.path.parent
        self.held = False
        self._finalizer: weakref.finalize | None = None

    def acquire(self) -> RunLock:
        """Take the lock, or raise RunFolderBusyError naming the folder and the holder's pid. Idempotent."""
        if self.held:
            return self
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise RunFolderWriteError(
                f"cannot create the run folder {self.folder}: {error.strerror or error}; choose another folder "
                "(--out) or fix its permissions", self.folder, error.errno) from None
        descriptor = self._lock_file() if fcntl is not None else None
        if descriptor is None and fcntl is None:
            _warn_unlocked(self.folder, "this platform has no fcntl")
        if descriptor is not None:
            with contextlib.suppress(OSError):  # the pid is for messages only: a full disk may refuse it
                os.ftruncate(descriptor, 0)
                os.write(descriptor, f"{os.getpid()}\n".encode())
            self._finalizer = weakref.finalize(self, _unlock, descriptor, self.path, os.getpid())
        self.held = True
        return self

    def _lock_file(self) -> int | None:
        for _ in range(100):
            descriptor = self._open()
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                holder = _read_pid(descriptor)
                os.close(descriptor)
                if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise RunFolderBusyError(self._busy_message(holder), self.folder, holder) from None
                _warn_unlocked(self.folder, f"its file system cannot lock ({error.strerror})")
                return None
            if _same_file(descriptor, self.path):
                return descriptor
            os.close(descriptor)  # the holder deleted the file between our open and our lock: lock the new one
        raise RunFolderError(f"could not lock {self.path}: other processes keep replacing it")

    def _open(self) -> int:
        """The lock file, opened for reading and writing (created if missing). Never through a link: a link,
        folder, FIFO or device named run.lock is refused (RunFolderError), and a folder that cannot be written
        (read-only, permissions) is a RunFolderWriteError naming the folder and the fix."""
        try:
            return open_plain_file(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except NotAFileError as error:
            raise RunFolderError(
                f"{error.strerror}: the lock file of the run folder {self.folder} must be a plain file, and "
                "bertcore never writes through a link, nor into a folder, FIFO or device in its place. Delete "
                f"{self.path} (it only holds the pid of the run training in the folder; what a link leads to is "
                "left alone) and start again") from None
        except OSError as error:
            raise RunFolderWriteError(
                f"cannot train in the run folder {self.folder}: its lock file {self.path} cannot be written "
                f"({describe_os_error(error)}). A run writes its checkpoints and metrics into its folder, so the "
                "folder must be writable: make it so (remount it read-write, or fix its permissions), or copy it "
                "to a writable place and resume the copy there (--out COPY --resume)",
                self.path, error.errno) from None

    def _busy_message(self, holder: int | None) -> str:
        if holder == os.getpid():
            return (f"{self.folder} is already in use by another Trainer in this process (pid {holder}); close() "
                    "that trainer, or let its run end, before training in the same folder again")
        who = f"process {holder}" if holder is not None else "another process"
        return (f"{self.folder} is in use by another training run: {who} holds {self.path}. Wait for it to finish "
                "(or stop it), or train in another folder (--out)")

    def release(self) -> None:
        """Let go of the lock (and delete the lock file). Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self.held = False

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


def _unlock(descriptor: int, path: Path, owner_pid: int) -> None:
    # Delete before closing: whoever opened the old file and locks it after our close sees that it is no longer
    # the one under the name, and retries on the new one. A forked child leaves the parent's file alone.
    if os.getpid() == owner_pid:
        with contextlib.suppress(OSError):
            if _same_file(descriptor, path):
                path.unlink()
    with contextlib.suppress(OSError):
        os.close(descriptor)  # releases the flock


def _same_file(descriptor: int, path: Path) -> bool:
    try:
        named = os.lstat(path)  # the entry itself: a link put in its place is another file
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (opened.st_dev, opened.st_ino) == (named.st_dev, named.st_ino)


def _read_pid(descriptor: int) -> int | None:
    try:
        return int(os.pread(descriptor, 64, 0).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _warn_unlocked(folder: Path, reason: str) -> None:
    warnings.warn(f"the run folder {folder} is not locked: {reason}, so a second run in the same folder would not "
                  "be refused", RuntimeWarning, stacklevel=4)


class RunClaim:
    """`folder`'s lock, taken at once when `hold` (rank 0; other ranks write nothing and hold nothing).

    `take()` holds it for a loop or a write (True when this call took it and must `give_back()`); `close()`
    releases it for good. `owner` names the holder in messages ("this Trainer")."""

    def __init__(self, folder: RunFolder, *, hold: bool, owner: str):
        self.folder = folder
        self.owner = owner
        self.closed = False
        self._lock = folder.lock() if hold else None  # RunFolderBusyError when another run holds it
        self._stamp_when_released: tuple | None = None

    def take(self) -> bool:
        """Hold the lock; refuses when this claim was closed, when another run holds the folder, or when another
        run changed it while this one did not hold it (its latest checkpoint or metrics differ): continuing then
        would write over that run's progress."""
        if self.closed:
            raise TrainingError(f"{self.owner} on {self.folder.path} was closed; create a new one (resume=True) "
                                "to go on")
        if self._lock is None or self._lock.held:
            return False
        self._lock.acquire()
        if self._stamp() != self._stamp_when_released:
            self._lock.release()
            raise RunFolderError(
                f"{self.folder.path} was changed by another run since {self.owner} last trained in it (its latest "
                "checkpoint or metrics differ); create a new one with resume=True to continue from there")
        return True

    def give_back(self) -> None:
        if self._lock is not None and self._lock.held:
            self._stamp_when_released = self._stamp()
            self._lock.release()

    def close(self) -> None:
        self.closed = True
        if self._lock is not None:
            self._lock.release()

    def _stamp(self) -> tuple:
        """What another run would change: the `latest` pointer and the metrics file's identity and size."""
        try:
            pointer = self.folder.latest_pointer_path.read_bytes()
        except OSError:
            pointer = None
        try:
            stat = self.folder.metrics_path.stat()
            metrics = (stat.st_ino, stat.st_size)
        except OSError:
            metrics = None
        return pointer, metrics
