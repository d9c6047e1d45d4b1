"""A training run's folder: the one place that reads, writes, locks and prunes its files.

Shared by the training loop (bertcore.training.loop: pretraining and fine-tuning), the command lines and the
app's run watcher. Torch-free: what a loop stores in a checkpoint it writes itself, through `write_checkpoint`'s
callback.

The folder's layout, and the name of each file in it, are in bertcore.files.file_names.

A checkpoint is filled in a hidden staging folder and renamed into place (bertcore.files.atomic), and only then is
`latest` replaced, so a crash, a kill or a full disk never leaves a half checkpoint as the latest. `latest`
must name a folder inside checkpoints/; a pointer (or a --resume path) leading elsewhere is refused.
Which checkpoint a resume continues from, and each checkpoint's sanity record, is bertcore.files.resume_choice's.

Nothing is written through a symbolic link: files are replaced by rename (which replaces a link, never what it
leads to), and the files opened in place (run.lock, metrics.jsonl) are opened without following a link; a link,
folder, FIFO or device where one of them belongs is a RunFolderError saying so. A run folder whose checkpoints/
or final/ is a link is refused outright (`refuse_linked_folders`): pruning would delete folders it did not make.

metrics.jsonl is written and read while it grows in bertcore.files.metrics_log; a run's checkpoints are found
from outside (the app, `--resume PATH`) by bertcore.files.run_lookup; a failed write says why and what to do
through bertcore.files.run_write_errors.

Every file is read through bertcore.files.reading: only a regular file, of a bounded size, never opened in a way
that waits (a FIFO) or reads without end (a link to /dev/zero), and JSON nested too deeply is a damaged file, not
a RecursionError. The app polls a watched run's files on its GUI thread, so a read must never block.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bertcore.errors import CheckpointWriteError, RunFolderError
from bertcore.files.atomic import (
    describe_os_error,
    remove_atomically,
    remove_leftovers,
    staged_folder,
    write_json_atomic,
    write_text_atomic,
)
from bertcore.files.file_names import (
    CHECKPOINTS_DIR,
    FINAL_DIR,
    LATEST_POINTER,
    LOCK_FILE,
    METRICS_FILE,
    RUN_CONFIG_FILE,
    SANITY_FILE,
    SUMMARY_FILE,
    VOCAB_FILE,
    checkpoint_name,
)
from bertcore.files.metrics_log import MetricsLog, MetricsTail
from bertcore.files.reading import RUN_JSON_LIMIT, read_json
from bertcore.files.resume_choice import CheckpointChoice
from bertcore.files.run_lock import RunLock
from bertcore.files.run_write_errors import link_target, run_write_error


class RunFolder(CheckpointChoice):
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

    # ---- writing checkpoints (which one a resume takes: CheckpointChoice)
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
