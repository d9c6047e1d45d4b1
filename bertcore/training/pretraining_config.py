"""A pretraining run's configuration (`TrainingConfig`), frozen and validated. Torch-free."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bertcore.checks import check_at_most, check_int, check_number
from bertcore.data.masking_recipes import check_recipe
from bertcore.models.config import MAX_VOCAB_SIZE
from bertcore.training.loop_settings import MAX_STEPS, check_loop_settings, linear_schedule

# Objective -> the family whose recipe it is (its architecture when --arch is not given): BERT's masked LM and
# next-sentence prediction, RoBERTa's masked LM on full sentences, ALBERT's masked LM and sentence-order
# prediction, ELECTRA's replaced-token detection (bertcore.training.objectives says what each trains on).
OBJECTIVES = {"mlm+nsp": "bert", "mlm": "roberta", "mlm+sop": "albert", "rtd": "electra"}
ARCHITECTURES = ("bert", "roberta", "distilbert", "electra", "albert", "modernbert")


def new_model_family(arch: str | None, objective: str | None) -> str:
    """A new model's family: `arch`, else `objective`'s own family, else bert."""
    return arch or OBJECTIVES[objective or "mlm+nsp"]


def new_model_objective(arch: str | None, objective: str | None) -> str:
    """A new model's objective: `objective`, else its family's own (bertcore.models.families)."""
    from bertcore.models.families import pretraining_objectives

    return objective or pretraining_objectives(new_model_family(arch, objective))[0]


@dataclass(frozen=True)
class TrainingConfig:
    corpus: str = ""  # a .txt, .txt.gz, .jsonl(.gz), .parquet or .arrow file or a folder of them; "" = Tiny Shakespeare
    out_dir: str = "runs/bert"  # run folder: run_config.json, metrics.jsonl, checkpoints/, final/
    preset: str = "mini"  # model size (bertcore.models.config.PRESETS); ignored when init_from is set
    vocab: str | None = None  # reuse this vocab.txt, tokenizer.json or tokenizer folder; None = train WordPiece
    vocab_size: int = 8000  # size of the vocabulary trained when vocab is None
    init_from: str | None = None  # a checkpoint folder to train further (its weights, config and vocabulary)
    steps: int = 1000  # optimisation steps in total
    batch_size: int = 32  # sequences per step per process
    seq_len: int = 128  # longest sequence, [CLS]/[SEP] included; batches are padded only to their longest
    lr: float = 5e-4  # peak learning rate, reached after warm-up
    warmup_steps: int | None = None  # linear warm-up; None = 10% of steps; then linear decay (linear_schedule)
    weight_decay: float = 0.01  # AdamW decoupled decay, not applied to biases and LayerNorm
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0  # global gradient-norm clipping; 0 = off
    seed: int = 0  # model init, held-out split, batches, masks and dropout all derive from it
    device: str = "auto"  # "auto" (CUDA, then MPS, then CPU), "cpu", "cuda", "cuda:1", "mps"
    precision: str = "auto"  # "auto" (bf16 autocast on CUDA when supported, else fp32), "fp32", "bf16"
    mlm_probability: float = 0.15  # fraction of tokens picked for the MLM loss (the budget of every recipe)
    masking: str = "token"  # what is picked (bertcore.data.masking): "token" (BERT), "whole-word", "span" (SpanBERT)
    short_seq_prob: float = 0.1  # fraction of examples with a shorter random target length (as the paper)
    length_buckets: int = 8  # batches cut from a length-sorted pool of this many (less padding); 1 = off
    heldout_fraction: float = 0.02  # documents kept out of training for the held-out metrics
    eval_every: int = 100  # held-out evaluation every N steps (and at the end); 0 = only at the end
    eval_batches: int = 4  # held-out batches per evaluation (a fixed set)
    checkpoint_every: int = 500  # checkpoint every N steps (and at the end / on stop); 0 = only those
    keep_checkpoints: int = 2  # newest step-* folders kept (older ones are deleted)
    compile: bool = False  # torch.compile the model (slow first step; mostly useful on GPUs)
    num_threads: int | None = None  # torch.set_num_threads for this process; None = leave as is
    # Stop a run whose loss explodes without becoming NaN (see bertcore.training.divergence): when the smoothed loss
    # stays this many times above its best value so far for divergence_patience steps in a row. 0 = never stop.
    divergence_factor: float = 4.0
    divergence_patience: int = 10
    # The corpus's preparation (bertcore.data.prepare): prepared once into memory-mapped token ids, cached.
    text_field: str = "text"  # the text field of .jsonl records / column of Parquet and Arrow tables
    vocab_sample: int = 32_000_000  # characters drawn evenly from the corpus to train a vocabulary on
    data_cache: str | None = None  # folder of prepared corpora; None = $XDG_CACHE_HOME/bert-explorer/corpora
    # What the model learns and which family it is (see resolved_objective / resolved_arch): None = the other's own
    # (both None: BERT's mlm+nsp on a BERT). init_from's folder decides the family itself.
    objective: str | None = None  # "mlm+nsp", "mlm", "mlm+sop" or "rtd" (OBJECTIVES)
    arch: str | None = None  # a new model's family: "bert", "roberta", "distilbert", "electra", "albert", "modernbert"
    generator_width: float = 0.25  # rtd: the generator's hidden size, heads and FFN as a share of the discriminator's
    discriminator_weight: float = 50.0  # rtd: loss = generator MLM loss + this × discriminator loss (the paper's 50)

    def __post_init__(self) -> None:
        for name in ("vocab_size", "steps", "batch_size", "seq_len", "eval_batches", "keep_checkpoints",
                     "length_buckets", "vocab_sample"):
            check_int(name, getattr(self, name), minimum=1)
        for name in ("eval_every", "checkpoint_every"):  # 0 = only at the end
            check_int(name, getattr(self, name), minimum=0)
        if self.warmup_steps is not None:
            check_int("warmup_steps", self.warmup_steps, minimum=0)
        check_at_most("steps", self.steps, MAX_STEPS, "the learning-rate schedule divides by it as a float")
        check_at_most("vocab_size", self.vocab_size, MAX_VOCAB_SIZE,
                       "the largest BERT vocabularies hold about 250,000 tokens")
        if self.seq_len < 8:
            raise ValueError(f"seq_len is {self.seq_len}; it must be at least 8 to hold [CLS] A [SEP] B [SEP]")
        if self.warmup_steps is not None and not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"warmup_steps is {self.warmup_steps}; it must be between 0 and steps ({self.steps})")
        check_loop_settings(self, lr_hint="BERT-mini likes about 5e-4")
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
        from bertcore.models.families import pretraining_objectives

        if self.objective is not None and self.objective not in OBJECTIVES:
            raise ValueError(f"objective {self.objective!r} is unknown; choose one of {', '.join(OBJECTIVES)} "
                             "(mlm+nsp is BERT's, mlm RoBERTa's, mlm+sop ALBERT's, rtd ELECTRA's)")
        if self.arch is not None and self.arch not in ARCHITECTURES:
            raise ValueError(f"arch {self.arch!r} is unknown; choose one of {', '.join(ARCHITECTURES)}")
        if self.arch is not None and self.init_from:
            raise ValueError(f"arch {self.arch!r} builds a new model, but init_from continues {self.init_from}, whose "
                             "family its config.json says; leave out --arch (or --init-from)")
        if self.arch is not None and self.objective is not None:
            supported = pretraining_objectives(self.arch)
            if self.objective not in supported:
                raise ValueError(f"objective {self.objective} needs a model with its head, and a {self.arch} has "
                                 f"none: {self.arch} supports {' and '.join(supported)}. Use --objective "
                                 f"{supported[0]}, or --arch {OBJECTIVES[self.objective]} for {self.objective}")
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

    def replace(self, **changes: Any) -> TrainingConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["adam_betas"] = list(self.adam_betas)
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainingConfig:
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in values.items() if key in known})
