"""The configurations, frozen and validated: the model (`BertConfig`, the standard BERT `config.json` fields, plus
named presets) and a training run (`TrainingConfig`). Torch-free: a GUI or a CLI can build and check them cheaply.

The presets follow the BERT miniatures of Turc et al. 2019 ("Well-Read Students Learn Better"):
tiny L2/H128, mini L4/H256, small L4/H512, medium L8/H512, base L12/H768 (heads = H/64, FFN = 4H).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.files.atomic import write_json_atomic

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
MAX_LABELS = 1_000_000  # the most classes num_labels may claim (extreme multi-label sets reach ~670k)
# Upper bounds of the numeric settings whose huge values overflow somewhere (each check says where):
MAX_STEPS = 10**12  # the schedule divides by the step count as a float; 10^12 steps outlast any machine
MAX_EPOCHS = 1_000_000.0  # steps = epochs × steps per epoch must stay a finite count
MAX_VOCAB_SIZE = 1_000_000  # the largest BERT vocabularies hold ~250k tokens; the Rust trainer overflows far above
MAX_NUM_THREADS = 1024  # torch.set_num_threads overflows (or tries to start that many threads) beyond
MAX_INITIALIZER_RANGE = 1.0  # BERT draws weights with std 0.02; a std far above 1 overflows the first forward pass
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.manual_seed accepts
FLOAT32_TINY = 1.1754944e-38  # the smallest normal float32: a smaller adam_eps is 0 to the optimizer


class FrozenMapping(Mapping):
    """A read-only, hashable dict: lets a frozen config hold `id2label` and still compare and hash by value."""

    def __init__(self, values: Mapping) -> None:
        self._values = dict(values)

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self) -> Iterator:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(frozenset(self._values.items()))

    def __repr__(self) -> str:
        return repr(self._values)


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522  # WordPiece vocabulary size; the MLM decoder predicts over it
    hidden_size: int = 768  # width of every token vector in the residual stream
    num_hidden_layers: int = 12  # encoder layers
    num_attention_heads: int = 12  # heads per layer; each is hidden_size / num_attention_heads wide
    intermediate_size: int = 3072  # feed-forward inner width (4 × hidden in the paper)
    hidden_act: str = "gelu"  # feed-forward and MLM-transform activation ("gelu" is the exact erf form)
    hidden_dropout_prob: float = 0.1  # dropout on embeddings and on every sublayer output
    attention_probs_dropout_prob: float = 0.1  # dropout on the attention probabilities
    max_position_embeddings: int = 512  # learned positions: the longest input the model accepts
    type_vocab_size: int = 2  # segment embeddings: sentence A and sentence B
    layer_norm_eps: float = 1e-12  # LayerNorm epsilon (BERT uses 1e-12)
    initializer_range: float = 0.02  # std of the normal init of weights
    pad_token_id: int = 0  # id of [PAD]; its embedding is never trained
    # What the weights are, and the task fields transformers writes for fine-tuned models:
    architectures: tuple[str, ...] = ()  # the model class the weights belong to; each model sets it when built
    num_labels: int | None = None  # classes of a task head; None: len(id2label) if given, else 2 (as transformers)
    id2label: Mapping[int, str] | None = None  # class index -> name; None: LABEL_0, LABEL_1, ...
    label2id: Mapping[str, int] | None = None  # name -> class index; None: the inverse of id2label
    problem_type: str | None = None  # sequence-classification loss; None: inferred from the labels, as transformers
    classifier_dropout: float | None = None  # dropout before a classifier; None: hidden_dropout_prob

    def __post_init__(self) -> None:
        # Types first: a config.json may say `"hidden_size": 12.5`, `true` or `"x"` where a number belongs.
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("pad_token_id", self.pad_token_id, minimum=0)
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps", "initializer_range"):
            _check_number(name, getattr(self, name))
        if not isinstance(self.hidden_act, str):
            raise ValueError(f"hidden_act must be a string naming the activation (one of {', '.join(ACTIVATIONS)}), "
                             f"got {self.hidden_act!r} ({type(self.hidden_act).__name__})")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                f"{self.num_attention_heads}; choose a head count that divides it "
                f"(e.g. {_divisors_hint(self.hidden_size)})"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act {self.hidden_act!r} is not supported; use one of {', '.join(ACTIVATIONS)}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps must be positive, got {self.layer_norm_eps!r}")
        if not 0 <= self.initializer_range <= MAX_INITIALIZER_RANGE:
            raise ValueError(f"initializer_range is {self.initializer_range!r}; it is the std of the initial weights "
                             f"and must be in [0, {MAX_INITIALIZER_RANGE:g}] (BERT uses 0.02): a much wider draw "
                             "makes the activations overflow float32")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id {self.pad_token_id} is outside the vocabulary of {self.vocab_size}")
        self._normalise_task_fields()

    def _normalise_task_fields(self) -> None:
        """Fill num_labels / id2label / label2id from one another and store them immutably."""
        architectures = (self.architectures,) if isinstance(self.architectures, str) else self.architectures
        if architectures is None or not all(isinstance(name, str) for name in architectures):
            raise ValueError(f"architectures must be a list of class names such as ['BertForPreTraining'], "
                             f"got {self.architectures!r}")
        object.__setattr__(self, "architectures", tuple(architectures))
        num_labels = self.num_labels
        if self.id2label is None:
            num_labels = 2 if num_labels is None else num_labels
            if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
                raise ValueError(f"num_labels must be a positive integer, got {num_labels!r}")
            if num_labels > MAX_LABELS:  # a label name per class is made below: refuse before allocating them
                raise ValueError(f"num_labels is {num_labels}; at most {MAX_LABELS:,} classes are supported (is "
                                 "the config.json damaged?)")
            id2label = {index: f"LABEL_{index}" for index in range(num_labels)}
        else:
            id2label = _int_keyed(self.id2label)
            if sorted(id2label) != list(range(len(id2label))) or not id2label:
                raise ValueError(f"id2label must name the classes 0, 1, 2, ... in turn, got keys {sorted(id2label)}; "
                                 "number the labels from 0 without gaps")
            if num_labels is not None and num_labels != len(id2label):
                raise ValueError(f"num_labels is {num_labels} but id2label names {len(id2label)} labels "
                                 f"({', '.join(map(str, id2label.values()))}); give only one of them, "
                                 "or make them agree")
            num_labels = len(id2label)
        if self.label2id is None:
            label2id = {label: index for index, label in id2label.items()}
        elif isinstance(self.label2id, Mapping):
            label2id = {str(label): index for label, index in self.label2id.items()}
            if not all(isinstance(index, int) and 0 <= index < num_labels for index in label2id.values()):
                raise ValueError(f"label2id must map label names to class indices 0..{num_labels - 1}, "
                                 f"got {dict(self.label2id)!r}")
        else:
            raise ValueError(f"label2id must be a mapping of label name to class index, got {self.label2id!r}")
        object.__setattr__(self, "num_labels", num_labels)
        object.__setattr__(self, "id2label", FrozenMapping(id2label))
        object.__setattr__(self, "label2id", FrozenMapping(label2id))
        if self.problem_type is not None and self.problem_type not in PROBLEM_TYPES:
            raise ValueError(f"problem_type {self.problem_type!r} is not supported; use one of "
                             f"{', '.join(PROBLEM_TYPES)}, or leave it unset to infer it from the labels")
        if self.problem_type == "single_label_classification" and num_labels == 1:
            raise ValueError("problem_type 'single_label_classification' needs num_labels of 2 or more; "
                             "for a single output use problem_type 'regression'")
        if self.classifier_dropout is not None and not 0.0 <= self.classifier_dropout < 1.0:
            raise ValueError(f"classifier_dropout must be in [0, 1) or unset, got {self.classifier_dropout!r}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def replace(self, **changes: Any) -> BertConfig:
        """A copy with some fields changed; a new num_labels renames the labels LABEL_0.., new id2label sets the
        count (and label2id, unless given too)."""
        if "id2label" in changes:
            changes.setdefault("num_labels", None)
            changes.setdefault("label2id", None)
        elif changes.get("num_labels", self.num_labels) != self.num_labels:
            changes.update(id2label=None, label2id=changes.get("label2id"))
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The config.json fields, as transformers writes them (id2label's keys are strings in JSON)."""
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        del values["architectures"], values["num_labels"]  # num_labels is len(id2label), as in transformers
        values["id2label"] = {str(index): label for index, label in self.id2label.items()}
        values["label2id"] = dict(self.label2id)
        architectures = {"architectures": list(self.architectures)} if self.architectures else {}
        return {**architectures, "model_type": "bert", **values}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> BertConfig:
        """Keeps the fields BERT defines and ignores the rest (transformers adds many of its own)."""
        if values.get("model_type", "bert") != "bert":
            raise ValueError(f"model_type is {values['model_type']!r}; only BERT checkpoints ('bert') are supported")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                f"position_embedding_type {values['position_embedding_type']!r} is not supported; "
                "this BERT has learned absolute positions"
            )
        known = {field.name for field in dataclasses.fields(cls)}
        fields = {key: value for key, value in values.items() if key in known}
        if fields.get("id2label") is not None:
            fields.pop("num_labels", None)  # id2label decides, as in transformers
        if fields.get("architectures", ()) is None:
            fields["architectures"] = ()
        return cls(**fields)

    def to_json_file(self, path: str | Path) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_json_file(cls, path: str | Path) -> BertConfig:
        from bertcore.files.reading import CONFIG_JSON_LIMIT, read_json  # ValueError: a FIFO, a device, deep JSON

        path = Path(path)
        try:
            values = read_json(path, limit=CONFIG_JSON_LIMIT, what="a config.json")
        except FileNotFoundError:
            raise FileNotFoundError(f"{path} does not exist; a BERT checkpoint needs a config.json") from None
        if not isinstance(values, dict):
            raise ValueError(f"{path} holds a {type(values).__name__}, not a JSON object of config fields")
        return cls.from_dict(values)


def linear_schedule(step: int, *, lr: float, warmup_steps: int, total_steps: int) -> float:
    """Learning rate of 1-based `step`: linear warm-up to `lr` over `warmup_steps`, then linear decay to 0 at
    `total_steps` (BERT's schedule, for pretraining and fine-tuning alike)."""
    if step <= warmup_steps:
        return lr * step / max(1, warmup_steps)
    return lr * max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {kind}, got {value!r} ({type(value).__name__})")


def _check_at_most(name: str, value: float, maximum: float, why: str) -> None:
    if value > maximum:
        raise ValueError(f"{name} is {_shown_number(value)}; it must be at most {maximum:,g} ({why})")


def _shown_number(value: float) -> str:
    """A number for a message, even an int too long to print or to make a float of."""
    if isinstance(value, int) and abs(value) >= 10**15:
        return f"about 10^{int(value.bit_length() * math.log10(2))}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _check_task_option_numbers(options: Mapping[str, Any]) -> None:
    """The numeric task options (TASK_OPTIONS) have the right kind of number; their ranges against seq_len are
    checked where the data is read (bertcore.tasks.squad.check_qa_lengths)."""
    for name, minimum in (("max_query_length", 1), ("doc_stride", 0), ("max_answer_length", 1)):
        if options.get(name) is not None:
            _check_int(name, options[name], minimum=minimum)
    if options.get("null_score_diff_threshold") is not None:
        _check_number("null_score_diff_threshold", options["null_score_diff_threshold"])


def _check_number(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number (float), got {value!r} ({type(value).__name__})")


def _int_keyed(id2label: Any) -> dict[int, str]:
    """id2label with int keys: JSON writes them as strings ({"0": "NEGATIVE"})."""
    try:
        return {int(index): str(label) for index, label in id2label.items()}
    except (AttributeError, TypeError, ValueError):
        raise ValueError(f"id2label must map class indices to names, such as {{0: 'NEGATIVE', 1: 'POSITIVE'}}, "
                         f"got {id2label!r}") from None


def _divisors_hint(hidden_size: int) -> str:
    return ", ".join(str(d) for d in range(1, min(hidden_size, 16) + 1) if hidden_size % d == 0)


def _miniature(layers: int, hidden: int) -> BertConfig:
    return BertConfig(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        intermediate_size=4 * hidden,
    )


PRESETS: dict[str, BertConfig] = {
    "tiny": _miniature(2, 128),
    "mini": _miniature(4, 256),
    "small": _miniature(4, 512),
    "medium": _miniature(8, 512),
    "base": _miniature(12, 768),
}


def preset(name: str, **overrides: Any) -> BertConfig:
    """A named BERT miniature, optionally with some fields changed (e.g. `vocab_size=8000`)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name].replace(**overrides)


@dataclass(frozen=True)
class TrainingConfig:
    corpus: str = ""  # a .txt file or a folder of them; "" = the built-in Tiny Shakespeare
    out_dir: str = "runs/bert"  # run folder: run_config.json, metrics.jsonl, checkpoints/, final/
    preset: str = "mini"  # model size (bertcore.config.PRESETS); ignored when init_from is set
    vocab: str | None = None  # reuse this vocab.txt; None = train a WordPiece vocabulary on the corpus
    vocab_size: int = 8000  # size of the vocabulary trained when vocab is None
    init_from: str | None = None  # a checkpoint folder to train further (its weights, config and vocabulary)
    steps: int = 1000  # optimisation steps in total
    batch_size: int = 32  # sequences per step per process
    seq_len: int = 128  # longest sequence, [CLS]/[SEP] included; batches are padded only to their longest
    lr: float = 5e-4  # peak learning rate, reached after warm-up
    warmup_steps: int | None = None  # linear warm-up; None = 10% of steps; then linear decay to 0
    weight_decay: float = 0.01  # AdamW decoupled decay, not applied to biases and LayerNorm
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0  # global gradient-norm clipping; 0 = off
    seed: int = 0  # model init, held-out split, batches, masks and dropout all derive from it
    device: str = "auto"  # "auto" (CUDA, then MPS, then CPU), "cpu", "cuda", "cuda:1", "mps"
    precision: str = "auto"  # "auto" (bf16 autocast on CUDA when supported, else fp32), "fp32", "bf16"
    mlm_probability: float = 0.15  # fraction of tokens picked for the MLM loss
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

    def __post_init__(self) -> None:
        for name in ("vocab_size", "steps", "batch_size", "seq_len", "eval_batches", "keep_checkpoints",
                     "length_buckets"):
            _check_int(name, getattr(self, name), minimum=1)
        for name in ("eval_every", "checkpoint_every"):  # 0 = only at the end
            _check_int(name, getattr(self, name), minimum=0)
        if self.warmup_steps is not None:
            _check_int("warmup_steps", self.warmup_steps, minimum=0)
        _check_at_most("steps", self.steps, MAX_STEPS, "the learning-rate schedule divides by it as a float")
        _check_at_most("vocab_size", self.vocab_size, MAX_VOCAB_SIZE,
                       "the largest BERT vocabularies hold about 250,000 tokens")
        if self.seq_len < 8:
            raise ValueError(f"seq_len is {self.seq_len}; it must be at least 8 to hold [CLS] A [SEP] B [SEP]")
        if self.warmup_steps is not None and not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"warmup_steps is {self.warmup_steps}; it must be between 0 and steps ({self.steps})")
        _check_loop_settings(self, lr_hint="BERT-mini likes about 5e-4")
        if not (0 < self.mlm_probability < 1):
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability!r}")
        if not (0 <= self.short_seq_prob <= 1):
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob!r}")
        if not (0 <= self.heldout_fraction < 1):
            raise ValueError(f"heldout_fraction must be in [0, 1), got {self.heldout_fraction!r}")

    @property
    def resolved_warmup_steps(self) -> int:
        return self.steps // 10 if self.warmup_steps is None else self.warmup_steps

    def learning_rate(self, step: int) -> float:
        """Learning rate of 1-based step `step`: linear warm-up to lr, then linear decay to 0 at `steps`."""
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


def _check_loop_settings(config, *, lr_hint: str) -> None:
    """The settings every training loop reads (bertcore.training.loop), checked alike for every kind of run."""
    if not (isinstance(config.lr, int | float) and math.isfinite(config.lr) and config.lr > 0):
        raise ValueError(f"lr must be a positive number, got {config.lr!r} ({lr_hint})")
    # (No upper bound on lr: a far too high one is what the loop's NaN and divergence messages name, rightly.)
    for name in ("weight_decay", "max_grad_norm"):
        _check_number(name, getattr(config, name))
        if getattr(config, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(config, name)!r}"
                             + (" (0 = no clipping)" if name == "max_grad_norm" else " (0 = no decay)"))
    if config.weight_decay > 1 and config.lr * config.weight_decay >= 1:
        # AdamW's decoupled decay multiplies each decayed weight by (1 - lr × weight_decay) every step: at or past
        # 1 the weights are zeroed or flip sign, past 2 they grow geometrically and overflow. (A weight_decay of 1
        # or less is only pushed there by an lr of 1 or more, which the loop's messages name.)
        factor = 1 - config.lr * config.weight_decay
        damage = "overflow" if factor < -1 else "are zeroed or flip sign every step"
        raise ValueError(
            f"weight_decay is {config.weight_decay:g}, but AdamW multiplies every decayed weight by "
            f"1 - lr × weight_decay = {factor:.3g} each step (lr {config.lr:g}), so the weights {damage}; with this "
            f"lr weight_decay must be in [0, {1 / config.lr:,.4g}) (below 1/lr; usual values are 0.01 to 0.1)"
        )
    betas = config.adam_betas
    if (not isinstance(betas, tuple | list) or len(betas) != 2
            or not all(isinstance(b, int | float) and not isinstance(b, bool) and 0 <= b < 1 for b in betas)):
        raise ValueError(f"adam_betas must be two numbers in [0, 1), such as (0.9, 0.999), got {betas!r}: Adam "
                         "divides by 1 - beta^step, which is 0 for a beta of 1")
    _check_number("adam_eps", config.adam_eps)
    if config.adam_eps < FLOAT32_TINY:
        raise ValueError(f"adam_eps is {config.adam_eps!r}; it must be at least {FLOAT32_TINY:.3g} (usual: 1e-8 to "
                         "1e-6): Adam divides by sqrt(v) + eps, and where a weight's gradient is 0 a smaller eps "
                         "(0 in float32) gives 0/0 = NaN")
    if isinstance(config.seed, bool) or not isinstance(config.seed, int) \
            or not SEED_RANGE[0] <= config.seed <= SEED_RANGE[1]:
        raise ValueError(f"seed must be an integer from -2**63 to 2**64 - 1 (what torch.manual_seed takes), such "
                         f"as 0, got {config.seed!r}")
    if config.precision not in ("auto", "fp32", "bf16"):
        raise ValueError(f"precision {config.precision!r} is not one of auto, fp32, bf16")
    if config.num_threads is not None:
        _check_int("num_threads", config.num_threads, minimum=1)
        _check_at_most("num_threads", config.num_threads, MAX_NUM_THREADS,
                       "torch.set_num_threads overflows or starts that many threads")
    _check_number("divergence_factor", config.divergence_factor)
    if not (config.divergence_factor == 0 or config.divergence_factor > 1):
        raise ValueError(f"divergence_factor must be 0 (off) or a number above 1 (e.g. 4), got "
                         f"{config.divergence_factor!r}; a factor of 1 or less would stop a healthy run")
    _check_int("divergence_patience", config.divergence_patience, minimum=1)
    object.__setattr__(config, "adam_betas", tuple(float(b) for b in config.adam_betas))


FINETUNE_TASKS = ("sequence", "token", "qa")
# Options of the task's data (bertcore.tasks.finetune_data.load_finetuning_data), by task.
TASK_OPTIONS = {
    "sequence": ("format", "problem_type", "text_column", "text_b_column", "label_column"),
    "token": ("format", "tokens_field", "tags_field"),
    "qa": ("max_query_length", "doc_stride", "max_answer_length", "null_score_diff_threshold", "allow_no_answer"),
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
    warmup_steps: int | None = None  # linear warm-up; None = 10% of steps; then linear decay to 0
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
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("checkpoint_every", self.checkpoint_every, minimum=0)
        for name in ("steps", "eval_every", "warmup_steps"):
            if getattr(self, name) is not None:
                _check_int(name, getattr(self, name), minimum=1 if name == "steps" else 0)
        _check_number("epochs", self.epochs)
        if self.epochs <= 0:
            raise ValueError(f"epochs must be above 0, got {self.epochs!r}; or give steps")
        _check_at_most("epochs", self.epochs, MAX_EPOCHS, "steps = epochs × steps per epoch must stay a finite count")
        for name in ("steps", "warmup_steps"):
            if getattr(self, name) is not None:
                _check_at_most(name, getattr(self, name), MAX_STEPS, "the learning-rate schedule divides by it as "
                               "a float")
        if self.seq_len < 8:
            raise ValueError(f"seq_len is {self.seq_len}; it must be at least 8 to hold [CLS] A [SEP] B [SEP]")
        if self.warmup_steps is not None and self.steps is not None and self.warmup_steps > self.steps:
            raise ValueError(f"warmup_steps is {self.warmup_steps}; it must be between 0 and steps ({self.steps})")
        if not (0 < self.heldout_fraction < 1):
            raise ValueError(f"heldout_fraction must be in (0, 1), got {self.heldout_fraction!r}")
        _check_loop_settings(self, lr_hint="2e-4 suits the small default model, 2e-5..5e-5 BERT-base")
        if self.demo is not None and self.demo not in DEMO_SETTINGS:
            raise ValueError(f"there is no demo task {self.demo!r}; the demo tasks are {', '.join(DEMO_SETTINGS)}")
        if self.task is not None and self.task not in FINETUNE_TASKS:
            raise ValueError(f"task {self.task!r} is not one of {', '.join(FINETUNE_TASKS)} (sequence: a label per "
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
        from bertcore.tasks.demos import demo_task

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
