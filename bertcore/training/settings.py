"""A training run's settings, each declared once: the fields every run shares (`LoopSettings`), pretraining's
(`TrainingConfig`) and fine-tuning's (`FinetuneConfig`), every field with its default and its help beside it.
Frozen and validated: a wrong value is a ValueError that names the field, the value and the fix. Torch-free, so
`bert-train --help`, the app's forms and `import bertcore` stay fast.

Everything that offers a setting reads it from here. The command lines are generated from the fields
(bertcore.cli.common.add_setting_options), as transformers' HfArgumentParser reads TrainingArguments: one option
per field, named after it (`batch_size` is `--batch-size`), with the field's type, choices and help, and its
default said in the help. A new option is a new field with its help, nothing more. The app's forms start from the
same defaults (explorer.runs.training_run.TrainingSettings, explorer.finetune.finetune_run.FinetuneSettings) and
show the configs' own messages beside each field as it is typed (`config_field_problems`).

In reading order: how a field is declared (`setting`), the bounds every run is checked against and BERT's
learning-rate schedule, `LoopSettings`, the pretraining objectives and `TrainingConfig`, the fine-tuning task
options, the demo tasks' measured settings and `FinetuneConfig`, and a config's checks field by field.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from bertcore.checks import check_at_most, check_int, check_number
from bertcore.data.masking_recipes import MASKING_RECIPES, RECIPE_DESCRIPTIONS, check_recipe
from bertcore.models.config import MAX_VOCAB_SIZE, PRESETS, FrozenMapping
from bertcore.models.families import family_names, pretraining_objectives
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TASK_KINDS, TOKEN_TASK


def setting(default: Any, help: str, *, group: str, option: str | None = "", choices: Any = None,
            shown: str | None = None) -> Any:
    """A settings field: its `default` and the one `help` that its command-line option and the app show.

    group: the --help section of its option ("data", "model", "optimisation", "run"). option: "" for the field's
    own name (`--batch-size`), another name ("--out"), or None for a setting with no option. choices: the values
    allowed, or a function giving them when asked (a registry another module may extend). shown: how --help says
    the default where its value would not say it ("10% of --steps"); without it, a None default is not said. A
    help may name another setting's default as {name}: "for {divergence_patience} steps"."""
    return dataclasses.field(default=default, metadata={"help": help, "group": group, "option": option,
                                                        "choices": choices, "shown": shown})


def changed(name: str, default: Any, **metadata: Any) -> Any:
    """LoopSettings' field `name` with the default of a kind of run that differs there (and, where its meaning
    differs too, its own help, shown default or group)."""
    base = LoopSettings.__dataclass_fields__[name]
    return dataclasses.field(default=default, metadata={**base.metadata, **metadata})


def default_of(config_class: type, name: str) -> Any:
    """The default value of `config_class`'s field `name` (a form's default where it is the command line's)."""
    return config_class.__dataclass_fields__[name].default


def help_of(config_class: type, name: str) -> str:
    """The help of `config_class`'s field `name`, other settings' defaults filled in."""
    defaults = {field.name: field.default for field in dataclasses.fields(config_class)}
    return config_class.__dataclass_fields__[name].metadata["help"].format(**defaults)


# Upper bounds of the numeric settings whose huge values overflow somewhere (each check says where):
MAX_STEPS = 10**12  # the schedule divides by the step count as a float; 10^12 steps outlast any machine
MAX_EPOCHS = 1_000_000.0  # steps = epochs × steps per epoch must stay a finite count
MAX_NUM_THREADS = 1024  # torch.set_num_threads overflows (or tries to start that many threads) beyond
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.manual_seed accepts
FLOAT32_TINY = 1.1754944e-38  # the smallest normal float32: a smaller adam_eps is 0 to the optimizer
PRECISIONS = ("auto", "fp32", "bf16")
REPORT_TO = ("none", "tensorboard")  # where a run's numbers go besides metrics.jsonl (bertcore.training.reporting)


def check_warmup(warmup_steps: int | None, steps: int | None) -> None:
    """A warm-up no longer than the run: the message names both ways out."""
    if warmup_steps is not None and steps is not None and warmup_steps > steps:
        raise ValueError(f"warmup_steps is {warmup_steps} but the run has {steps} steps in all; the warm-up must "
                         f"fit in the run: make warmup_steps {steps} or fewer (about a tenth of steps is usual), or "
                         f"steps {warmup_steps} or more")


def linear_schedule(step: int, *, lr: float, warmup_steps: int, total_steps: int) -> float:
    """Learning rate of 1-based `step`: linear warm-up to `lr` over `warmup_steps`, then linear decay towards 0
    (BERT's schedule, for pretraining and fine-tuning alike), step for step what transformers'
    `get_linear_schedule_with_warmup` gives: its scheduler steps after the optimizer, so update k uses its factor
    of k - 1. The first update of a warm-up therefore has rate 0 and the last one lr / (total - warmup) (it would
    reach 0 one step after the end)."""
    done = step - 1  # updates applied before this one
    if done < warmup_steps:
        return lr * done / max(1, warmup_steps)
    return lr * max(0.0, (total_steps - done) / max(1, total_steps - warmup_steps))


# ---- the settings every run shares ---------------------------------------------------------------------------

@dataclass(frozen=True)
class LoopSettings:
    """What every training loop is set with (bertcore.training.loop.TrainingLoop reads these), checked alike for
    every kind of run. The defaults are pretraining's, a BERT-mini on a small corpus; `FinetuneConfig` changes
    those where fine-tuning differs."""

    LR_HINT: ClassVar[str] = "BERT-mini likes about 5e-4"  # what the learning-rate message suggests

    out_dir: str = setting("runs/bert", "run folder: run_config.json, metrics.jsonl, checkpoints/, final/",
                           group="run", option="--out")
    init_from: str | None = setting(None, "a checkpoint folder to train further (its weights, config and "
                                    "vocabulary)", group="model")
    steps: int = setting(1000, "optimisation steps in total", group="optimisation")
    batch_size: int = setting(32, "sequences per step per process", group="optimisation")
    seq_len: int = setting(128, "longest sequence in tokens, specials ([CLS], [SEP]) included; batches are padded "
                           "only to their longest", group="data")
    lr: float = setting(5e-4, "peak learning rate, reached after the warm-up", group="optimisation")
    warmup_steps: int | None = setting(None, "linear warm-up steps, then linear decay to 0", group="optimisation",
                                       shown="10% of --steps")
    weight_decay: float = setting(0.01, "AdamW weight decay, not applied to biases and LayerNorm",
                                  group="optimisation")
    adam_betas: tuple[float, float] = setting((0.9, 0.999), "AdamW's betas", group="optimisation", option=None)
    adam_eps: float = setting(1e-6, "AdamW's epsilon", group="optimisation", option=None)
    max_grad_norm: float = setting(1.0, "gradient clipping norm, 0 = off", group="optimisation")
    seed: int = setting(0, "seed of the model's init, the held-out split, the batches, masks and dropout",
                        group="optimisation")
    device: str = setting("auto", "auto, cpu, cuda, cuda:N or mps", group="run",
                          shown="auto, which picks CUDA, then MPS, then CPU")
    precision: str = setting("auto", "auto = bf16 autocast on CUDA where it is supported, else fp32",
                             group="run", choices=PRECISIONS)
    heldout_fraction: float = setting(0.02, "documents held out for evaluation", group="data")
    length_buckets: int = setting(8, "cut batches from a length-sorted pool of this many steps' examples, so "
                                  "padding is small; 1 = off", group="data")
    eval_every: int = setting(100, "held-out evaluation every N steps, and at the end; 0 = only at the end",
                              group="run")
    checkpoint_every: int = setting(500, "checkpoint every N steps, and at the end or on a stop; 0 = only those",
                                    group="run")
    keep_checkpoints: int = setting(2, "newest checkpoints kept (older ones are deleted)", group="run")
    compile: bool = setting(False, "torch.compile the model (a slow first step; mostly useful on GPUs)",
                            group="run")
    num_threads: int | None = setting(None, "CPU threads for PyTorch", group="run", shown="PyTorch's choice")
    # Stop a run whose loss explodes without becoming NaN (bertcore.training.divergence).
    divergence_factor: float = setting(4.0, "stop when the smoothed loss stays this many times above its best value "
                                       "for {divergence_patience} steps (a learning rate far too high); 0 = never",
                                       group="optimisation")
    divergence_patience: int = setting(10, "steps in a row the smoothed loss must stay above divergence_factor × "
                                       "its best before the run stops", group="optimisation", option=None)
    report_to: str = setting("none", "also write the run's numbers where this tool reads them, as the Trainer's "
                             "report_to: tensorboard = TensorBoard event files beside metrics.jsonl, tagged as the "
                             "Trainer tags them (train/loss, eval/loss; needs pip install -e '.[tensorboard]')",
                             group="run", choices=REPORT_TO)

    def __post_init__(self) -> None:
        for name in ("batch_size", "seq_len", "keep_checkpoints", "length_buckets"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("checkpoint_every", self.checkpoint_every, minimum=0)
        if self.warmup_steps is not None:
            check_int("warmup_steps", self.warmup_steps, minimum=0)
            check_at_most("warmup_steps", self.warmup_steps, MAX_STEPS, "the learning-rate schedule divides by it "
                          "as a float")
        if self.seq_len < 8:
            raise ValueError(f"seq_len is {self.seq_len}; it must be at least 8 to hold [CLS] A [SEP] B [SEP]")
        if not (isinstance(self.lr, int | float) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r} ({self.LR_HINT})")
        # (No upper bound on lr: a far too high one is what the loop's NaN and divergence messages name, rightly.)
        for name in ("weight_decay", "max_grad_norm"):
            check_number(name, getattr(self, name))
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}"
                                 + (" (0 = no clipping)" if name == "max_grad_norm" else " (0 = no decay)"))
        if self.weight_decay > 1 and self.lr * self.weight_decay >= 1:
            # AdamW's decoupled decay multiplies each decayed weight by (1 - lr × weight_decay) every step: at or past
            # 1 the weights are zeroed or flip sign, past 2 they grow geometrically and overflow. (A weight_decay of
            # 1 or less is only pushed there by an lr of 1 or more, which the loop's messages name.)
            factor = 1 - self.lr * self.weight_decay
            damage = "overflow" if factor < -1 else "are zeroed or flip sign every step"
            raise ValueError(
                f"weight_decay is {self.weight_decay:g}, but AdamW multiplies every decayed weight by "
                f"1 - lr × weight_decay = {factor:.3g} each step (lr {self.lr:g}), so the weights {damage}; with this "
                f"lr weight_decay must be in [0, {1 / self.lr:,.4g}) (below 1/lr; usual values are 0.01 to 0.1)"
            )
        betas = self.adam_betas
        if (not isinstance(betas, tuple | list) or len(betas) != 2
                or not all(isinstance(b, int | float) and not isinstance(b, bool) and 0 <= b < 1 for b in betas)):
            raise ValueError(f"adam_betas must be two numbers in [0, 1), such as (0.9, 0.999), got {betas!r}: Adam "
                             "divides by 1 - beta^step, which is 0 for a beta of 1")
        check_number("adam_eps", self.adam_eps)
        if self.adam_eps < FLOAT32_TINY:
            raise ValueError(f"adam_eps is {self.adam_eps!r}; it must be at least {FLOAT32_TINY:.3g} (usual: 1e-8 to "
                             "1e-6): Adam divides by sqrt(v) + eps, and where a weight's gradient is 0 a smaller eps "
                             "(0 in float32) gives 0/0 = NaN")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) \
                or not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise ValueError(f"seed must be an integer from -2**63 to 2**64 - 1 (what torch.manual_seed takes), such "
                             f"as 0, got {self.seed!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision {self.precision!r} is not one of {', '.join(PRECISIONS)}")
        if self.report_to not in REPORT_TO:
            raise ValueError(f"report_to {self.report_to!r} is not one of {', '.join(REPORT_TO)} (tensorboard: "
                             "TensorBoard event files beside metrics.jsonl)")
        if self.num_threads is not None:
            check_int("num_threads", self.num_threads, minimum=1)
            check_at_most("num_threads", self.num_threads, MAX_NUM_THREADS,
                          "torch.set_num_threads overflows or starts that many threads")
        check_number("divergence_factor", self.divergence_factor)
        if not (self.divergence_factor == 0 or self.divergence_factor > 1):
            raise ValueError(f"divergence_factor must be 0 (off) or a number above 1 (e.g. 4), got "
                             f"{self.divergence_factor!r}; a factor of 1 or less would stop a healthy run")
        check_int("divergence_patience", self.divergence_patience, minimum=1)
        object.__setattr__(self, "adam_betas", tuple(float(b) for b in self.adam_betas))

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values (run_config.json's "training"): the betas a list, a mapping a dict."""
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        values["adam_betas"] = list(self.adam_betas)
        return {name: dict(value) if isinstance(value, Mapping) else value for name, value in values.items()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]):
        """The config of recorded `values` (run_config.json's "training"); names it does not know are left out."""
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})


# ---- pretraining ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PretrainingObjective:
    """One of the family's pretraining objectives (bertcore.training.objectives trains it), as a user picks it."""

    family: str  # the family whose recipe it is: a new model's family when no arch is given
    summary: str  # a few words, for a menu
    description: str  # what it trains on, for --help


# The objectives, each under the name a user types (the one list of them: the command line, the configs and the
# app's form read it). Which families each one can train is the family registry's (bertcore.models.families).
OBJECTIVES: dict[str, PretrainingObjective] = {
    "mlm+nsp": PretrainingObjective("bert", "BERT: masked LM + next sentence",
                                    "BERT's masked LM + next-sentence prediction"),
    "mlm": PretrainingObjective("roberta", "RoBERTa: masked LM, full sentences",
                                "RoBERTa's masked LM on full sentences packed across documents"),
    "mlm+sop": PretrainingObjective("albert", "ALBERT: masked LM + sentence order",
                                    "ALBERT's masked LM + sentence-order prediction"),
    "rtd": PretrainingObjective("electra", "ELECTRA: replaced-token detection",
                                "ELECTRA's replaced-token detection with a small generator"),
}


def new_model_family(arch: str | None, objective: str | None) -> str:
    """A new model's family: `arch`, else `objective`'s own family, else bert."""
    return arch or OBJECTIVES[objective or "mlm+nsp"].family


def new_model_objective(arch: str | None, objective: str | None) -> str:
    """A new model's objective: `objective`, else its family's own (bertcore.models.families)."""
    return objective or pretraining_objectives(new_model_family(arch, objective))[0]


@dataclass(frozen=True)
class TrainingConfig(LoopSettings):
    """A pretraining run (bertcore.training.pretraining.Trainer, `bert-train`): the corpus, the model and its
    objective, and the loop's settings."""

    corpus: str = setting("", "a corpus file or a folder of them: .txt or .txt.gz (blank lines separate documents), "
                          ".jsonl or .jsonl.gz (one document per record), .parquet or .arrow (one per row; needs "
                          "pyarrow)", group="data", shown="the built-in Tiny Shakespeare")
    # The corpus's preparation (bertcore.data.prepare): prepared once into memory-mapped token ids, cached.
    text_field: str = setting("text", "the text field of .jsonl records and Parquet/Arrow tables", group="data")
    data_cache: str | None = setting(None, "folder of prepared corpora: a corpus is tokenized once into it and "
                                     "reused by later runs, resumes and every process", group="data",
                                     shown="$XDG_CACHE_HOME/bert-explorer/corpora")
    vocab_sample: int = setting(32_000_000, "characters of the corpus, drawn evenly from all of it, that a "
                                "vocabulary is trained on", group="data")
    vocab: str | None = setting(None, "reuse this tokenizer instead of training a WordPiece vocabulary on the corpus: "
                                "a vocab.txt, a tokenizer.json, or a model folder's tokenizer (RoBERTa's byte-level "
                                "BPE, ALBERT's SentencePiece, ...)", group="data")
    vocab_size: int = setting(8000, "size of the WordPiece vocabulary trained when there is no --vocab",
                              group="data")
    mlm_probability: float = setting(0.15, "fraction of tokens picked for the masked LM (the budget of every "
                                     "masking recipe)", group="data")
    masking: str = setting("token", "what is masked: " + "; ".join(f"{name} = {description}" for name, description
                                                                  in RECIPE_DESCRIPTIONS.items()),
                           group="data", choices=MASKING_RECIPES)
    short_seq_prob: float = setting(0.1, "fraction of examples with a shorter random target length (as the paper)",
                                    group="data", option=None)
    eval_batches: int = setting(4, "held-out batches per evaluation (a fixed set)", group="run")
    preset: str = setting("mini", f"model size: {', '.join(PRESETS)}; ignored "
                          "with --init-from", group="model")
    # What the model learns and which family it is (see resolved_objective / resolved_arch): None = the other's own
    # (both None: BERT's mlm+nsp on a BERT). init_from's folder decides the family itself.
    objective: str | None = setting(None, "what the model learns: " + "; ".join(
        f"{name} = {objective.description}" for name, objective in OBJECTIVES.items()), group="model",
        choices=tuple(OBJECTIVES), shown="the architecture's own, mlm+nsp for bert")
    arch: str | None = setting(None, "a new model's family, at the --preset size, saved in its transformers layout",
                               group="model", choices=family_names, shown="the objective's own, bert")
    generator_width: float = setting(0.25, "rtd: the generator's hidden size, heads and FFN as a share of the "
                                     "discriminator's", group="model")
    discriminator_weight: float = setting(50.0, "rtd: the weight of the discriminator's loss (loss = generator MLM "
                                          "loss + this × discriminator loss; the paper's 50)", group="model")
    # What the model has learned, measured on its weights as it trains (bertcore.analysis; docs/watch-it-learn.md):
    # a tool given to the loop runs the measurements (bertcore.analysis.schedule.AnalysisSchedule); these say when.
    analysis_every: int = setting(0, "measure what the model has learned every N steps, and at step 0 and the last "
                                  "step: syntax in its heads, what each layer knows (POS probes), representation "
                                  "health and BLiMP; a line each and an analysis record in metrics.jsonl; 0 = never",
                                  group="run")
    treebank: str | None = setting(None, "a CoNLL-U treebank for those measurements: its first sentences are "
                                   "measured, the next ones test the probes", group="data",
                                   shown="the shipped cut of UD English EWT")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("vocab_size", "steps", "eval_batches", "vocab_sample"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("eval_every", self.eval_every, minimum=0)
        check_int("analysis_every", self.analysis_every, minimum=0)
        if self.treebank is not None and (not isinstance(self.treebank, str) or not self.treebank.strip()):
            raise ValueError(f"treebank is {self.treebank!r}; give the path of a CoNLL-U file (.conllu), or leave it "
                             "out for the shipped one")
        check_at_most("steps", self.steps, MAX_STEPS, "the learning-rate schedule divides by it as a float")
        check_at_most("vocab_size", self.vocab_size, MAX_VOCAB_SIZE,
                      "the largest BERT vocabularies hold about 250,000 tokens")
        check_warmup(self.warmup_steps, self.steps)
        check_number("mlm_probability", self.mlm_probability)
        if not (0 < self.mlm_probability < 1):
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability!r}; BERT uses 0.15, "
                             "MosaicBERT 0.3")
        check_recipe(self.masking)
        if not (0 <= self.short_seq_prob <= 1):
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob!r}")
        if not (0 <= self.heldout_fraction < 1):
            raise ValueError(f"heldout_fraction must be in [0, 1), got {self.heldout_fraction!r}")
        if not isinstance(self.text_field, str) or not self.text_field:
            raise ValueError(f"text_field is {self.text_field!r}; name the text field of the corpus's records, e.g. "
                             "'text'")
        self._check_objective()

    def _check_objective(self) -> None:
        if self.objective is not None and self.objective not in OBJECTIVES:
            raise ValueError(f"objective {self.objective!r} is unknown; choose one of {', '.join(OBJECTIVES)} "
                             "(mlm+nsp is BERT's, mlm RoBERTa's, mlm+sop ALBERT's, rtd ELECTRA's)")
        if self.arch is not None and self.arch not in family_names():
            raise ValueError(f"arch {self.arch!r} is unknown; choose one of {', '.join(family_names())}")
        if self.arch is not None and self.init_from:
            raise ValueError(f"arch {self.arch!r} builds a new model, but init_from continues {self.init_from}, whose "
                             "family its config.json says; leave out --arch (or --init-from)")
        if self.arch is not None and self.objective is not None:
            supported = pretraining_objectives(self.arch)
            if self.objective not in supported:
                raise ValueError(f"objective {self.objective} needs a model with its head, and a {self.arch} has "
                                 f"none: {self.arch} supports {' and '.join(supported)}. Use --objective "
                                 f"{supported[0]}, or --arch {OBJECTIVES[self.objective].family} for {self.objective}")
        if not (0 < self.generator_width <= 1):
            raise ValueError(f"generator_width must be in (0, 1], got {self.generator_width!r}; ELECTRA's generator "
                             "is 1/4 (small) to 1/3 (base) of the discriminator's width")
        if not (self.discriminator_weight > 0):
            raise ValueError(f"discriminator_weight must be above 0, got {self.discriminator_weight!r}; ELECTRA "
                             "uses 50")

    @property
    def resolved_arch(self) -> str:
        """The new model's family: arch, else the objective's own family, else bert."""
        return new_model_family(self.arch, self.objective)

    @property
    def resolved_objective(self) -> str:
        """The objective of a new model: objective, else the architecture's own (bertcore.models.families). A run
        continuing init_from without an objective trains what its folder's class was trained for (the task says)."""
        return new_model_objective(self.arch, self.objective)

    @property
    def resolved_warmup_steps(self) -> int:
        return self.steps // 10 if self.warmup_steps is None else self.warmup_steps

    def learning_rate(self, step: int) -> float:
        """Learning rate of 1-based step `step`, as transformers' linear schedule gives it (linear_schedule)."""
        return linear_schedule(step, lr=self.lr, warmup_steps=self.resolved_warmup_steps, total_steps=self.steps)


# ---- fine-tuning ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskOption:
    """An option of a task's data (FinetuneConfig.task_options; bertcore.tasks.finetune_data.load_finetuning_data
    reads it), declared once: the tasks that take it, its type and the help `bert-finetune --help` shows."""

    tasks: tuple[str, ...]
    type: type
    help: str


# The data's options by name, in the order --help lists them; each is an option of bert-finetune.
TASK_OPTION_SETTINGS: dict[str, TaskOption] = {
    "format": TaskOption((SEQUENCE_TASK, TOKEN_TASK), str, "the files' format when their extension does not say: "
                         "csv, tsv, jsonl (sequence); conll, jsonl (token)"),
    "text_column": TaskOption((SEQUENCE_TASK,), str, "sequence: the column of the text (default text)"),
    "text_b_column": TaskOption((SEQUENCE_TASK,), str, "sequence: the column of the second text of a pair (default "
                                "text_b)"),
    "label_column": TaskOption((SEQUENCE_TASK,), str, "sequence: the column of the label (default label)"),
    "problem_type": TaskOption((SEQUENCE_TASK,), str, "sequence: single_label_classification or regression "
                               "(default: regression when a label is a number with a fraction)"),
    "tokens_field": TaskOption((TOKEN_TASK,), str, "token, JSONL: the field of the words (default tokens)"),
    "tags_field": TaskOption((TOKEN_TASK,), str, "token, JSONL: the field of the tags (default tags)"),
    "max_query_length": TaskOption((QA_TASK,), int, "qa: question tokens kept (default min(64, (seq-len - 3) // 2))"),
    "doc_stride": TaskOption((QA_TASK,), int, "qa: overlap in tokens between the windows of a long context "
                             "(default seq-len // 3)"),
    "max_answer_length": TaskOption((QA_TASK,), int, "qa: longest answer in tokens (default 30)"),
    "null_score_diff_threshold": TaskOption((QA_TASK,), float, 'qa, SQuAD 2.0: answer "" when the null score beats '
                                            "the best span by more than this (default 0)"),
    "allow_no_answer": TaskOption((QA_TASK,), bool, 'qa: the model may answer "" (default: when the data has '
                                  "unanswerable questions)"),
}
# The options each task takes.
TASK_OPTIONS = {task: tuple(name for name, option in TASK_OPTION_SETTINGS.items() if task in option.tasks)
                for task in TASK_KINDS}


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
    checked where the data is read (bertcore.tasks.qa.check_qa_lengths)."""
    for name, minimum in (("max_query_length", 1), ("doc_stride", 0), ("max_answer_length", 1)):
        if options.get(name) is not None:
            check_int(name, options[name], minimum=minimum)
    if options.get("null_score_diff_threshold") is not None:
        check_number("null_score_diff_threshold", options["null_score_diff_threshold"])


@dataclass(frozen=True)
class FinetuneConfig(LoopSettings):
    """A fine-tuning run (bertcore.training.finetuning.Finetuner, `bert-finetune`): a task, its data, a checkpoint to
    start from, and the loop's settings, which mean what they mean in TrainingConfig; where fine-tuning's differ,
    they are declared again below."""

    LR_HINT: ClassVar[str] = "2e-4 suits the small default model, 2e-5..5e-5 BERT-base"

    out_dir: str = changed("out_dir", "runs/finetune")
    init_from: str | None = changed(
        "init_from", None, help="the checkpoint to start from, of any family bertcore loads; one with this task's "
        "head for the same labels is trained further", shown="the shipped default model")
    steps: int | None = changed("steps", None, help="optimisation steps", shown="--epochs passes over the training "
                                "data")
    lr: float = changed("lr", 2e-4, help="peak learning rate: the default suits the small default model; 2e-5..5e-5 "
                        "suit BERT-base and larger")
    adam_eps: float = changed("adam_eps", 1e-8)
    heldout_fraction: float = changed("heldout_fraction", 0.1, help="of the training file held out for evaluation "
                                      "when there is no --eval")
    eval_every: int | None = changed("eval_every", None, help="evaluation on the whole eval set every N steps, and "
                                     "at the end; 0 = only at the end", shown="once per epoch")
    task: str | None = setting(None, "sequence (a label per text or pair), token (a tag per word) or qa (answer "
                               "spans, SQuAD)", group="data", choices=TASK_KINDS)
    train: str | None = setting(None, "training file: CSV/TSV/JSONL (sequence), CoNLL/JSONL (token), SQuAD JSON (qa)",
                                group="data")
    eval: str | None = setting(None, "evaluation file, same format", group="data",
                               shown="hold out --heldout-fraction of --train")
    demo: str | None = setting(None, "a shipped demo task (assets/tasks; bertcore.tasks.demos): sets --task, --train, "
                               "--eval and its measured steps, batch size, sequence length and learning rate (options "
                               "given override them)", group="data", choices=tuple(DEMO_SETTINGS))
    epochs: float = setting(3.0, "passes over the training data when --steps is not given", group="optimisation")
    task_options: Mapping[str, Any] = setting(FrozenMapping({}), "the data's options by name (TASK_OPTION_SETTINGS: "
                                              "each is an option of bert-finetune)", group="data", option=None)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("steps", "eval_every"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=1 if name == "steps" else 0)
        check_number("epochs", self.epochs)
        if self.epochs <= 0:
            raise ValueError(f"epochs must be above 0, got {self.epochs!r}; or give steps")
        check_at_most("epochs", self.epochs, MAX_EPOCHS, "steps = epochs × steps per epoch must stay a finite count")
        if self.steps is not None:
            check_at_most("steps", self.steps, MAX_STEPS, "the learning-rate schedule divides by it as a float")
        check_warmup(self.warmup_steps, self.steps)
        if not (0 < self.heldout_fraction < 1):
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction!r}")
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


# ---- a config's checks, field by field: what a form shows next to each field as it is typed, so that the app
# never checks a setting a second time, differently

def config_field_problems(config_class: type, values: Mapping[str, Any], *, names: Mapping[str, str] | None = None,
                          context: Mapping[str, Any] | None = None) -> dict[str, str]:
    """{field: the ValueError message `config_class` gives} for the `values` it refuses, in their order.

    Each field is first checked alone (the config's other fields at `context` or their defaults), so its message
    is its own; when every field passes alone, they are checked together, and a refusal that only the combination
    earns (warmup_steps above steps) goes to the field the message starts with. `names` maps a field to the
    config's name for it where the two differ (the form's learning_rate is the config's lr)."""
    names = dict(names or {})
    context = dict(context or {})
    problems = {}
    for field, value in values.items():
        if (message := _refusal(config_class, {**context, names.get(field, field): value})) is not None:
            problems[field] = message
    if not problems and values:
        combined = {**context, **{names.get(field, field): value for field, value in values.items()}}
        if (message := _refusal(config_class, combined)) is not None:
            problems[_field_named_by(message, list(values), names)] = message
    return problems


def _refusal(config_class: Callable[..., Any], values: dict[str, Any]) -> str | None:
    try:
        config_class(**values)
    except ValueError as error:
        return str(error)
    return None


def _field_named_by(message: str, fields: list[str], names: Mapping[str, str]) -> str:
    """The field the message is about: the one it starts with, else the first it names, else the first field."""
    for field in fields:
        if message.startswith(f"{names.get(field, field)} "):
            return field
    for field in fields:
        if re.search(rf"\b{re.escape(names.get(field, field))}\b", message):
            return field
    return fields[0]
