"""Watch a training run folder: tail its growing `metrics.jsonl`, list its checkpoints.

The Qt-free reading of a run folder lives in `bertcore.run_folder` (its one home, shared with the trainers
that write it) and is re-exported here for the app. What stays here is only for metrics files written by
other programs: recognising eval records and normalising the many spellings of a statistic.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from bertcore.run_folder import (  # re-exported: the app's names for the run-folder reader
    CHECKPOINTS_DIR,
    METRICS_FILE,
    RUN_CONFIG_FILE,
    MetricsTail,
    TailUpdate,
    latest_checkpoint,
    list_checkpoints,
    looks_like_run_dir,
    read_run_config,
)

if TYPE_CHECKING:
    from bertcore.trainer import EvalStats, StepStats

__all__ = [
    "CHECKPOINTS_DIR", "METRICS_FILE", "RUN_CONFIG_FILE", "MetricsTail", "TailUpdate", "is_eval_record",
    "latest_checkpoint", "list_checkpoints", "looks_like_run_dir", "normalize_record", "read_run_config",
    "stats_from_record",
]


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
    from bertcore.trainer import EvalStats, StepStats  # the app has torch loaded already; a reader need not

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
    return StepStats(step=int(step), total_steps=total if isinstance(total, int) else 0,
                     **{key: number(key) for key in _STEP_FIELDS},
                     tokens=tokens if isinstance(tokens, int) else 0, elapsed_seconds=number("elapsed"))
