"""Where a run's numbers go besides metrics.jsonl: the tools `report_to` names (bertcore.training.settings), as the
Hugging Face Trainer's `report_to` does. Today "tensorboard": TensorBoard event files beside metrics.jsonl, written
through torch's `SummaryWriter` (the `tensorboard` extra: pip install -e '.[tensorboard]'), so `tensorboard --logdir
runs/` shows bert-train and bert-finetune runs beside a Trainer's.

The loop writes every record to metrics.jsonl through one object; `with_reporters` hands it back wrapped, so each
record written there reaches the reporters too, and closing it (at every end of a run: finished, stopped, Ctrl-C, an
error) closes them. A reporter sees what metrics.jsonl holds and writes the same numbers:

    a "step" record's curves   train/<name>: train/loss, train/learning_rate, train/grad_norm, train/mlm_loss, …
                               (not its step, total_steps, tokens or elapsed_seconds: its place and its progress)
    the tokens seen so far     train/num_input_tokens_seen (its step records' tokens summed)
    an "eval" record's numbers eval/<name>: eval/loss, eval/mlm_accuracy, eval/accuracy, … (not num_examples)

The tag names are the Trainer's own (transformers' TensorBoardCallback writes its logs through `rewrite_logs`:
"eval_loss" as eval/loss, any other key k as train/k), so a bert-train run and a Trainer run of the same metric fall on
one TensorBoard chart. Each value is written at the record's step, all of a record's at one wall time, and flushed
with the record, as metrics.jsonl is.

A run's writer starts a session at the first step it writes (SummaryWriter(purge_step=...)): a resumed run's events
then make TensorBoard drop (and the Runs tab's reader, explorer.runs.curve_files) what the earlier writer wrote from
that step on, the steps metrics.jsonl dropped when the run resumed, instead of showing them twice; a new run in a
folder that held another run's events hides those.

Torch-free at import (the settings check `report_to` without it): the writer is imported when a run opens it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import time
from pathlib import Path
from typing import Any, Protocol

from bertcore.errors import ReportToError, RunFolderError
from bertcore.files.atomic import run_write_error
from bertcore.files.metrics_log import MetricsLog
from bertcore.files.reading import open_regular_file

TENSORBOARD = "tensorboard"
STEP_FIELDS_NOT_SCALARS = frozenset({"kind", "step", "total_steps", "tokens", "elapsed_seconds"})
EVAL_FIELDS_NOT_SCALARS = frozenset({"kind", "step", "num_examples", "main_metric"})
TOKENS_SEEN_TAG = "train/num_input_tokens_seen"


def check_report_to(report_to: str) -> None:
    """ReportToError when a tool `report_to` names cannot be written to here (its package is missing): said before
    a run spends its setup, not after."""
    if report_to == TENSORBOARD and importlib.util.find_spec("tensorboard") is None:
        raise ReportToError("--report-to tensorboard writes TensorBoard event files through torch's SummaryWriter, "
                            "which needs the tensorboard package: pip install -e '.[tensorboard]' (or pip install "
                            "tensorboard), or leave out --report-to")


class ScalarReporter(Protocol):
    """Somewhere a run's records go besides metrics.jsonl."""

    def report(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def scalars_of(record: dict[str, Any]) -> dict[str, float]:
    """A metrics.jsonl record's numbers under the Trainer's TensorBoard tags (see the module docstring); {} for a
    record that holds none (checkpoint, warning, error)."""
    kind = record.get("kind")
    if kind == "step":
        prefix, left_out = "train/", STEP_FIELDS_NOT_SCALARS
    elif kind == "eval":
        prefix, left_out = "eval/", EVAL_FIELDS_NOT_SCALARS
    else:
        return {}
    return {prefix + name: float(value) for name, value in record.items()
            if name not in left_out and isinstance(value, int | float) and not isinstance(value, bool)}


class TensorBoardReporter:
    """A run's scalars as TensorBoard events in `folder` (see the module docstring); `first_step` is the step the
    run goes on from (1 for a new run), where the writer's session starts; `tokens_before` the tokens seen by then."""

    def __init__(self, folder: str | Path, *, first_step: int, tokens_before: float = 0.0):
        check_report_to(TENSORBOARD)
        from torch.utils.tensorboard import SummaryWriter

        self.folder = Path(folder)
        with run_write_error(self.folder, "the TensorBoard event file"):
            self._writer = SummaryWriter(log_dir=str(self.folder), purge_step=first_step)
        self._tokens_seen = tokens_before

    def report(self, record: dict[str, Any]) -> None:
        scalars = scalars_of(record)
        if not scalars:
            return
        step = int(record["step"])
        if record.get("kind") == "step" and isinstance(record.get("tokens"), int | float):
            self._tokens_seen += record["tokens"]
            scalars[TOKENS_SEEN_TAG] = float(self._tokens_seen)
        now = time.time()
        for tag, value in scalars.items():
            self._writer.add_scalar(tag, value, step, walltime=now)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class ReportedMetrics:
    """metrics.jsonl's writer (a `MetricsLog`) whose records reach the reporters too; closing it closes them all."""

    def __init__(self, metrics: MetricsLog, reporters: list[ScalarReporter]):
        self.metrics = metrics
        self.reporters = reporters
        self.path = metrics.path

    def write(self, record: dict[str, Any]) -> None:
        self.metrics.write(record)
        for reporter in self.reporters:
            reporter.report(record)

    def close(self) -> None:
        try:
            self.metrics.close()
        finally:
            for reporter in self.reporters:
                reporter.close()


def with_reporters(metrics: MetricsLog, report_to: str, folder: str | Path, *,
                   first_step: int) -> MetricsLog | ReportedMetrics:
    """`metrics` as it is (report_to "none"), or wrapped so its records reach the tools `report_to` names; the run
    goes on from `first_step` (1 for a new run)."""
    if report_to != TENSORBOARD:
        return metrics
    tokens_before = tokens_seen_before(metrics.path, first_step) if first_step > 1 else 0.0
    try:
        return ReportedMetrics(metrics, [TensorBoardReporter(folder, first_step=first_step,
                                                             tokens_before=tokens_before)])
    except BaseException:
        metrics.close()
        raise


def tokens_seen_before(metrics_path: Path, step: int) -> float:
    """The tokens of the step records before `step` in a run's metrics.jsonl (where a resumed run's count goes on)."""
    total = 0.0
    try:
        with open_regular_file(metrics_path, error=RunFolderError, label="the metrics file") as file:
            for line in file:
                if b'"step"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if (isinstance(record, dict) and record.get("kind") == "step" and isinstance(record.get("step"), int)
                        and record["step"] < step and isinstance(record.get("tokens"), int | float)
                        and math.isfinite(record["tokens"])):
                    total += record["tokens"]
    except FileNotFoundError:
        pass
    return total
