"""Fine-tuning: the `FinetuningTask` of the shared training loop, and `Finetuner`, the loop running it.

    from bertcore.training.settings import FinetuneConfig
    from bertcore.training.finetuning import Finetuner

    config = FinetuneConfig.for_demo("mood", out_dir="runs/mood")       # or FinetuneConfig(task=..., train=...)
    with Finetuner(config) as finetuner:                                # in a worker thread
        print(finetuner.init_note)                                      # what was loaded, what is new
        for stats in finetuner.steps():                                 # TaskStepStats
            print(stats.step, stats.loss, stats.metrics, stats.eval and stats.eval.metrics)

Everything but the task is the pretraining loop's (bertcore.training.loop): the run folder, its lock, atomic
checkpoints with trainer_state.pt, exact resume (`resume=True`), stop/pause/checkpoint requests from another
thread, bf16 autocast on CUDA, DDP, the NaN/OOM/divergence errors, final/ and summary.json.

The model: the task's head, of the checkpoint's family (BertForSequenceClassification, RobertaForTokenClassification,
ElectraForQuestionAnswering…: any family bertcore loads) on the encoder (and pooler) of `config.init_from`
(default: the shipped default model), the head freshly initialised (seeded). A checkpoint that already has this
task's head for the same labels is trained further; one with a head for other labels (or another task) gives its
encoder and a new head, and `init_note` says so. The model is always given its targets and never asked for
attentions, so the encoder takes its fast path: for BERT's sequence classification the last layer runs at [CLS]
alone and no layer's dense work touches padding.

metrics.jsonl records (one JSON object per line; the loop adds "checkpoint", "warning" and "error" records):
    {"kind": "step", "step", "total_steps", "loss", <train metrics>, "learning_rate", "grad_norm", "tokens",
     "tokens_per_second", "elapsed_seconds", "epoch"}
        train metrics: "accuracy" (argmax on the step's batch: per example; token: per word) for classification
        and tagging; none for regression and QA
    {"kind": "eval", "step", "loss", <the task's metrics>, "main_metric", "num_examples"}
        sequence: accuracy, macro_f1 (regression: pearson, spearman); token: accuracy (per word) and, for BIO
        tags, entity_precision, entity_recall, entity_f1; qa: exact_match, f1 (SQuAD v2.0 data also
        has_answer_exact_match, has_answer_f1, no_answer_exact_match). Over the whole eval set, computed by
        the data (bertcore.tasks.finetune_data); loss = the mean over the eval set (per example, per scored word
        for token, per window for qa). main_metric names the one to plot: accuracy, pearson, entity_f1 or f1.
final/ holds the fine-tuned model (transformers loads it as the same class) and, for qa, predictions.json
(question id -> answer text, "" for no answer) of the final evaluation. summary.json adds "task", "main_metric",
"init_from" and "labels".
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertcore.models.parts import IGNORE_INDEX
from bertcore.models.task_heads import (
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    TaskModel,
    WeightTransfer,
    start_from_pretrained,
    task_model_class,
)
from bertcore.tasks.finetune_data import load_finetuning_data
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TOKEN_TASK
from bertcore.tasks.task_data import FinetuningData, TaskEvaluation
from bertcore.training.loop import TrainingLoop
from bertcore.training.settings import FinetuneConfig
from bertcore.training.task import LoopPlace, TrainingTask, metric_numbers, step_record

# The kind of head each task trains; the class is the checkpoint's family's (BertForSequenceClassification,
# RobertaForSequenceClassification, …: bertcore.models.task_heads.task_model_class).
TASK_MODELS = {SEQUENCE_TASK: EncoderForSequenceClassification, TOKEN_TASK: EncoderForTokenClassification,
               QA_TASK: EncoderForQuestionAnswering}
PREDICTIONS_FILE = "predictions.json"  # in final/, for qa: {question id: answer text}


@dataclass(frozen=True)
class TaskEvalStats:
    """The task's metrics over the whole eval set at one step; plain numbers and strings."""

    step: int
    loss: float  # mean over the eval set: per example (token: per scored word; qa: per window)
    metrics: Mapping[str, float]  # the field's names: accuracy, macro_f1, pearson, spearman, entity_f1, exact_match, f1
    main_metric: str  # the metric to plot and compare (a key of metrics)
    num_examples: int  # eval examples (qa: questions)

    @property
    def main_value(self) -> float:
        return self.metrics[self.main_metric]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "eval", "step": self.step, "loss": self.loss, **self.metrics, "main_metric": self.main_metric,
                "num_examples": self.num_examples}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> TaskEvalStats:
        """A metrics.jsonl "eval" record of a fine-tuning run (as `to_dict` writes it) back as the record."""
        fixed = {"kind", "step", "loss", "main_metric", "num_examples"}
        return cls(step=int(record["step"]), loss=float(record["loss"]), metrics=metric_numbers(record, fixed),
                   main_metric=str(record["main_metric"]), num_examples=int(record["num_examples"]))


@dataclass(frozen=True)
class TaskStepStats:
    """What one fine-tuning step did; plain numbers (the same common fields as pretraining's StepStats)."""

    step: int  # 1-based number of this step
    total_steps: int
    loss: float  # the task's loss on this step's batch (all processes together)
    metrics: Mapping[str, float]  # cheap train metrics on this batch: {"accuracy": ...} for classification/tagging
    learning_rate: float  # used for this step
    grad_norm: float  # before clipping
    tokens: int  # real (non-pad) tokens in this step, all processes together
    tokens_per_second: float  # tokens / wall time of this step (data, forward, backward, update)
    elapsed_seconds: float  # training time of the whole run so far (paused time excluded; resumed runs add up)
    epoch: float  # passes over the training data done after this step
    eval: TaskEvalStats | None = None  # set on steps that ran an evaluation
    checkpoint: str | None = None  # folder of a checkpoint written right after this step
    warning: str | None = None  # the loss is rising far (see bertcore.training.divergence); also a "warning" record

    def to_dict(self) -> dict[str, Any]:
        return step_record(self)

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> TaskStepStats:
        """A metrics.jsonl "step" record of a fine-tuning run back as the record (eval, checkpoint: None)."""
        fixed = {"kind", *(f.name for f in dataclasses.fields(cls))}
        return cls(step=int(record["step"]), total_steps=int(record["total_steps"]), loss=float(record["loss"]),
                   metrics=metric_numbers(record, fixed), learning_rate=float(record["learning_rate"]),
                   grad_norm=float(record["grad_norm"]), tokens=int(record["tokens"]),
                   tokens_per_second=float(record["tokens_per_second"]),
                   elapsed_seconds=float(record["elapsed_seconds"]), epoch=float(record["epoch"]))


def task_stats_from_record(record: Mapping[str, Any]) -> TaskStepStats | TaskEvalStats | None:
    """A fine-tuning run's metrics.jsonl record as its step or evaluation record; None for the loop's other
    records (checkpoint, warning, error). A run is a fine-tuning run when its run_config.json's "training" has a
    "task" (bert-train's has none)."""
    kind = record.get("kind")
    if kind == "step":
        return TaskStepStats.from_dict(record)
    if kind == "eval":
        return TaskEvalStats.from_dict(record)
    return None


@dataclass
class InitReport:
    """Where the model came from: the checkpoint, what its tensors became, and a sentence for people."""

    source: Path
    transfer: WeightTransfer
    note: str
    continued_head: bool = False


class FinetuningTask(TrainingTask):
    """A task head trained on the user's (or a demo's) data; see the module docstring."""

    command = "bert-finetune"

    def __init__(self, config: FinetuneConfig):
        self.config = config.resolved()
        self.task = self.config.task
        self.head_kind = TASK_MODELS[self.task]
        self.last_evaluation: tuple[int, TaskEvaluation] | None = None  # (step, the data's evaluation)

    # ---- set-up ---------------------------------------------------------------------------------------------

    def setup(self, loop: LoopPlace, resume_from: Path | None) -> None:
        from bertcore.files.resources import default_checkpoint_dir
        from bertcore.models.checkpoint import read_checkpoint

        config = self.config
        source = Path(resume_from or config.init_from or default_checkpoint_dir())
        contents = read_checkpoint(source)
        # RoBERTa's table keeps rows below its padding offset that no input reaches (RobertaConfig.max_length).
        max_length = getattr(contents.config, "max_length", contents.config.max_position_embeddings)
        if config.seq_len > max_length:
            raise ValueError(f"seq_len is {config.seq_len} but {source} has only {max_length} positions; use "
                             f"--seq-len {max_length} or less")
        self.model_class = task_model_class(contents.config, self.head_kind)  # the checkpoint's family's class
        has_this_head = contents.model_class is self.model_class
        if resume_from is not None and not has_this_head:
            raise ValueError(f"{source} holds a {contents.model_class.__name__}, not the {self.model_class.__name__} "
                             f"this {self.task!r} run trains; resume the run it belongs to")
        checkpoint_labels = list(contents.config.id2label.values())
        data = self._read_data(contents.tokenizer, checkpoint_labels if resume_from is not None else None)
        same_labels = has_this_head and self._same_labels(contents.config, data)
        if same_labels and self.task != QA_TASK and checkpoint_labels != list(data.id2label.values()):
            data = self._read_data(contents.tokenizer, checkpoint_labels)  # the head's order of the labels
        self.data, self.tokenizer = data, contents.tokenizer
        self.init = self._build_model(contents, same_labels)
        self._world_size = loop.world_size
        self._resolve_steps(loop.world_size)
        self.metric_names = tuple(self._metric_names())
        self.eval_batches = data.eval_batches(config.batch_size)

    def _read_data(self, tokenizer, labels: list[str] | None) -> FinetuningData:
        config = self.config
        options = dict(config.task_options)
        if labels is not None and self.task != QA_TASK:
            options["labels"] = labels
        return load_finetuning_data(self.task, config.train, config.eval, tokenizer=tokenizer, seq_len=config.seq_len,
                                    heldout_fraction=config.heldout_fraction, seed=config.seed,
                                    length_buckets=config.length_buckets, **options)

    def _same_labels(self, checkpoint_config, data: FinetuningData) -> bool:
        if self.task == QA_TASK:
            return True  # start and end: a QA head is one whatever its labels are called
        if self.task == SEQUENCE_TASK and (data.problem_type == "regression") != (checkpoint_config.num_labels == 1):
            return False
        return set(checkpoint_config.id2label.values()) == set(data.id2label.values())

    def _task_config(self, base):
        """The model config: the checkpoint's sizes with this task's labels."""
        if self.task == QA_TASK:
            return base.replace(id2label=self.data.id2label, problem_type=None)
        return base.replace(id2label=self.data.id2label, problem_type=self.data.problem_type)

    def _build_model(self, contents, same_labels: bool) -> InitReport:
        source, name = contents.folder, self.model_class.__name__
        state_dict, left_out = contents.state_dict, ()
        if same_labels:
            config = contents.config  # the head trains further, labels and all
        else:
            config = self._task_config(contents.config)
            if issubclass(contents.model_class, TaskModel):
                # Another task's head (or this task's for other labels) must not seed the new one: encoder only.
                prefix = self.model_class.base_model_prefix + "."
                left_out = tuple(sorted(n for n in state_dict if not n.startswith(prefix)))
                state_dict = {n: t for n, t in state_dict.items() if n.startswith(prefix)}
            # From a pretraining model, whatever the new model shares by name loads, as transformers loads it:
            # the encoder (and BERT's or ALBERT's pooler; ModernBERT's MLM `head`, which its task heads run first).
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.seed)  # the new head's init
            model, transfer = start_from_pretrained(self.model_class, config, state_dict)
        transfer = dataclasses.replace(transfer, dropped=tuple(sorted((*transfer.dropped, *left_out))))
        self.model = model
        labels = ", ".join(model.config.id2label.values())
        if same_labels:
            note = f"{source} already has a {name} head for these labels ({labels}): it is trained further"
        elif contents.model_class is self.model_class:
            old = ", ".join(contents.config.id2label.values())
            note = (f"{source} has a {name} head for other labels ({old}); its encoder is kept and a new head is "
                    f"initialised for {labels}")
        else:
            kept = "encoder and pooler" if any(".pooler." in n for n in transfer.loaded) else "encoder"
            if any(n.startswith("head.") for n in transfer.loaded):
                kept = "encoder and prediction head"
            note = f"started from {source} ({contents.model_class.__name__}): its {kept} with a new {name} head"
            if self.task != QA_TASK:
                note += f" for {labels}"
        return InitReport(source, transfer, note, continued_head=same_labels)

    def _resolve_steps(self, world_size: int) -> None:
        """steps from epochs, eval_every (None = once per epoch) and the warm-up, now that the data is known."""
        config = self.config
        per_epoch = self.data.steps_per_epoch(config.batch_size, world_size)
        steps = config.steps or max(1, math.ceil(config.epochs * per_epoch))
        eval_every = per_epoch if config.eval_every is None else config.eval_every
        warmup = steps // 10 if config.warmup_steps is None else min(config.warmup_steps, steps)
        self.config = config.replace(steps=steps, eval_every=eval_every, warmup_steps=warmup)
        self.total_steps, self.warmup_steps = steps, warmup
        self._examples_per_epoch = len(self.data.train_features)

    def _metric_names(self) -> list[str]:
        data = self.data
        if self.task == SEQUENCE_TASK:
            return ["pearson", "spearman"] if data.problem_type == "regression" else ["accuracy", "macro_f1"]
        if self.task == TOKEN_TASK:
            return ["entity_precision", "entity_recall", "entity_f1", "accuracy"] if data.main_metric == "entity_f1" \
                else ["accuracy"]
        return ["exact_match", "f1"]

    # ---- steps ----------------------------------------------------------------------------------------------

    def train_batch(self, step: int, batch_size: int, rank: int, world_size: int):
        return self.data.train_batch(step, batch_size, rank, world_size)

    def batch_sums(self, output, batch) -> torch.Tensor:
        """(loss·n, n) and, for classification and tagging, the correct argmaxes: n = examples (token: scored
        words, the first sub-tokens; qa: windows)."""
        if self.task == TOKEN_TASK:
            scored = batch.labels != IGNORE_INDEX  # (B, T)
            count = scored.sum().float()
            correct = ((output.logits.argmax(-1) == batch.labels) & scored).sum().float()
            return torch.stack([output.loss.detach().float() * count, count, correct])
        count = torch.tensor(float(batch.input_ids.size(0)), device=output.loss.device)
        sums = [output.loss.detach().float() * count, count]
        if self.task == SEQUENCE_TASK and self.data.problem_type != "regression":
            sums.append((output.logits.argmax(-1) == batch.labels).sum().float())
        return torch.stack(sums)

    def loss_of(self, sums: list[float]) -> float:
        return sums[0] / sums[1] if sums[1] else math.nan  # nothing scored: NonFiniteLossError names the step

    def _train_metrics(self, sums: list[float]) -> dict[str, float]:
        return {"accuracy": sums[2] / sums[1]} if len(sums) > 2 else {}

    def step_stats(self, sums: list[float], **common: Any) -> TaskStepStats:
        epoch = common["step"] * self.config.batch_size * self._world_size / self._examples_per_epoch
        return TaskStepStats(metrics=self._train_metrics(sums), epoch=epoch, **common)

    # ---- evaluation -----------------------------------------------------------------------------------------

    def evaluate(self, forward, step: int) -> TaskEvalStats:
        """Loss and the task's metrics over every eval example; keeps the predictions (`last_evaluation`)."""
        loss_sum = count = 0.0
        evaluation = self.data.new_evaluation()  # reduces each batch's logits as they come: memory of one batch
        for batch in self.eval_batches:
            output, moved = forward(batch)
            sums = self.batch_sums(output, moved).tolist()
            loss_sum, count = loss_sum + sums[0], count + sums[1]
            if self.task == QA_TASK:
                evaluation.add(batch, (output.start_logits.float().cpu(), output.end_logits.float().cpu()))
            else:
                evaluation.add(batch, output.logits.float().cpu())
        evaluation = evaluation.result()
        self.last_evaluation = (step, evaluation)
        return TaskEvalStats(step=step, loss=loss_sum / count, metrics=dict(evaluation.metrics),
                             main_metric=self.data.main_metric, num_examples=len(self.data.eval_examples))

    # ---- what the run folder records -----------------------------------------------------------------------

    def run_config(self) -> dict[str, Any]:
        transfer = self.init.transfer
        return {"model": self.model.config.to_dict(), "task": self.data.summary(),
                "init": {"from": str(self.init.source), "note": self.init.note, "loaded": len(transfer.loaded),
                         "initialised": list(transfer.initialised), "dropped": list(transfer.dropped)}}

    def write_final_files(self, folder: Path) -> None:
        if self.task == QA_TASK and self.last_evaluation is not None:
            predictions = self.last_evaluation[1].predictions
            (folder / PREDICTIONS_FILE).write_text(json.dumps(predictions, indent=1, ensure_ascii=False) + "\n",
                                                   encoding="utf-8")

    def summary(self) -> dict[str, Any]:
        return {"task": self.task, "main_metric": self.data.main_metric, "init_from": str(self.init.source),
                "labels": list(self.model.config.id2label.values())}


class Finetuner(TrainingLoop):
    """Fine-tuning of a task head: the shared `TrainingLoop` running a `FinetuningTask`; see the module docstring.

    Construction reads the checkpoint and the data and builds the model (create it in the worker thread); it
    takes the run folder's lock. `config.steps` (and eval_every, warmup_steps) are resolved from the data:
    `finetuner.config` holds the numbers the run uses. `resume=True` continues the run in `config.out_dir`.
    """

    task: FinetuningTask
    last_eval: TaskEvalStats | None

    def __init__(self, config: FinetuneConfig, *, resume: bool | str | Path = False,
                 command: list[str] | None = None):
        task = FinetuningTask(config)
        super().__init__(task.config, task, resume=resume, command=command)

    @property
    def data(self) -> FinetuningData:
        return self.task.data

    @property
    def init_note(self) -> str:
        """What the model started from: which tensors were loaded and which head is new."""
        return self.task.init.note

    @property
    def weight_transfer(self) -> WeightTransfer:
        return self.task.init.transfer

    @property
    def last_predictions(self) -> list | dict | None:
        """Predictions of the newest evaluation: per eval example (label, score or tag list); qa: {id: answer}."""
        return None if self.task.last_evaluation is None else self.task.last_evaluation[1].predictions
