"""The training loop's checkpoints (a base class of bertcore.training.loop.TrainingLoop): which one a resume starts
from and restoring it, writing one atomically, which one is known to be sane after a NaN or a divergence, pruning
the rest, and final/.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch

from bertcore.errors import NonFiniteLossError, RunFolderError
from bertcore.files.file_names import TRAINER_STATE_FILE
from bertcore.training.divergence import learning_rate_advice
from bertcore.training.setup import TRAINER_STATE_VERSION, read_trainer_state


class LoopCheckpoints:
    """Checkpoints for `TrainingLoop` (resume from, restore, write, prune), which sets what these read: is_main,
    step, config, task, model, optimizer, run_folder, _lock, _claim, _metrics, _divergence, writing,
    last_checkpoint, last_good_checkpoint, _unconfirmed_checkpoint, world_size, _elapsed_before and `_elapsed()`."""

    def _choose_resume(self, resume: bool | str | Path) -> tuple[dict[str, Any] | None, bool]:
        """Set resumed_from and resume_note from `resume` (False, True: the newest sane checkpoint, or a named
        one); returns its trainer state (None for a new run) and whether it was written while the loss was sane."""
        self.resumed_from: Path | None = None
        self.resume_note: str | None = None  # which checkpoints a resume passed over (after a NaN or divergence)
        if not resume:
            return None, False
        judged: dict[Path, dict[str, Any]] = {}

        def sane_by_state(folder: Path) -> bool:
            # A checkpoint without sanity.json (written before there was one): its trainer state says.
            judged.clear()
            judged[folder] = read_trainer_state(folder / TRAINER_STATE_FILE)
            return bool(judged[folder].get("sane", True))

        choice = self.run_folder.resume_choice(None if resume is True else resume, judge=sane_by_state)
        self.resumed_from, self.resume_note = choice.folder, choice.note()
        state = judged.get(choice.folder) or read_trainer_state(self.resumed_from / TRAINER_STATE_FILE)
        return state, choice.sane is not False

    def _restore(self, state: dict[str, Any]) -> None:
        path = self.resumed_from / TRAINER_STATE_FILE
        try:
            self.optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError, IndexError) as error:
            raise RunFolderError(f"{path}: its optimizer state does not fit this model ({error}); the checkpoint "
                                 "is damaged. Resume from an earlier checkpoint, or start a new run") from None
        self.step = int(state["step"])
        self._elapsed_before = float(state["elapsed_seconds"])
        if "divergence" in state:  # absent in checkpoints written before the divergence check
            self._divergence.load_state_dict(state["divergence"])

    def save_checkpoint(self) -> Path | None:
        """Write `checkpoints/step-NNNNNN/` atomically and point `latest` at it; returns the folder
        (None on ranks other than 0, which write nothing). Thread-safe. CheckpointWriteError when the disk is
        full (or any write fails): nothing half-written stays and the previous checkpoint is still the latest."""
        if not self.is_main:
            return None
        with self._lock:
            if not self._parameters_finite():
                raise NonFiniteLossError(
                    f"the weights hold NaN/inf at step {self.step}; no checkpoint was written. "
                    + self._restart_advice(), self.step, self.last_good_checkpoint)
            sane = not self._divergence.rising
            took = self._claim.take()
            self.writing = "the checkpoint"
            try:
                # The newest sane checkpoint is never pruned: after a divergence it is the one to go back to.
                folder = self.run_folder.write_checkpoint(
                    self.step, self._write_checkpoint_files, keep=self.config.keep_checkpoints,
                    protect=[self.last_good_checkpoint], sane=sane, smoothed_loss=self._divergence.smoothed)
                if self._metrics is not None:
                    self._metrics.write({"kind": "checkpoint", "step": self.step, "path": str(folder),
                                         "smoothed_loss": self._divergence.smoothed, "sane": sane})
            finally:
                self.writing = None
                if took:
                    self._claim.give_back()
            self.last_checkpoint = folder
            self._unconfirmed_checkpoint = folder if sane else None
        return folder

    def _confirm_checkpoint(self) -> None:
        """The unconfirmed checkpoint proved sane: it is the last good one now, and the one before may go."""
        with self._lock:
            folder, self._unconfirmed_checkpoint = self._unconfirmed_checkpoint, None
            if folder is not None and folder.is_dir():
                self.last_good_checkpoint = folder
                self.run_folder.prune_checkpoints(self.config.keep_checkpoints, protect=[folder])

    def _discredit_unconfirmed(self, reason: str) -> None:
        """The unconfirmed checkpoint's weights gave a NaN or exploding loss (`reason` says which, at which
        step): its sanity.json says so from now on (a resume passes over it), and if it was the last good one,
        the newest sane one before it takes its place."""
        with self._lock:
            folder, self._unconfirmed_checkpoint = self._unconfirmed_checkpoint, None
            if folder is None or not self.is_main or not folder.is_dir():
                return
            with contextlib.suppress(RunFolderError):  # best effort: a full disk may refuse even this
                self.run_folder.mark_unsound(folder, reason)
            if self.last_good_checkpoint == folder:
                self.last_good_checkpoint = self.run_folder.newest_sane_checkpoint(before=folder)

    def _write_checkpoint_files(self, folder: Path) -> None:
        from bertcore.files.atomic import library_write

        self.task.write_model_files(folder)
        state = self._trainer_state()
        # torch.save reports a failed write (a full disk) as a RuntimeError: an OSError like any other write's.
        with library_write(folder / TRAINER_STATE_FILE, "torch.save", RuntimeError):
            torch.save(state, folder / TRAINER_STATE_FILE)

    def _trainer_state(self) -> dict[str, Any]:
        return {
            "version": TRAINER_STATE_VERSION,
            "step": self.step,
            "optimizer": self.optimizer.state_dict(),
            "elapsed_seconds": self._elapsed(),
            "training_config": self.config.to_dict(),
            "world_size": self.world_size,
            "divergence": self._divergence.state_dict(),  # the smoothed loss at this checkpoint, and its best
            "sane": not self._divergence.rising,
        }

    def _parameters_finite(self) -> bool:
        norms = torch._foreach_norm([p.detach() for p in self.model.parameters()])
        return bool(torch.isfinite(torch.stack(norms)).all())

    def save_final(self) -> Path | None:
        """Write `<out>/final/`: the weights and vocabulary in the standard layout, and the task's final files."""
        if not self.is_main:
            return None

        def write_files(folder: Path) -> None:
            self.task.write_model_files(folder)
            self.task.write_final_files(folder)

        with self._lock:
            took = self._claim.take()
            self.writing = "the final weights"
            try:
                return self.run_folder.write_final(write_files)
            finally:
                self.writing = None
                if took:
                    self._claim.give_back()

    def _restart_advice(self) -> str:
        """Where to go back to after a NaN or a divergence, and what to change."""
        checkpoint = self.last_good_checkpoint
        where = (f"The last checkpoint written while the loss was sane is {checkpoint}; " if checkpoint
                 else "No checkpoint of this run is known to be sane; ")
        change = learning_rate_advice(self.config.lr, pretraining=self.task.pretrains)
        return where + change + (", and resume from it" if checkpoint else ", and start again")
