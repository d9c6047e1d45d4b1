"""A training run folder as the app sees it: its statistics, where it would resume, whether it has ended.

The layout of a run folder and the Qt-free reading of it live in `bertcore.files.file_names` and
`bertcore.files.run_folder` (their one home, shared with the trainers that write it). What is here is the app's
view of a run: metrics records (including files written by other programs, with their many spellings of a
statistic) as the trainer's own `StepStats` / `EvalStats`, where a run would resume, and whether it has ended.
A fine-tuning run's records (`bert-finetune`, the Fine-tune tab) are read as
`bertcore.training.finetuning.TaskStepStats` / `TaskEvalStats` instead (`record_reader`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertcore.files.file_names import checkpoint_step
from bertcore.files.run_folder import RunFolder, list_checkpoints

if TYPE_CHECKING:
    from bertcore.training.pretraining import EvalStats, StepStats

__all__ = ["ResumePoint", "can_resume", "is_eval_record", "is_finetuning_run", "normalize_record", "read_curve",
           "record_reader", "resume_point", "run_has_ended", "stats_from_record"]


def is_eval_record(record: dict) -> bool:
    """True for a held-out evaluation record, False for a training-step record.

    The engine marks eval records with `"kind": "eval"` (also accepted: `"split"`/`"type"`/`"event"` set
    to "eval"/"held_out", or `"eval": true`); records that carry only `eval_*` statistics count as eval.
    """
    for key in ("kind", "split", "type", "event"):
        value = record.get(key)
        if isinstance(value, str) and value.lower() in ("eval", "evaluation", "held_out", "heldout", "val"):
            return True
    if record.get("eval") is True or record.get("is_eval") is True:
        return True
    has_eval_keys = any(key.startswith(("eval_", "heldout_", "held_out_")) for key in record)
    has_train_loss = any(key in record for key in ("loss", "mlm_loss", "nsp_loss", "total_loss"))
    return has_eval_keys and not has_train_loss


# Canonical statistic names the plots read, and the spellings a metrics writer may use for each.
_ALIASES = {
    "step": ("step", "global_step", "iteration"),
    "loss": ("loss", "total_loss", "train_loss"),
    "mlm_loss": ("mlm_loss", "masked_lm_loss"),
    "nsp_loss": ("nsp_loss", "next_sentence_loss"),
    "mlm_accuracy": ("mlm_accuracy", "mlm_acc", "masked_lm_accuracy"),
    "nsp_accuracy": ("nsp_accuracy", "nsp_acc", "next_sentence_accuracy"),
    "learning_rate": ("learning_rate", "lr"),
    "grad_norm": ("grad_norm", "gradient_norm"),
    "tokens_per_second": ("tokens_per_second", "tokens_per_sec", "tok_per_s"),
    "elapsed": ("elapsed", "elapsed_seconds", "elapsed_s", "time"),
    "total_steps": ("total_steps", "max_steps", "num_steps", "steps"),
}
_EVAL_PREFIXES = ("eval_", "heldout_", "held_out_", "val_")


def normalize_record(record: dict) -> dict:
    """`record` with the canonical names above filled in, and `"eval": bool` set.

    Eval records may spell their statistics with a prefix (`eval_loss`) or plainly (`loss` in a record
    marked `"kind": "eval"`); both come out under the plain names.
    """
    evaluation = is_eval_record(record)
    plain = {}
    for key, value in record.items():
        if evaluation:
            for prefix in _EVAL_PREFIXES:
                if key.startswith(prefix):
                    key = key[len(prefix) :]
                    break
        plain.setdefault(key, value)
    normalized = dict(plain)
    for canonical, spellings in _ALIASES.items():
        for spelling in spellings:
            value = plain.get(spelling)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                normalized[canonical] = value
                break
    normalized["eval"] = evaluation
    return normalized


_STEP_FIELDS = ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy", "learning_rate", "grad_norm",
                "tokens_per_second")
_EVAL_FIELDS = ("loss", "mlm_loss", "nsp_loss", "mlm_accuracy", "nsp_accuracy")


def stats_from_record(record: dict) -> StepStats | EvalStats | None:
    """A metrics-file record as the trainer's own `StepStats` / `EvalStats`, the one shape the app's plots and
    progress read; None for what is not a statistics record (checkpoint and error markers, no step).

    Any spelling `normalize_record` knows is accepted (files written by other programs); a statistic the
    record lacks becomes NaN (plots skip it), a missing total of steps 0 (unknown).
    """
    from bertcore.training.pretraining import (  # the app has torch loaded already; a reader need not
        EvalStats,
        StepStats,
    )

    if record.get("kind") not in (None, "step", "eval"):
        return None
    record = normalize_record(record)
    step = record.get("step")
    if not isinstance(step, (int, float)) or isinstance(step, bool):
        return None

    def number(key: str) -> float:
        value = record.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan

    if record["eval"]:
        examples = record.get("num_examples")
        return EvalStats(step=int(step), **{key: number(key) for key in _EVAL_FIELDS},
                         num_examples=examples if isinstance(examples, int) else 0)
    total, tokens = record.get("total_steps"), record.get("tokens")
    warning = record.get("warning")  # the engine's "the loss rises far above its start" note, when it has one
    return StepStats(step=int(step), total_steps=total if isinstance(total, int) else 0,
                     **{key: number(key) for key in _STEP_FIELDS},
                     tokens=tokens if isinstance(tokens, int) else 0, elapsed_seconds=number("elapsed"),
                     warning=warning if isinstance(warning, str) and warning else None)


@dataclass(frozen=True)
class ResumePoint:
    """Where a run folder would continue: its latest checkpoint and that checkpoint's step."""

    run_dir: Path
    checkpoint: Path
    step: int
    total_steps: int | None  # what its configuration plans, when it says


def resume_point(run_dir: str | os.PathLike) -> ResumePoint:
    """The checkpoint `bert-train --out RUN --resume` would continue from; ValueError saying why there is
    none (not a run folder, no checkpoint yet, every planned step done)."""
    from bertcore.errors import TrainingError

    folder = RunFolder(run_dir)
    config = folder.read_run_config()  # ValueError: not a run folder
    try:
        checkpoint = folder.checkpoint_to_resume()
    except (TrainingError, OSError) as error:
        raise ValueError(f"{folder.path} holds no checkpoint to resume from ({error})") from None
    step = checkpoint_step(checkpoint.name) or 0
    training = config.get("training") if isinstance(config.get("training"), dict) else {}
    total = training.get("steps") if isinstance(training.get("steps"), int) else None
    if total is not None and step >= total:
        raise ValueError(f"the run in {folder.path} finished all its {total:,} steps; there is nothing to resume "
                         "(start a new run, or continue its final weights with \"continue the loaded model\")")
    return ResumePoint(folder.path, checkpoint, step, total)


def can_resume(run_dir: str | os.PathLike | None, ended_as: str | None) -> bool:
    """Whether Resume can continue the run shown: it ended `ended_as` "stopped" or "failed" (not finished, and
    not still going, here or in another process) and it has a checkpoint."""
    return run_dir is not None and ended_as in ("stopped", "failed") and bool(list_checkpoints(run_dir))


def is_finetuning_run(run_config: dict) -> bool:
    """Whether a run_config.json is a fine-tuning run's: its "training" names a task (bert-train's does not)."""
    training = run_config.get("training") if isinstance(run_config, dict) else None
    return isinstance(training, dict) and bool(training.get("task"))


def record_reader(run_config: dict) -> Callable[[dict], Any]:
    """How to read a run's metrics records: `task_stats_from_record` for a fine-tuning run, else
    `stats_from_record` (pretraining, and files written by other programs); a pretraining run of another objective
    than mlm+nsp (run_config.json's "objective": mlm, mlm+sop, rtd) by `objective_stats_from_record`."""
    if is_finetuning_run(run_config):
        from bertcore.training.finetuning import task_stats_from_record

        return task_stats_from_record
    if isinstance(run_config, dict) and run_config.get("objective") not in (None, "mlm+nsp"):
        from bertcore.training.pretraining import objective_stats_from_record

        return objective_stats_from_record
    return stats_from_record


def read_curve(run_dir: str | os.PathLike, up_to_step: int | None = None) -> list:
    """Every statistics record of a run's metrics file (as `record_reader` reads them), up to a step; ValueError
    naming the metrics file when it is not a regular file (a FIFO, a folder) or cannot be read."""
    from bertcore.errors import RunFolderError

    folder = RunFolder(run_dir)
    try:
        reader = record_reader(folder.read_run_config())
    except (OSError, ValueError):
        reader = stats_from_record
    try:
        records = folder.metrics_tail().poll().records
    except RunFolderError as error:
        raise ValueError(str(error)) from None
    stats = [converted for converted in map(reader, records) if converted is not None]
    return stats if up_to_step is None else [record for record in stats if record.step <= up_to_step]


def run_has_ended(run_dir: str | os.PathLike, last_step: int | None) -> bool:
    """True when a run folder says its run is over: a `summary.json` (written when a run finishes or stops)
    at or past the last step its metrics show."""
    try:
        summary = RunFolder(run_dir).read_summary()
    except (OSError, ValueError):
        return False
    step = summary.get("step") if isinstance(summary, dict) else None
    return isinstance(step, int) and (last_step is None or step >= last_step)
