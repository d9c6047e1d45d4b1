"""The seam between the shared training loop and what it trains: a `TrainingTask` says what a model, a batch,
a step's statistics and an evaluation are; `bertcore.training.loop.TrainingLoop` does everything else.

Two tasks exist: `bertcore.training.pretraining.PretrainingTask` (its objectives: bertcore.training.objectives) and
`bertcore.training.finetuning.FinetuningTask` (sequence classification, token classification, extractive QA).
Below the seam, how a task's step statistics become metrics.jsonl records and back (`step_record`,
`metric_numbers`), for the records that carry their metrics by name.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
from torch import nn

from bertcore.files.run_folder import RunFolder


class LoopPlace(Protocol):
    """Where a task is trained, as `setup` may ask of the `TrainingLoop` (which satisfies this)."""

    rank: int  # this process's rank; 0 writes the run folder
    world_size: int  # processes training together (DDP); 1 without torchrun
    is_main: bool  # rank 0
    run_folder: RunFolder


class TrainingTask(ABC):
    """What a `TrainingLoop` trains. The loop calls `setup` once, then per step `train_batch` -> forward ->
    `batch_sums` -> (summed over processes) -> `loss_of` and `step_stats`; `evaluate` every eval_every steps.

    `setup` sets the attributes below; the loop moves `model` to its device and trains it in place."""

    config: Any  # the run's settings (TrainingConfig, FinetuneConfig); setup may resolve some (steps from epochs)
    model: nn.Module  # a BertPreTrainedModel: its forward takes the batch's model_inputs() and returns .loss
    tokenizer: Any  # bertcore.tokenization.wordpiece.BertTokenizer, saved with every checkpoint
    total_steps: int  # optimisation steps of the whole run
    warmup_steps: int  # linear warm-up steps, then linear decay to 0 at total_steps
    metric_names: tuple[str, ...] = ()  # the task's metrics in its evaluation records (e.g. "accuracy")
    command: str = "the trainer"  # the command line that runs it, for advice in error messages
    smaller_model_hint: str = ""  # appended to the out-of-memory advice
    pretrains: bool = False  # a pretraining objective: learning-rate advice uses pretraining's usual range
    # Worker processes that make the coming batches while the device computes (bertcore.training.batches_ahead),
    # per device type; none unless a measurement of the task's loop shows a gain. Never on the CPU, where they
    # would take cores from the step.
    batch_workers: ClassVar[dict[str, int]] = {}

    @abstractmethod
    def setup(self, loop: LoopPlace, resume_from: Path | None) -> None:
        """Build or load the model (from `resume_from`, a checkpoint of this run, when resuming) and the data.
        May use loop.rank / world_size / is_main / run_folder (e.g. rank 0 writes a vocabulary)."""

    @abstractmethod
    def train_batch(self, step: int, batch_size: int, rank: int, world_size: int):
        """The CPU batch of 1-based `step` on `rank`, a pure function of (seed, step, rank): `.to(device)`,
        `.model_inputs()` (keyword arguments of the model's forward) and `.num_tokens` (real tokens)."""

    @abstractmethod
    def batch_sums(self, output, batch) -> torch.Tensor:
        """1-D float tensor of numbers that add up over batches and processes (e.g. loss × count, count,
        correct), from the forward pass `output` on `batch`."""

    @abstractmethod
    def loss_of(self, sums: list[float]) -> float:
        """The step's loss from its summed `batch_sums`."""

    @abstractmethod
    def step_stats(self, sums: list[float], **common: Any):
        """The frozen step record: `common` holds step, total_steps, loss, learning_rate, grad_norm, tokens,
        tokens_per_second, elapsed_seconds and warning; the task adds its own numbers from `sums`. A dataclass
        with `eval` and `checkpoint` fields (the loop fills them in with dataclasses.replace) and `to_dict()`
        (its metrics.jsonl record, "kind": "step")."""

    @abstractmethod
    def evaluate(self, forward: Callable[[Any], Any], step: int):
        """The evaluation record at `step` (with `.step` and `.to_dict()`), or None without held-out data.
        `forward(batch)` moves a CPU batch to the device and runs the model on it in eval mode without gradients
        (autocast as in training); it returns (output, the moved batch)."""

    def run_config(self) -> dict[str, Any]:
        """Fields of run_config.json besides "training" (e.g. "model": the model's config.json fields)."""
        return {"model": self.model.config.to_dict()}

    @property
    def published_model(self) -> nn.Module:
        """The model a checkpoint or final/ holds as its weights, and the one snapshots copy for probing: `model`
        itself, unless the task trains more than it publishes (ELECTRA's generator beside its discriminator)."""
        return self.model

    def write_model_files(self, folder: Path) -> None:
        """The weights and vocabulary in the standard layout into a checkpoint's or final/'s staging folder; a task
        that trains more than it publishes writes the rest beside them (and reads it back in `setup`)."""
        from bertcore.models.checkpoint import write_pretrained_files

        write_pretrained_files(self.model, self.tokenizer, folder)

    def write_final_files(self, folder: Path) -> None:
        """Files beside the weights in final/ (staging folder), e.g. the final evaluation's predictions."""
        return None

    def summary(self) -> dict[str, Any]:
        """Fields of summary.json besides the loop's own."""
        return {}


# ---- a step's statistics as a metrics.jsonl record and back, for the statistics that carry their metrics by
# name (a fine-tuning task's, a pretraining objective's other than mlm+nsp): one flat JSON object per record

def step_record(stats: Any) -> dict[str, Any]:
    """A step dataclass with a `metrics` mapping as a flat "step" record: its fields, then its metrics by name; its
    evaluation, checkpoint, warning and analysis are records of their own."""
    values = {"kind": "step", **dataclasses.asdict(stats)}
    for name in ("metrics", "eval", "checkpoint", "warning"):
        del values[name]
    values.pop("analysis", None)  # a record of its own too, where the statistics carry one
    return {**values, **stats.metrics}


def metric_numbers(record: Mapping[str, Any], leave_out: set[str]) -> dict[str, float]:
    """The record's numbers outside `leave_out` (a record's fixed fields): its metrics by name."""
    return {key: float(value) for key, value in record.items()
            if key not in leave_out and isinstance(value, int | float) and not isinstance(value, bool)}
