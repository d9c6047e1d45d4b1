"""ModernBERT's config: the fields of its config.json with a one-line reason each, their checks, and the
translation to and from transformers' spellings (the two RoPE bases, per-layer attention kinds)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertcore.checks import check_int, check_number
from bertcore.files.atomic import write_json_atomic
from bertcore.models.bert import ACTIVATION_FUNCTIONS, IGNORE_INDEX
from bertcore.models.config import BertConfig

GLOBAL_ATTENTION = "full_attention"  # transformers' names of the two layer kinds, as config.json spells them
LOCAL_ATTENTION = "sliding_attention"
LAYER_TYPES = (GLOBAL_ATTENTION, LOCAL_ATTENTION)


@dataclass(frozen=True)
class ModernBertConfig:
    vocab_size: int = 50368  # the OLMo BPE vocabulary, padded to a multiple of 64
    hidden_size: int = 768  # width of every token vector in the residual stream
    intermediate_size: int = 1152  # width of each GeGLU half (Wi makes 2 × this)
    num_hidden_layers: int = 22  # encoder layers
    num_attention_heads: int = 12  # heads per layer; head_dim = hidden_size / heads, even for RoPE
    hidden_activation: str = "gelu"  # the GeGLU's activation, applied to the first half of Wi's output
    max_position_embeddings: int = 8192  # the longest input trained on; RoPE itself has no table to outgrow
    initializer_range: float = 0.02  # std of the truncated normal init of the input projections
    initializer_cutoff_factor: float = 2.0  # the init is truncated at ± this many std
    norm_eps: float = 1e-5  # LayerNorm epsilon
    norm_bias: bool = False  # LayerNorms without a bias
    pad_token_id: int = 50283  # id of [PAD]; its embedding is never trained
    eos_token_id: int = 50282
    bos_token_id: int = 50281
    cls_token_id: int = 50281  # [CLS] opens every sequence
    sep_token_id: int = 50282  # [SEP] closes each segment
    attention_bias: bool = False  # biases on Wqkv and the attention's Wo
    attention_dropout: float = 0.0  # dropout on the attention probabilities and on the attention output
    global_rope_theta: float = 160_000.0  # RoPE base of the global layers: slow rotations for long distances
    local_rope_theta: float = 10_000.0  # RoPE base of the local layers
    local_attention: int = 128  # the local layers' window: a token sees local_attention // 2 positions each side
    global_attn_every_n_layers: int = 3  # layers 0, n, 2n, ... attend globally (when layer_types is not given)
    layer_types: tuple[str, ...] | None = None  # per layer "full_attention" or "sliding_attention"; None: from n
    embedding_dropout: float = 0.0  # dropout after the embedding norm
    mlp_bias: bool = False  # biases on Wi and the feed-forward's Wo
    mlp_dropout: float = 0.0  # dropout between the GeGLU and Wo
    decoder_bias: bool = True  # the MLM decoder's own output bias
    classifier_pooling: str = "cls"  # a sequence classifier reads [CLS] ("cls") or the mean of the real tokens
    classifier_dropout: float = 0.0  # dropout before a classifier
    classifier_bias: bool = False  # bias on the prediction head's dense layer
    classifier_activation: str = "gelu"  # the prediction head's activation
    tie_word_embeddings: bool = True  # the MLM decoder shares tok_embeddings' matrix
    sparse_prediction: bool = False  # with labels, the head and decoder run on the labelled positions only
    sparse_pred_ignore_index: int = IGNORE_INDEX  # the label of positions that take no part in the MLM loss
    architectures: tuple[str, ...] = ()  # the model class the weights belong to; each model sets it when built
    # The task fields transformers writes for fine-tuned models, read and checked as BertConfig's:
    num_labels: int | None = None  # classes of a task head; None: len(id2label) if given, else 2
    id2label: Mapping[int, str] | None = None  # class index -> name; None: LABEL_0, LABEL_1, ...
    label2id: Mapping[str, int] | None = None  # name -> class index; None: the inverse of id2label
    problem_type: str | None = None  # sequence-classification loss; None: inferred from the labels

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "max_position_embeddings", "local_attention", "global_attn_every_n_layers"):
            check_int(name, getattr(self, name), minimum=1)
        if isinstance(self.sparse_pred_ignore_index, bool) or not isinstance(self.sparse_pred_ignore_index, int):
            raise ValueError(f"sparse_pred_ignore_index must be an integer label (-100 in transformers), got "
                             f"{self.sparse_pred_ignore_index!r}")
        for name in ("pad_token_id", "eos_token_id", "bos_token_id", "cls_token_id", "sep_token_id"):
            check_int(name, getattr(self, name), minimum=0)
            if getattr(self, name) >= self.vocab_size:
                raise ValueError(f"{name} {getattr(self, name)} is outside the vocabulary of {self.vocab_size}; "
                                 "the special ids must be token ids of the model")
        for name in ("initializer_range", "initializer_cutoff_factor", "norm_eps", "global_rope_theta",
                     "local_rope_theta", "attention_dropout", "embedding_dropout", "mlp_dropout",
                     "classifier_dropout"):
            check_number(name, getattr(self, name))
        for name in ("norm_eps", "global_rope_theta", "local_rope_theta", "initializer_cutoff_factor"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        for name in ("attention_dropout", "embedding_dropout", "mlp_dropout", "classifier_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        for name in ("norm_bias", "attention_bias", "mlp_bias", "decoder_bias", "classifier_bias",
                     "tie_word_embeddings", "sparse_prediction"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("hidden_activation", "classifier_activation"):
            if getattr(self, name) not in ACTIVATION_FUNCTIONS:
                raise ValueError(f"{name} {getattr(self, name)!r} is not supported; use one of "
                                 f"{', '.join(ACTIVATION_FUNCTIONS)}")
        if self.classifier_pooling not in ("cls", "mean"):
            raise ValueError(f"classifier_pooling {self.classifier_pooling!r} is not supported; use 'cls' or 'mean'")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                             f"{self.num_attention_heads}; choose a head count that divides it")
        if self.head_dim % 2:
            raise ValueError(f"each head is {self.head_dim} wide (hidden_size {self.hidden_size} / "
                             f"{self.num_attention_heads} heads); RoPE rotates pairs of dimensions, so the head "
                             "width must be even: change the head count or the hidden size")
        layer_types = self.layer_types
        if layer_types is None:
            every = self.global_attn_every_n_layers
            layer_types = [LOCAL_ATTENTION if index % every else GLOBAL_ATTENTION
                           for index in range(self.num_hidden_layers)]
        if isinstance(layer_types, str) or not all(kind in LAYER_TYPES for kind in layer_types):
            raise ValueError(f"layer_types must list 'full_attention' or 'sliding_attention' for each layer, "
                             f"got {self.layer_types!r}")
        if len(layer_types) != self.num_hidden_layers:
            raise ValueError(f"layer_types names {len(layer_types)} layers but num_hidden_layers is "
                             f"{self.num_hidden_layers}; give one kind per layer")
        object.__setattr__(self, "layer_types", tuple(layer_types))
        BertConfig._normalise_task_fields(self)  # architectures, labels, problem_type: one rule for every family

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def sliding_window(self) -> int:
        """How far a local layer's token sees to each side (inclusive): half of local_attention."""
        return self.local_attention // 2

    def local_layers(self) -> tuple[int, ...]:
        """The indices of the layers that attend within the sliding window."""
        return tuple(index for index, kind in enumerate(self.layer_types) if kind == LOCAL_ATTENTION)

    def replace(self, **changes: Any) -> ModernBertConfig:
        if "num_hidden_layers" in changes or "global_attn_every_n_layers" in changes:
            changes.setdefault("layer_types", None)  # derived from the new count, unless given
        return BertConfig.replace(self, **changes)  # new labels rename the classes as BERT's do

    def to_dict(self) -> dict[str, Any]:
        """The config.json fields: transformers reads both the θ pair and its newer `rope_parameters`."""
        values = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        values["layer_types"] = list(self.layer_types)
        architectures = values.pop("architectures")
        del values["num_labels"]  # len(id2label), as transformers writes it
        values["id2label"] = {str(index): label for index, label in self.id2label.items()}
        values["label2id"] = dict(self.label2id)
        values["rope_parameters"] = {
            GLOBAL_ATTENTION: {"rope_type": "default", "rope_theta": self.global_rope_theta},
            LOCAL_ATTENTION: {"rope_type": "default", "rope_theta": self.local_rope_theta},
        }
        return {**({"architectures": list(architectures)} if architectures else {}), "model_type": "modernbert",
                **values}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModernBertConfig:
        """Keeps the fields ModernBERT defines and ignores the rest; reads RoPE bases from either spelling."""
        if values.get("model_type", "modernbert") != "modernbert":
            raise ValueError(f"model_type is {values['model_type']!r}; this is the ModernBERT config ('modernbert')")
        known = {field.name for field in dataclasses.fields(cls)}
        fields = {key: value for key, value in values.items() if key in known and value is not None}
        rope = values.get("rope_parameters") or {}
        for kind, name in ((GLOBAL_ATTENTION, "global_rope_theta"), (LOCAL_ATTENTION, "local_rope_theta")):
            parameters = rope.get(kind) or {}
            if parameters.get("rope_type", "default") != "default":
                raise ValueError(f"rope_parameters[{kind!r}] uses rope_type {parameters['rope_type']!r}; only the "
                                 "plain ('default') RoPE of the released ModernBERT models is supported")
            if "rope_theta" in parameters:
                fields[name] = parameters["rope_theta"]
        if values.get("rope_scaling"):
            raise ValueError(f"rope_scaling {values['rope_scaling']!r} is not supported; only the plain RoPE of the "
                             "released ModernBERT models is")
        if "layer_types" in fields:
            fields["layer_types"] = tuple(fields["layer_types"])
        if fields.get("id2label") is not None:
            fields.pop("num_labels", None)  # id2label decides, as in transformers
        return cls(**fields)

    def to_json_file(self, path: str | Path) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_json_file(cls, path: str | Path) -> ModernBertConfig:
        from bertcore.files.reading import CONFIG_JSON_LIMIT, read_json  # ValueError: a FIFO, a device, deep JSON

        values = read_json(Path(path), limit=CONFIG_JSON_LIMIT, what="a config.json")
        if not isinstance(values, dict):
            raise ValueError(f"{path} holds a {type(values).__name__}, not a JSON object of config fields")
        return cls.from_dict(values)
