"""The exceptions a caller of bertcore may want to catch, in one module that imports nothing heavy.

Catching them never imports torch (the app's GUI thread names them in its handlers); the modules that raise
them re-export them under their old homes (`bertcore.training.pretraining.TrainingError`, `bertcore.models.checkpoint.
CheckpointError`). Every message names the thing, the value and the fix, so a consumer can show it as it is.

    ValueError
      CheckpointError              a checkpoint folder that is missing, corrupt or does not fit its config
        CheckpointSaveError        `save_pretrained` could not write the folder (disk full, read-only, permissions)
        CacheEntryError            a repo in the Hugging Face cache that cannot be opened as it is (a ref that is no
                                   commit hash, no snapshot, no config.json, unreadable); `reason` says why in words
        HubAnswerError             the Hub endpoint answered what a Hub never sends (a name that would lead out of
                                   the cache, an HTML page, a body that does not match its hash); nothing was kept
    RuntimeError
      TrainingError                a training run that cannot go on
        NonFiniteLossError         the loss or gradient norm became NaN/inf (no update applied)
        DivergenceError            the smoothed loss stayed far above its best value (finite, but exploding)
        OutOfMemoryTrainingError   the device ran out of memory
        RunFolderError             the run folder cannot be used as asked (pointer leading outside it, corrupt
                                   trainer state, changed by another run, a link or a folder where one of its
                                   files belongs, no sane checkpoint to resume)
          RunFolderBusyError       another process (or another open Trainer) is training in it
          RunFolderWriteError      a file of it could not be written (disk full, read-only, permissions)
            CheckpointWriteError   a checkpoint could not be written; the previous one is still the latest
        ReportToError              a tool named by report_to cannot be written to (its package is not installed)

      TokenizerError               bad input to the tokenizer, or a broken vocabulary file
      CorpusError                  a pretraining corpus that cannot be used (missing, not UTF-8, empty, too small)
        PreparedCorpusDamaged      a prepared corpus in the cache that is not whole (no meta.json, a file of the
                                   wrong size, a checksum that does not match, or none: an earlier version's):
                                   prepare_corpus replaces it
      TaskDataError                fine-tuning data that cannot be used (names the file, the line or record)
      ExplainError                 an explanation asked for something the model or input does not have (a target
                                   position past the input, an NSP target on a model without an NSP head)
      LinguisticDataError          a CoNLL-U treebank or a BLiMP file of minimal pairs that cannot be read (names
                                   the file, the line and what is wrong with it)
      AnalysisError                a measurement the model or its input cannot give (a pseudo-log-likelihood from a
                                   model without a masked-LM head, a probe with no word to train on)
    Exception
      DownloadCancelled            the user stopped a model download; nothing of it is left in the cache
"""

from __future__ import annotations

from pathlib import Path


class CheckpointError(ValueError):
    """A checkpoint folder that is missing, incomplete, corrupt or does not fit its config."""


class CheckpointSaveError(CheckpointError):
    """`save_pretrained` could not write the folder (disk full, read-only, permissions; whatever the writing
    library raised). Nothing half-written was left, and a previous folder of that name is intact; `errno` says
    why when it is known (e.g. errno.ENOSPC: disk full)."""

    def __init__(self, message: str, path: Path, errno: int | None):
        super().__init__(message)
        self.path = path
        self.errno = errno


class CacheEntryError(CheckpointError):
    """A repo in the Hugging Face cache that cannot be opened as it is. The message says what is wrong and what to
    do; `reason` says it in a few words for a list ("refs/main names no snapshot", "no config.json"), and `path`
    is the file or folder at fault."""

    def __init__(self, message: str, reason: str, path: Path):
        super().__init__(message)
        self.reason = reason
        self.path = path


class HubAnswerError(CheckpointError):
    """The Hub endpoint (HF_ENDPOINT: the Hub, a mirror, or whatever answers in between) answered what a Hugging
    Face Hub never sends: a file or commit name that would lead out of the cache, a listing that is not JSON, a
    redirect loop, a body whose size or hash is not the one announced. Nothing of what it sent was kept."""


class DownloadCancelled(Exception):  # a user's choice, not a failure: no CheckpointError handler may swallow it
    """The user stopped a model download (bertcore.models.hub_download.download_model's `cancel`). None of its
    files are left in the cache's snapshot and no ref points to it: the model is as it was before, or absent."""

    def __init__(self, message: str, repo_id: str):
        super().__init__(message)
        self.repo_id = repo_id


class TokenizerError(ValueError):
    """Bad input to the tokenizer: an empty sentence, a broken vocabulary file, an impossible length."""


class CorpusError(ValueError):
    """A corpus that cannot be used: missing, not UTF-8, empty, or too small; the message names the file."""


class PreparedCorpusDamaged(CorpusError):
    """A prepared corpus folder that is not what its preparation wrote (a file missing, cut, changed after it was
    written); `reason` says what, `folder` where. bertcore.data.prepare.prepare_corpus replaces such a folder."""

    def __init__(self, message: str, folder: Path, reason: str):
        super().__init__(message)
        self.folder = folder
        self.reason = reason


class TaskDataError(ValueError):
    """Fine-tuning data that cannot be used; the message names the file, the line or record, and the fix."""


class ExplainError(ValueError):
    """An attribution, mixing or patching request the model or the input cannot answer: a target its heads do not
    have, a position or token id out of range, an unknown method; the message names the value and the fix."""


class LinguisticDataError(ValueError):
    """A CoNLL-U treebank (bertcore.analysis.treebank) or a BLiMP file of minimal pairs (bertcore.analysis.likelihood)
    that cannot be read; the message names the file, the line and what is wrong with it. `path` and `line` (1-based;
    None for the file as a whole) say where."""

    def __init__(self, message: str, path: Path | None = None, line: int | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


class AnalysisError(ValueError):
    """A measurement of bertcore.analysis that the model or its input cannot give: a pseudo-log-likelihood from a
    model without a trained masked-LM head (ELECTRA's discriminator, a bare encoder, a classifier), a probe without
    words to train on, a task it does not know; the message names the value and the fix."""


class TrainingError(RuntimeError):
    """A training run that cannot go on; the message says why and what to change."""


class NonFiniteLossError(TrainingError):
    """The loss (or gradient norm) became NaN or infinite; no update was applied for that step.

    `last_checkpoint` is the newest checkpoint written while the loss was still sane (or None)."""

    def __init__(self, message: str, step: int, last_checkpoint: Path | None):
        super().__init__(message)
        self.step = step
        self.last_checkpoint = last_checkpoint


class DivergenceError(TrainingError):
    """The smoothed loss stayed `divergence_factor` times above its best value for `divergence_patience` steps.

    The loss is still finite but exploding (a learning rate far too high); no update was applied for `step`.
    `last_checkpoint` is the newest checkpoint written while the loss was still sane (or None)."""

    def __init__(self, message: str, step: int, smoothed_loss: float, best_loss: float, best_step: int,
                 last_checkpoint: Path | None):
        super().__init__(message)
        self.step = step
        self.smoothed_loss = smoothed_loss
        self.best_loss = best_loss
        self.best_step = best_step
        self.last_checkpoint = last_checkpoint


class OutOfMemoryTrainingError(TrainingError):
    """The device ran out of memory; use a smaller batch or sequence length."""


class RunFolderError(TrainingError):
    """A run folder that cannot be used as asked."""


class RunFolderBusyError(RunFolderError):
    """Another process, or another open Trainer in this one, holds the run folder's lock."""

    def __init__(self, message: str, folder: Path, pid: int | None):
        super().__init__(message)
        self.folder = folder
        self.pid = pid  # the holder's process id as its lock file says (None when unreadable)


class RunFolderWriteError(RunFolderError):
    """A file of the run folder could not be written; `errno` says why (e.g. errno.ENOSPC: disk full)."""

    def __init__(self, message: str, path: Path, errno: int | None):
        super().__init__(message)
        self.path = path
        self.errno = errno


class CheckpointWriteError(RunFolderWriteError):
    """A checkpoint (or the final weights) could not be written. Nothing half-written is left behind and the
    previous checkpoint is still the latest and intact; free space (or fix permissions) and resume."""


class ReportToError(TrainingError):
    """A tool the run's `report_to` names cannot be written to here (its package is not installed); the message
    says what to install."""
