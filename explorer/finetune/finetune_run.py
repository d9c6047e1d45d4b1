"""A fine-tuning run as the Fine-tune tab sees it, without Qt: its settings, the engine behind it, its record.

- `FinetuneSettings`: what the tab's form asks for (a demo task or the user's files, where to start from, the
  loop's settings), each value checked by FinetuneConfig itself (`finetune_problems`: its own messages, field by
  field); `to_config` makes the engine's `bertcore.training.settings.FinetuneConfig` of it.
- `make_finetune_run`: `bertcore.training.finetuning.Finetuner` behind the `EngineRun` interface the Train tab's runner
  drives (its `TaskStepStats`, with their `TaskEvalStats`, reach the GUI as they are). Resuming is exactly
  `bert-finetune --out RUN --resume`: the run folder's recorded configuration, `resume=True`.

A fine-tuning run in words (its configuration, its start, an evaluation) is `explorer.runs.run_descriptions`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TOKEN_TASK
from bertcore.training.settings import DEMO_SETTINGS, FinetuneConfig, config_field_problems, default_of
from explorer.runs.form_words import CONFIG_NAMES
from explorer.runs.training_run import EngineRun, LoopRun, warm_up_engine, with_app_checks

DEFAULT_START = "default"  # the shipped default model (bertcore.files.resources.default_checkpoint_dir)
LOADED_START = "loaded"  # the Inspect tab's model
TASK_NAMES = {SEQUENCE_TASK: "sequence or pair classification", TOKEN_TASK: "token classification",
              QA_TASK: "question answering"}
FORMATS_HELP = (
    "Sequence or pair classification: CSV or TSV with a header row, or JSONL (one JSON object a line), with the "
    "columns text, an optional text_b (the second sentence of a pair) and label (names or numbers; a number with "
    "a fraction, such as 0.5, makes it a regression).\n"
    "Token classification: CoNLL (one word and its tag a line, whitespace between them, the tag last; a blank "
    "line between sentences) or JSONL with tokens and tags (lists of the same length). BIO tags (B-PER, I-PER, "
    "O) are scored by entity F1.\n"
    "Question answering: SQuAD v1.1 or v2.0 JSON (data → paragraphs → context and qas with id, question, "
    "answers [text, answer_start], is_impossible in v2.0).\n"
    "Without an eval file, 10% of the training file is held out (seeded).")


# The form's fields that FinetuneConfig checks (its messages are the ones shown), and their names there.
CONFIG_FIELDS = ("steps", "epochs", "batch_size", "seq_len", "learning_rate", "warmup_steps", "seed",
                 "checkpoint_every", "eval_every")


def finetune_problems(**values: Any) -> dict[str, str]:
    """{field: what is wrong} for the fields given, in their order: FinetuneConfig's own message for a field it
    checks (a run given in steps ignores its epochs), then what the app asks beyond it (the Train tab's APP_CHECKS)."""
    checked = {name: value for name, value in values.items() if name in CONFIG_FIELDS
               and not (name == "epochs" and values.get("steps") is not None)}
    return with_app_checks(values, config_field_problems(FinetuneConfig, checked, names=CONFIG_NAMES,
                                                         context={"demo": "mood"}))


@dataclass(frozen=True)
class FinetuneSettings:
    """What the Fine-tune tab's form asks for; the defaults are the mood demo's measured settings."""

    demo: str | None = "mood"  # a demo task (bertcore.tasks.demos), or None for the user's own files
    task: str | None = None  # one of bertcore.tasks.kinds.TASK_KINDS, with `train`, when demo is None
    train: str | None = None
    eval: str | None = None  # None: hold out 10% of the training file
    init_from: str = DEFAULT_START  # DEFAULT_START, LOADED_START, or a checkpoint folder
    steps: int | None = DEMO_SETTINGS["mood"]["steps"]  # None: `epochs` passes over the training data
    epochs: float = default_of(FinetuneConfig, "epochs")
    batch_size: int = DEMO_SETTINGS["mood"]["batch_size"]
    seq_len: int = DEMO_SETTINGS["mood"]["seq_len"]
    learning_rate: float = DEMO_SETTINGS["mood"]["lr"]
    warmup_steps: int | None = default_of(FinetuneConfig, "warmup_steps")  # None: 10% of the steps
    seed: int = default_of(FinetuneConfig, "seed")
    device: str = "cpu"  # the app's runs start on the CPU, which every machine has; the form offers the others
    # The run's checkpoints: each one can go to the inspector or be compared, so the app keeps more than bert-finetune.
    checkpoint_every: int = 100
    eval_every: int | None = default_of(FinetuneConfig, "eval_every")  # None: once an epoch; 0: only at the end
    out_dir: str | None = None  # the run folder; None = a fresh timestamped folder under the app's data
    resume_from: str | None = None  # a fine-tuning run folder to continue, as `bert-finetune --resume`
    probe_every: int = 0  # (the Train tab's probes; a fine-tuning run is not probed)

    def __post_init__(self) -> None:
        problems = finetune_problems(steps=self.steps, epochs=self.epochs, batch_size=self.batch_size,
                                     seq_len=self.seq_len, learning_rate=self.learning_rate, seed=self.seed,
                                     warmup_steps=self.warmup_steps, checkpoint_every=self.checkpoint_every,
                                     eval_every=self.eval_every)
        if problems:
            raise ValueError(next(iter(problems.values())))
        own = self.demo is None  # a demo's task and files are its own: only the user's are checked
        FinetuneConfig(demo=self.demo, task=self.task if own else None, train=(self.train or None) if own else None)
        if not self.init_from:
            raise ValueError("no checkpoint folder to start from is given; pick one, or the default model")

    @classmethod
    def for_demo(cls, name: str, **changes: Any) -> FinetuneSettings:
        """A demo task with its measured settings (bertcore.training.settings.DEMO_SETTINGS), `changes` on top."""
        measured = DEMO_SETTINGS[name]
        return cls(**{"demo": name, "steps": measured["steps"], "batch_size": measured["batch_size"],
                      "seq_len": measured["seq_len"], "learning_rate": measured["lr"], **changes})

    @property
    def what(self) -> str:
        """The task in a few words, for folder names and status lines ("mood" or "token")."""
        return self.demo or self.task or "task"

    def to_config(self, init_from: str | None):
        """The engine's FinetuneConfig, starting from the checkpoint folder `init_from` (None: the default)."""
        values = dict(init_from=init_from, out_dir=self.out_dir, steps=self.steps, epochs=self.epochs,
                      batch_size=self.batch_size, seq_len=self.seq_len, lr=self.learning_rate,
                      warmup_steps=self.warmup_steps, seed=self.seed, device=self.device,
                      checkpoint_every=self.checkpoint_every, eval_every=self.eval_every)
        if self.demo is not None:
            return FinetuneConfig(demo=self.demo, **values).resolved()
        return FinetuneConfig(task=self.task, train=self.train, eval=self.eval or None, **values)


def resume_finetune_config(run_dir: str | os.PathLike):
    """The FinetuneConfig a fine-tuning run folder recorded, pointed at that folder: what
    `bert-finetune --out RUN --resume` continues (ValueError naming the file when it cannot be read)."""
    from bertcore.files.run_folder import RunFolder
    return FinetuneConfig.from_dict(RunFolder(run_dir).read_training_settings())


def settings_for_resume(run_dir: str | os.PathLike, device_names: tuple[str, ...] = ("cpu",)) -> FinetuneSettings:
    """The form's view of a fine-tuning run folder to resume (its recorded configuration)."""
    config = resume_finetune_config(run_dir)
    if not config.task:
        raise ValueError(f"{run_dir} is not a fine-tuning run (its run_config.json names no task)")
    device = config.device if config.device in device_names else device_names[0]
    common = dict(init_from=config.init_from or DEFAULT_START, steps=config.steps, epochs=config.epochs,
                  batch_size=config.batch_size, seq_len=config.seq_len, learning_rate=config.lr,
                  warmup_steps=config.warmup_steps, seed=config.seed, device=device,
                  checkpoint_every=config.checkpoint_every, eval_every=config.eval_every, out_dir=str(run_dir),
                  resume_from=str(run_dir))
    if config.demo:
        return FinetuneSettings(demo=config.demo, **common)
    return FinetuneSettings(demo=None, task=config.task, train=config.train, eval=config.eval, **common)


def warm_up_finetuning() -> None:
    """The engine's one-time costs (`warm_up_engine`) and fine-tuning's own imports, off the GUI thread."""
    import importlib

    warm_up_engine()
    for name in ("bertcore.training.finetuning", "bertcore.tasks.finetune_data", "bertcore.models.task_heads",
                 "bertcore.tasks.outputs", "bertcore.tasks.qa", "bertcore.analysis.attention_change"):
        importlib.import_module(name)


def make_finetune_run(settings: FinetuneSettings, init: Any) -> EngineRun:
    """The bertcore Finetuner behind the EngineRun interface (see `_FinetuneRun`)."""
    return _FinetuneRun(settings, init)


class _FinetuneRun(LoopRun):
    """`bertcore.training.finetuning.Finetuner` with the form's settings (or a run folder's own, when it resumes one);
    yields its `TaskStepStats` as they are. `init` is the inspector's (model, tokenizer, folder) for "the loaded
    model": its folder when it came from one, else the model is saved into the run folder first."""

    def __init__(self, settings: FinetuneSettings, init: Any):
        from bertcore.training.finetuning import Finetuner

        if settings.resume_from is not None:  # exactly what `bert-finetune --out RUN --resume` does
            self.run_dir = Path(settings.resume_from)
            self._start(Finetuner(resume_finetune_config(self.run_dir), resume=True))
            return
        self.run_dir = Path(settings.out_dir)
        init_from = None if settings.init_from == DEFAULT_START else settings.init_from
        if init is not None:
            model, tokenizer, folder = init
            if folder is None:
                from bertcore.models.checkpoint import save_pretrained

                folder = str(save_pretrained(model, tokenizer, self.run_dir / "init"))
            init_from = folder
        self._start(Finetuner(settings.to_config(init_from)))
