"""A fine-tuning run's configuration (`FinetuneConfig`), frozen and validated, and the settings measured for each
demo task. Torch-free."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.checks import check_at_most, check_int, check_number
from bertcore.models.config import FrozenMapping
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TASK_KINDS, TOKEN_TASK
from bertcore.training.loop_settings import MAX_EPOCHS, MAX_STEPS, check_loop_settings

# Options of the task's data (bertcore.tasks.finetune_data.load_finetuning_data), by task.
TASK_OPTIONS = {
    SEQUENCE_TASK: ("format", "problem_type", "text_column", "text_b_column", "label_column"),
    TOKEN_TASK: ("format", "tokens_field", "tags_field"),
    QA_TASK: ("max_query_length", "doc_stride", "max_answer_length", "null_score_diff_threshold", "allow_no_answer"),
}


# Settings measured for each demo task (bertcore.tasks.demos) from the shipped default model on a shared 2-core CPU
# (benchmarks/finetune_demos.py): FinetuneConfig.for_demo and `bert-finetune --demo` start from them. mood reaches
# 76-77% accuracy (chance 33%) in 300 steps, ~15 s of training; next-line 71-73% (chance 50%) in 150 steps, ~10 s;
# names entity F1 0.93 in 150 steps, ~12 s. who-says (QA) stays near its baselines: it demonstrates the QA path.
DEMO_SETTINGS: dict[str, dict[str, Any]] = {
    "mood": {"steps": 300, "batch_size": 32, "seq_len": 64, "lr": 2e-4},
    "next-line": {"steps": 150, "batch_size": 32, "seq_len": 96, "lr": 1e-4},
    "names": {"steps": 150, "batch_size": 32, "seq_len": 96, "lr": 3e-4},
    "who-says": {"steps": 200, "batch_size": 32, "seq_len": 192, "lr": 3e-4},
}


def _check_task_option_numbers(options: Mapping[str, Any]) -> None:
    """The numeric task options (TASK_OPTIONS) have the right kind of number; their ranges against seq_len are
    checked where the data is read (bertcore.tasks.qa_windows.check_qa_lengths)."""
    for name, minimum in (("max_query_length", 1), ("doc_stride", 0), ("max_answer_length", 1)):
        if options.get(name) is not None:
            check_int(name, options[name], minimum=minimum)
    if options.get("null_score_diff_threshold") is not None:
        check_number("null_score_diff_threshold", options["null_score_diff_threshold"])


@dataclass(frozen=True)
class FinetuneConfig:
    """A fine-tuning run (bertcore.training.finetuning.Finetuner, `bert-finetune`): a task, its data, a checkpoint to
    start from, and the loop's settings, which mean what they mean in TrainingConfig."""

    task: str | None = None  # "sequence" (a label per text or pair), "token" (a tag per word), "qa" (SQuAD spans)
    train: str | None = None  # training file: CSV/TSV/JSONL (sequence), CoNLL/JSONL (token), SQuAD JSON (qa)
    eval: str | None = None  # eval file; None = hold out heldout_fraction of the training file
    demo: str | None = None  # a shipped demo task (bertcore.tasks.demos): fills task, train and eval
    init_from: str | None = None  # checkpoint folder to start from; None = the shipped default model
    out_dir: str = "runs/finetune"  # run folder, laid out as bert-train's (bertcore.files.run_folder)
    steps: int | None = None  # optimisation steps; None = epochs × steps per epoch (resolved once data is read)
    epochs: float = 3.0  # passes over the training data when steps is None
    batch_size: int = 32  # examples (QA: windows) per step per process
    seq_len: int = 128  # longest input in tokens, specials included; longer texts are cut (QA: windowed)
    lr: float = 2e-4  # peak learning rate: suits the small default model; 2e-5..5e-5 for BERT-base and larger
    warmup_steps: int | None = None  # linear warm-up; None = 10% of steps; then linear decay (linear_schedule)
    weight_decay: float = 0.01  # AdamW decoupled decay, not applied to biases and LayerNorm
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    max_grad_norm: float = 1.0  # global gradient-norm clipping; 0 = off
    seed: int = 0  # the new head's init, the held-out split, the batch order and dropout all derive from it
    device: str = "auto"  # "auto" (CUDA, then MPS, then CPU), "cpu", "cuda", "cuda:1", "mps"
    precision: str = "auto"  # "auto" (bf16 autocast on CUDA when supported, else fp32), "fp32", "bf16"
    heldout_fraction: float = 0.1  # of the training file held out for evaluation when there is no eval file
    length_buckets: int = 8  # batches cut from a length-sorted pool of this many steps (less padding); 1 = off
    eval_every: int | None = None  # evaluation on the whole eval set every N steps and at the end; None = each
    # epoch; 0 = only at the end
    checkpoint_every: int = 500  # checkpoint every N steps (and at the end / on stop); 0 = only those
    keep_checkpoints: int = 2  # newest step-* folders kept (older ones are deleted)
    compile: bool = False  # torch.compile the model (slow first step; mostly useful on GPUs)
    num_threads: int | None = None  # torch.set_num_threads for this process; None = leave as is
    divergence_factor: float = 4.0  # as in TrainingConfig (bertcore.training.divergence); 0 = never stop
    divergence_patience: int = 10
    task_options: Mapping[str, Any] = FrozenMapping({})  # the data's options by name (TASK_OPTIONS)

    def __post_init__(self) -> None:
        for name in ("batch_size", "seq_len", "keep_checkpoints", "length_buckets"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("checkpoint_every", self.checkpoint_every, minimum=0)
        for name in ("steps", "eval_every", "warmup_steps"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=1 if name == "steps" else 0)
        check_number("epochs", self.epochs)
        if self.epochs <= 0:
            raise ValueError(f"epochs must be above 0, got {self.epochs!r}; or give steps")
        check_at_most("epochs", self.epochs, MAX_EPOCHS, "steps = epochs × steps per epoch must stay a finite count")
        for name in ("steps", "warmup_steps"):
            if getattr(self, name) is not None:
                check_at_most(name, getattr(self, name), MAX_STEPS, "the learning-rate schedule divides by it as "
                               "a float")
        if self.seq_len < 8:
            raise ValueError(f"seq_len is {self.seq_len}; it must be at least 8 to hold [CLS] A [SEP] B [SEP]")
        if self.warmup_steps is not None and self.steps is not None and self.warmup_steps > self.steps:
            raise ValueError(f"warmup_steps is {self.warmup_steps}; it must be between 0 and steps ({self.steps})")
        if not (0 < self.heldout_fraction < 1):
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction!r}")
        check_loop_settings(self, lr_hint="2e-4 suits the small default model, 2e-5..5e-5 BERT-base")
        if self.demo is not None and self.demo not in DEMO_SETTINGS:
            raise ValueError(f"there is no demo task {self.demo!r}; the demo tasks are {', '.join(DEMO_SETTINGS)}")
        if self.task is not None and self.task not in TASK_KINDS:
            raise ValueError(f"task {self.task!r} is not one of {', '.join(TASK_KINDS)} (sequence: a label per "
                             "text or pair; token: a tag per word; qa: answer spans, SQuAD)")
        if self.demo is None and (self.task is None or self.train is None):
            raise ValueError("a fine-tuning run needs a task and a training file (--task and --train), or a demo "
                             f"task (--demo {' | '.join(DEMO_SETTINGS)})")
        if not isinstance(self.task_options, Mapping):
            raise ValueError(f"task_options must be a mapping of option name to value, got {self.task_options!r}")
        object.__setattr__(self, "task_options", FrozenMapping(self.task_options))
        if self.task is not None:
            unknown = sorted(set(self.task_options) - set(TASK_OPTIONS[self.task]))
            if unknown:
                raise ValueError(f"{', '.join(unknown)} is not an option of the {self.task!r} task; its options are "
                                 f"{', '.join(TASK_OPTIONS[self.task])}")
        _check_task_option_numbers(self.task_options)

    @classmethod
    def for_demo(cls, name: str, **changes: Any) -> FinetuneConfig:
        """The settings measured for demo task `name` (DEMO_SETTINGS), with `changes` on top."""
        if name not in DEMO_SETTINGS:
            raise ValueError(f"there is no demo task {name!r}; the demo tasks are {', '.join(DEMO_SETTINGS)}")
        return cls(**{"demo": name, "out_dir": f"runs/finetune-{name}", **DEMO_SETTINGS[name], **changes})

    def resolved(self) -> FinetuneConfig:
        """task, train and eval filled in from the demo task (when `demo` is set); ValueError when they name other
        files than the demo's."""
        if self.demo is None:
            return self
        from bertcore.tasks.demos.registry import demo_task

        demo = demo_task(self.demo)
        wanted = {"task": demo.task, "train": str(demo.train), "eval": str(demo.eval)}
        for name, value in wanted.items():
            given = getattr(self, name)
            if given is not None and given != value and not (name != "task" and Path(given) == Path(value)):
                raise ValueError(f"{name} is {given!r} but the demo task {self.demo!r} sets it to {value!r}; give "
                                 "either a demo task or your own task and files")
        return self.replace(**wanted)

    def replace(self, **changes: Any) -> FinetuneConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        values["adam_betas"] = list(self.adam_betas)
        values["task_options"] = dict(self.task_options)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> FinetuneConfig:
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})
