"""Watch a training run folder: tail its growing `metrics.jsonl`, list its checkpoints.

Qt-free, so the same code serves the run watcher's poll timer and a test. The writer (`bert-train` here or on
another machine, or the app's own worker) appends one JSON object per line; a reader can see a file
mid-write, so only complete lines (ending in a newline) are parsed and the partial tail is kept until
the rest arrives. A file that shrinks or is replaced (a new run in the same folder, log rotation) is read
again from the start and the caller is told, so it can clear what it drew.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bertcore.trainer import EvalStats, StepStats

METRICS_FILE = "metrics.jsonl"
RUN_CONFIG_FILE = "run_config.json"
CHECKPOINTS_DIR = "checkpoints"


@dataclass(frozen=True)
class TailUpdate:
    """What one poll of a metrics file found."""

    records: list[dict] = field(default_factory=list)  # new complete records, in file order
    restarted: bool = False  # the file shrank or was replaced: records start from its beginning again
    bad_lines: int = 0  # complete lines in this poll that were not a JSON object (skipped)


class MetricsTail:
    """Incremental reader of one `metrics.jsonl`; each `poll()` returns only what was appended since."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._offset = 0  # bytes consumed, including a held-back partial line
        self._partial = b""  # bytes of an incomplete last line, waiting for its newline
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file we are reading
        self.records_read = 0
        self.bad_lines = 0

    def reset(self) -> None:
        """Forget the position; the next poll reads the whole file again."""
        self._offset = 0
        self._partial = b""
        self._identity = None
        self.records_read = 0
        self.bad_lines = 0

    def poll(self, max_bytes: int = 64 * 1024 * 1024) -> TailUpdate:
        """Read what was appended since the last poll (at most `max_bytes` of it; the rest next time)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return TailUpdate()
        identity = (stat.st_dev, stat.st_ino)
        restarted = False
        if self._identity is not None and (identity != self._identity or stat.st_size < self._offset):
            # Replaced or truncated: whatever we held belongs to the old file.
            self.reset()
            restarted = True
        self._identity = identity
        if stat.st_size == self._offset:
            return TailUpdate(restarted=restarted)
        with open(self.path, "rb") as file:
            file.seek(self._offset)
            chunk = file.read(max_bytes)
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended on a newline
        records, bad = [], 0
        for line in lines:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except (UnicodeDecodeError, ValueError):
                bad += 1
                continue
            if isinstance(record, dict):
                records.append(record)
            else:
                bad += 1
        self.records_read += len(records)
        self.bad_lines += bad
        return TailUpdate(records=records, restarted=restarted, bad_lines=bad)

    def read_new(self) -> list[dict]:
        """The records appended since the last call (restarts are not reported; use `poll` for that)."""
        return self.poll().records


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


def read_run_config(run_dir: str | os.PathLike) -> dict:
    """The run's `run_config.json` as a dict; ValueError naming the file when it is unreadable."""
    path = Path(run_dir) / RUN_CONFIG_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(
            f"{path} does not exist; open the folder that `bert-train --out` wrote (it holds "
            f"{RUN_CONFIG_FILE} and {METRICS_FILE})"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} cannot be read as JSON ({error}); is the run folder damaged?") from None


def looks_like_run_dir(path: str | os.PathLike) -> bool:
    """A folder with a metrics file or a run config, i.e. something `bert-train` wrote."""
    folder = Path(path)
    return folder.is_dir() and ((folder / METRICS_FILE).exists() or (folder / RUN_CONFIG_FILE).exists())


_STEP_IN_NAME = re.compile(r"(\d+)")


def list_checkpoints(run_dir: str | os.PathLike) -> list[tuple[int | None, Path]]:
    """Complete checkpoints under `<run>/checkpoints/` as (step or None, folder), oldest step first.

    A checkpoint is a folder holding `config.json` and model weights; folders still being written
    (no weights yet, or a temporary name) are left out.
    """
    root = Path(run_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    found = []
    for folder in root.iterdir():
        if not folder.is_dir() or folder.name.startswith(".") or folder.name.endswith((".tmp", ".partial")):
            continue
        if not (folder / "config.json").exists():
            continue
        if not ((folder / "model.safetensors").exists() or (folder / "pytorch_model.bin").exists()):
            continue
        numbers = _STEP_IN_NAME.findall(folder.name)
        step = int(numbers[-1]) if numbers else None
        found.append((step, folder))
    # Named checkpoints ("final", "latest") sort after numbered ones.
    found.sort(key=lambda item: (item[0] is None, item[0] or 0, item[1].name))
    return found


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint folder of a run, or None."""
    checkpoints = list_checkpoints(run_dir)
    if not checkpoints:
        return None
    # Prefer a folder by modification time: "final"/"latest" and the highest step are usually the same.
    return max(checkpoints, key=lambda item: (item[1].stat().st_mtime, item[0] or 0))[1]


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
    extra = {}
    warning = record.get("warning")
    if isinstance(warning, str) and warning and "warning" in {field.name for field in dataclasses.fields(StepStats)}:
        extra["warning"] = warning  # the engine's "the loss rises far above its start" note, when it has one
    return StepStats(step=int(step), total_steps=total if isinstance(total, int) else 0,
                     **{key: number(key) for key in _STEP_FIELDS},
                     tokens=tokens if isinstance(tokens, int) else 0, elapsed_seconds=number("elapsed"), **extra)


SUMMARY_FILE = "summary.json"
FINAL_DIR = "final"


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
    from bertcore.trainer import TrainingError, find_checkpoint

    folder = Path(run_dir)
    config = read_run_config(folder)  # ValueError: not a run folder
    try:
        checkpoint = find_checkpoint(folder)
    except (TrainingError, OSError) as error:
        raise ValueError(f"{folder} holds no checkpoint to resume from ({error})") from None
    numbers = _STEP_IN_NAME.findall(checkpoint.name)
    step = int(numbers[-1]) if numbers else 0
    training = config.get("training") if isinstance(config.get("training"), dict) else {}
    total = training.get("steps") if isinstance(training.get("steps"), int) else None
    if total is not None and step >= total:
        raise ValueError(f"the run in {folder} finished all its {total:,} steps; there is nothing to resume "
                         "(start a new run, or continue its final weights with \"continue the loaded model\")")
    return ResumePoint(folder, checkpoint, step, total)


def read_curve(run_dir: str | os.PathLike, up_to_step: int | None = None) -> list:
    """Every statistics record of a run's metrics file (as `stats_from_record` reads them), up to a step."""
    records = MetricsTail(Path(run_dir) / METRICS_FILE).poll().records
    stats = [converted for converted in map(stats_from_record, records) if converted is not None]
    return stats if up_to_step is None else [record for record in stats if record.step <= up_to_step]


def run_has_ended(run_dir: str | os.PathLike, last_step: int | None) -> bool:
    """True when a run folder says its run is over: a `summary.json` (written when a run finishes or stops)
    at or past the last step its metrics show."""
    path = Path(run_dir) / SUMMARY_FILE
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    step = summary.get("step") if isinstance(summary, dict) else None
    return isinstance(step, int) and (last_step is None or step >= last_step)
