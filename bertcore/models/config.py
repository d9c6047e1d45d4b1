"""The model's configuration, frozen and validated: `BertConfig` (the standard BERT `config.json` fields) and
named presets. Torch-free: a GUI or a CLI can build and check one cheaply.

The presets follow the BERT miniatures of Turc et al. 2019 ("Well-Read Students Learn Better"):
tiny L2/H128, mini L4/H256, small L4/H512, medium L8/H512, base L12/H768 (heads = H/64, FFN = 4H).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.checks import check_int, check_number
from bertcore.files.atomic import write_json_atomic

ACTIVATIONS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "relu", "silu")
PROBLEM_TYPES = ("regression", "single_label_classification", "multi_label_classification")
MAX_LABELS = 1_000_000  # the most classes num_labels may claim (extreme multi-label sets reach ~670k)
MAX_VOCAB_SIZE = 1_000_000  # the largest BERT vocabularies hold ~250k tokens; the Rust trainer overflows far above
MAX_INITIALIZER_RANGE = 1.0  # BERT draws weights with std 0.02; a std far above 1 overflows the first forward pass


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
            check_int(name, getattr(self, name), minimum=1)
        check_int("pad_token_id", self.pad_token_id, minimum=0)
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob", "layer_norm_eps", "initializer_range"):
            check_number(name, getattr(self, name))
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
