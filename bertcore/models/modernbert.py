"""ModernBERT (Warner et al. 2024, "Smarter, Better, Faster, Longer"), whole, in reading order, like every family:
its config, its model, its fine-tuning heads.

What changed since BERT, each in one place below: no position embeddings but rotary ones (RoPE) applied to the
queries and keys, with a large base θ on the global layers and a small one on the local layers; every third layer
(by default) attends globally, the others only to keys within ±local_attention/2 positions (a sliding window);
pre-LayerNorm without biases, the first layer's attention norm left out because the embeddings were just
normalised; a fused query/key/value projection `Wqkv`; a gated GELU feed-forward (GeGLU, `Wi` makes both halves);
a final LayerNorm; no segment embeddings, pooler or NSP head.

Class and parameter names are those of transformers' `modeling_modernbert.py`, so its `state_dict`s load as they
are: the config (the fields of its config.json with a one-line reason each, their checks, and the translation to
and from transformers' spellings: the two RoPE bases, per-layer attention kinds) -> embeddings -> rotary embedding
-> attention -> feed-forward -> layer -> ModernBertModel -> MLM head -> ModernBertForMaskedLM -> the fine-tuning
heads (sequence classification with [CLS] or mean pooling, token classification, question answering: each the
prediction head, dropout and a `classifier` over ModernBertModel; the task logic they share with every family is in
`bertcore.models.task_heads`).
As in `bertcore.models.bert`, attention probabilities are materialised only when the caller asks for them
(`output_attentions=True`); otherwise the fused `scaled_dot_product_attention` kernel runs, with the window given
to it as a mask. For training, `skip_padding` (taken by the masked-LM model with
`sparse_prediction` labels) runs the dense layers on the real tokens only, in the spirit of the paper's unpadding;
attention itself still runs on the padded (B, T) grid (no varlen kernel).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.checks import check_int, check_number
from bertcore.files.atomic import write_json_atomic
from bertcore.models.config import BertConfig
from bertcore.models.parts import (
    ACTIVATION_FUNCTIONS,
    IGNORE_INDEX,
    ModelHeads,
    PretrainingHeads,
    TokenRows,
    check_inputs,
)
from bertcore.models.task_heads import (
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    split_span_logits,
)

# ---- the config

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


# ---- the model

class ModernBertEmbeddings(nn.Module):
    """Token embeddings, LayerNorm, dropout: positions enter later, as rotations of queries and keys."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.tok_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.drop = nn.Dropout(config.embedding_dropout)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.norm(self.tok_embeddings(input_ids)))  # (B, T, D)


class ModernBertRotaryEmbedding(nn.Module):
    """cos and sin of each position's rotation angles for one RoPE base; no weights, nothing in the state_dict."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.head_dim = config.head_dim

    def forward(self, seq_len: int, theta: float, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        # Frequency of pair i: theta^(-2i / hs); computed in float32 whatever the model's dtype, as the reference.
        inverse_frequency = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float) / self.head_dim))
        positions = torch.arange(seq_len, device=device, dtype=torch.float)
        angles = positions[:, None] * inverse_frequency.to(device)  # (T, hs/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, hs): dims i and i + hs/2 form a rotated pair
        return angles.cos(), angles.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension: a 90° turn of every pair."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate (B, nh, T, hs) queries or keys by their positions' angles, in float32."""
    rotated = x.float() * cos + rotate_half(x.float()) * sin
    return rotated.to(x.dtype)


class ModernBertAttention(nn.Module):
    """Multi-head attention with RoPE; on a local layer, each query sees only keys within the window."""

    def __init__(self, config: ModernBertConfig, layer_index: int):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.is_local = config.layer_types[layer_index] == LOCAL_ATTENTION
        self.Wqkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=config.attention_bias)
        self.Wo = nn.Linear(config.hidden_size, config.hidden_size, bias=config.attention_bias)
        self.dropout_prob = config.attention_dropout
        self.out_drop = nn.Dropout(config.attention_dropout)

    def forward(
        self,
        hidden_states: torch.Tensor,
        rows: TokenRows,
        cos_sin: tuple[torch.Tensor, torch.Tensor],
        attention_bias: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states (N, D) placed on the (B, T) grid by `rows`; attention_bias (B or 1, 1, T, T) of 0 and
        -max (left out), or None. Returns the output (N, D) and, if asked, the probabilities (B, nh, T, T)."""
        batch_size, seq_len = rows.batch_size, rows.seq_len
        qkv = rows.pad(self.Wqkv(hidden_states)).view(batch_size, seq_len, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, nh, T, hs)
        cos, sin = cos_sin
        query, key = apply_rotary(query, cos, sin), apply_rotary(key, cos, sin)
        attention_probs = None
        if output_attentions:
            # The explicit path: the caller wants to see the probabilities.
            # Scaling the (T, hs) queries rather than the (T, T) scores, and adding the bias in place, saves two
            # passes over the largest tensor of the layer.
            scores = (query * self.head_dim ** -0.5) @ key.transpose(-2, -1)  # (B, nh, T, T)
            if attention_bias is not None:
                scores += attention_bias
            attention_probs = scores.softmax(dim=-1, dtype=torch.float32).to(query.dtype)
            if head_mask is not None:
                attention_probs = attention_probs * head_mask  # what an ablated head contributes: nothing
            context = F.dropout(attention_probs, self.dropout_prob, self.training) @ value  # (B, nh, T, hs)
        else:
            context = F.scaled_dot_product_attention(
                query, key, value,
                attn_mask=attention_bias,
                dropout_p=self.dropout_prob if self.training else 0.0,
            )  # (B, nh, T, hs)
            if head_mask is not None:
                context = context * head_mask  # scaling a head's probabilities scales its output alike
        context = rows.unpad(context.transpose(1, 2).reshape(batch_size, seq_len, -1))  # (N, D)
        return self.out_drop(self.Wo(context)), attention_probs


class ModernBertMLP(nn.Module):
    """GeGLU: Wi makes an input half and a gate half; act(input) * gate goes back through Wo."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.Wi = nn.Linear(config.hidden_size, 2 * config.intermediate_size, bias=config.mlp_bias)
        self.act = ACTIVATION_FUNCTIONS[config.hidden_activation]
        self.drop = nn.Dropout(config.mlp_dropout)
        self.Wo = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.mlp_bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        inputs, gate = self.Wi(hidden_states).chunk(2, dim=-1)  # each (B, T, intermediate_size)
        return self.Wo(self.drop(self.act(inputs) * gate))


class ModernBertEncoderLayer(nn.Module):
    """Pre-LN: x + attn(attn_norm(x)), then x + mlp(mlp_norm(x))."""

    def __init__(self, config: ModernBertConfig, layer_index: int):
        super().__init__()
        # Layer 0 reads the embeddings, which were just normalised: a second LayerNorm would add nothing.
        self.attn_norm = (nn.Identity() if layer_index == 0
                          else nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias))
        self.attn = ModernBertAttention(config, layer_index)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)
        self.mlp = ModernBertMLP(config)
        self.attention_type = config.layer_types[layer_index]

    def forward(self, hidden_states, rows, cos_sin, attention_bias, head_mask, output_attentions):
        attention_output, attention_probs = self.attn(
            self.attn_norm(hidden_states), rows, cos_sin, attention_bias, head_mask, output_attentions
        )
        hidden_states = hidden_states + attention_output
        hidden_states = hidden_states + self.mlp(self.mlp_norm(hidden_states))
        return hidden_states, attention_probs


@dataclass
class ModernBertModelOutput:
    last_hidden_state: torch.Tensor  # (B, T, D), after final_norm
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D): embeddings, each layer; the last normed
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T); zero outside a local layer's window


@dataclass
class ModernBertMaskedLMOutput:
    loss: torch.Tensor | None  # () mean cross-entropy over the labelled positions
    logits: torch.Tensor  # (B, T, V); (N_labelled, V) with labels when config.sparse_prediction
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D)
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


def attention_biases(
    config: ModernBertConfig, attention_mask: torch.Tensor | None, seq_len: int, dtype: torch.dtype,
    device: torch.device,
) -> dict[str, torch.Tensor | None]:
    """Per layer kind, an additive (B or 1, 1, T, T) bias: 0 where a query may attend, the dtype's lowest value
    where not (padding keys; on local layers, keys further than sliding_window). None where nothing is hidden.

    A row with nothing left (a padding query whose window holds only padding) becomes uniform over all keys, as
    in the reference; a float bias keeps the fused kernel from returning NaN there."""
    lowest = torch.finfo(dtype).min
    allowed = None
    if attention_mask is not None and not bool(attention_mask.all()):
        allowed = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    positions = torch.arange(seq_len, device=device)
    in_window = (positions[:, None] - positions[None, :]).abs() <= config.sliding_window  # (T, T)
    local_allowed = in_window[None, None] if allowed is None else allowed & in_window  # (B or 1, 1, T, T)

    def bias(mask: torch.Tensor | None) -> torch.Tensor | None:
        if mask is None or bool(mask.all()):
            return None
        return torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill_(~mask, lowest)

    return {GLOBAL_ATTENTION: bias(allowed), LOCAL_ATTENTION: bias(local_allowed)}


class ModernBertPreTrainedModel(ModelHeads, nn.Module):
    """What every model around a ModernBERT encoder shares: a config that names its class, weight init, size."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.config = config.replace(architectures=(type(self).__name__,))

    def _init_weights(self, module: nn.Module) -> None:
        """Truncated normals as the paper: inputs at initializer_range, outputs (Wo, head, decoder) scaled down
        by sqrt(2 × layers) so that the residual stream's variance does not grow with depth."""
        config = self.config
        std_in = config.initializer_range
        std_out = config.initializer_range / math.sqrt(2.0 * config.num_hidden_layers)

        def truncated_normal(layer: nn.Module, std: float) -> None:
            cutoff = config.initializer_cutoff_factor * std
            nn.init.trunc_normal_(layer.weight, mean=0.0, std=std, a=-cutoff, b=cutoff)
            if getattr(layer, "bias", None) is not None:
                nn.init.zeros_(layer.bias)

        if isinstance(module, ModernBertEmbeddings):
            truncated_normal(module.tok_embeddings, std_in)
        elif isinstance(module, (ModernBertMLP, ModernBertAttention)):
            truncated_normal(module.Wi if isinstance(module, ModernBertMLP) else module.Wqkv, std_in)
            truncated_normal(module.Wo, std_out)
        elif isinstance(module, ModernBertPredictionHead):
            truncated_normal(module.dense, std_out)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    def local_layers(self) -> tuple[int, ...]:
        """The indices of the layers that attend within the sliding window (the others attend globally)."""
        return self.config.local_layers()

    def num_parameters(self) -> int:
        return sum(parameter.numel() for parameter in self.parameters())  # tied tensors count once


class ModernBertModel(ModernBertPreTrainedModel):
    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.embeddings = ModernBertEmbeddings(self.config)
        self.layers = nn.ModuleList(ModernBertEncoderLayer(self.config, index)
                                    for index in range(self.config.num_hidden_layers))
        self.final_norm = nn.LayerNorm(self.config.hidden_size, eps=self.config.norm_eps, bias=self.config.norm_bias)
        self.rotary_emb = ModernBertRotaryEmbedding(self.config)
        if type(self) is ModernBertModel:
            self.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for BERT's callers; ModernBERT has no segments
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        skip_padding: bool = False,
    ) -> ModernBertModelOutput:
        """head_mask (layers, heads) multiplies each head's output (0 ablates it).

        skip_padding: the projections, feed-forward and norms run on the real tokens only (attention alone sees
        the padded grid), and the padding positions' outputs are zeros. Exact for every real token, since padding
        is never a key; the unpadded path of the paper, for training. Ignored when hidden states or attentions
        are asked for, which show every position."""
        config = self.config
        check_inputs(config, input_ids, None, attention_mask)
        seq_len = input_ids.size(1)
        if seq_len > config.max_position_embeddings:
            raise ValueError(f"the input has {seq_len} positions; this model was trained on at most "
                             f"{config.max_position_embeddings} — truncate it (tokenizer max_length)")
        if head_mask is not None and tuple(head_mask.shape) != (config.num_hidden_layers, config.num_attention_heads):
            raise ValueError(f"head_mask has shape {tuple(head_mask.shape)}; it takes one multiplier per "
                             f"(layer, head): ({config.num_hidden_layers}, {config.num_attention_heads})")
        kept = None
        if skip_padding and attention_mask is not None and not (output_attentions or output_hidden_states):
            kept = attention_mask.bool()  # (B, T)
        rows = TokenRows(input_ids.size(0), seq_len, kept)
        hidden_states = rows.unpad(self.embeddings(input_ids))  # (N, D)
        dtype, device = hidden_states.dtype, hidden_states.device
        biases = attention_biases(config, attention_mask, seq_len, dtype, device)
        cos_sin = {}
        for kind, theta in ((GLOBAL_ATTENTION, config.global_rope_theta), (LOCAL_ATTENTION, config.local_rope_theta)):
            if kind in config.layer_types:
                cos, sin = self.rotary_emb(seq_len, theta, device)  # (T, hs) each, float32
                cos_sin[kind] = (cos, sin)
        if head_mask is not None:
            head_mask = head_mask.to(device=device, dtype=dtype)
        all_hidden_states = [rows.pad(hidden_states)] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for index, layer in enumerate(self.layers):
            layer_head_mask = None if head_mask is None else head_mask[index].view(1, -1, 1, 1)  # (1, nh, 1, 1)
            kind = layer.attention_type
            hidden_states, attention_probs = layer(
                hidden_states, rows, cos_sin[kind], biases[kind], layer_head_mask, output_attentions
            )
            if output_hidden_states:
                all_hidden_states.append(rows.pad(hidden_states))
            if output_attentions:
                all_attentions.append(attention_probs)
        hidden_states = rows.pad(self.final_norm(hidden_states))  # (B, T, D)
        if output_hidden_states:
            all_hidden_states[-1] = hidden_states  # transformers' convention: the last entry is the normed output
        return ModernBertModelOutput(
            hidden_states,
            tuple(all_hidden_states) if output_hidden_states else None,
            tuple(all_attentions) if output_attentions else None,
        )


class ModernBertPredictionHead(nn.Module):
    """dense -> activation -> LayerNorm, before the MLM decoder (or a classifier)."""

    def __init__(self, config: ModernBertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.classifier_bias)
        self.act = ACTIVATION_FUNCTIONS[config.classifier_activation]
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.norm_eps, bias=config.norm_bias)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.norm(self.act(self.dense(hidden_states)))


class ModernBertForMaskedLM(PretrainingHeads, ModernBertPreTrainedModel):
    """ModernBERT with its masked-LM head: `head`, then `decoder` tied to tok_embeddings, with its own bias."""

    PRETRAINING_HEADS = frozenset({"mlm"})

    def __init__(self, config: ModernBertConfig):
        super().__init__(config)
        self.model = ModernBertModel(self.config)
        self.head = ModernBertPredictionHead(self.config)
        self.decoder = nn.Linear(self.config.hidden_size, self.config.vocab_size, bias=self.config.decoder_bias)
        self.apply(self._init_weights)
        if self.decoder.bias is not None:
            nn.init.zeros_(self.decoder.bias)
        if self.config.tie_word_embeddings:
            self.decoder.weight = self.model.embeddings.tok_embeddings.weight
        else:
            std = self.config.initializer_range / math.sqrt(2.0 * self.config.num_hidden_layers)
            cutoff = self.config.initializer_cutoff_factor * std
            nn.init.trunc_normal_(self.decoder.weight, std=std, a=-cutoff, b=cutoff)

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.decoder(self.head(sequence_output))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for BERT's callers; ModernBERT has no segments
        labels: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ModernBertMaskedLMOutput:
        ignore_index = self.config.sparse_pred_ignore_index
        sparse = labels is not None and self.config.sparse_prediction
        labelled = labels != ignore_index if sparse else None  # (B, T)
        # Padding that no label reads needs no dense work in any layer (padding is never a key): exact.
        skip_padding = sparse and attention_mask is not None and not bool((labelled & ~attention_mask.bool()).any())
        outputs = self.model(input_ids, attention_mask, token_type_ids, head_mask, output_attentions,
                             output_hidden_states, skip_padding=skip_padding)
        sequence_output = outputs.last_hidden_state  # (B, T, D)
        if sparse:
            # Only the ~15% labelled rows pay for the vocabulary projection; logits are then (N_labelled, V)
            # in row-major order of the labelled positions, as in transformers.
            sequence_output, labels = sequence_output[labelled], labels[labelled]  # (N, D), (N,)
        logits = self.decoder(self.head(sequence_output))  # (B, T, V) or (N, V)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, -2).float(), labels.flatten(), ignore_index=ignore_index)
        return ModernBertMaskedLMOutput(loss, logits, outputs.hidden_states, outputs.attentions)


# ---- the fine-tuning heads

class ModernBertTaskHead:
    """What ModernBERT's three task heads share, and where they differ from the other families': the prediction
    head (dense, activation, norm) runs before dropout and a `classifier` (QA's too is named classifier), whose
    init is a truncated normal of std hidden_size^-0.5, as transformers draws it."""

    base_model_prefix = "model"
    encoder_class = ModernBertModel
    uses_pooler = False

    def _add_head(self) -> None:
        config = self.config
        self.head = ModernBertPredictionHead(config)
        self.drop = nn.Dropout(config.classifier_dropout)
        self.classifier = nn.Linear(config.hidden_size, self.num_labels)
        std = config.hidden_size ** -0.5
        cutoff = config.initializer_cutoff_factor * std
        nn.init.trunc_normal_(self.classifier.weight, std=std, a=-cutoff, b=cutoff)
        nn.init.zeros_(self.classifier.bias)

    def _classify(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.drop(self.head(hidden_states)))


class ModernBertForSequenceClassification(ModernBertTaskHead, EncoderForSequenceClassification,
                                          ModernBertPreTrainedModel):
    """A class (or several, or a number) per text, from [CLS] or the mean of the real tokens
    (config.classifier_pooling)."""

    def sequence_logits(self, outputs, attention_mask: torch.Tensor | None) -> torch.Tensor:
        hidden_states = outputs.last_hidden_state  # (B, T, D)
        if self.config.classifier_pooling == "cls":
            return self._classify(hidden_states[:, 0])
        if attention_mask is None:
            attention_mask = torch.ones(hidden_states.shape[:2], dtype=torch.bool, device=hidden_states.device)
        weights = attention_mask.unsqueeze(-1).to(hidden_states.dtype)  # (B, T, 1)
        return self._classify((hidden_states * weights).sum(dim=1) / weights.sum(dim=1))  # mean over real tokens


class ModernBertForTokenClassification(ModernBertTaskHead, EncoderForTokenClassification, ModernBertPreTrainedModel):
    """A tag per position, through the prediction head."""

    def token_logits(self, outputs) -> torch.Tensor:
        return self._classify(outputs.last_hidden_state)


class ModernBertForQuestionAnswering(ModernBertTaskHead, EncoderForQuestionAnswering, ModernBertPreTrainedModel):
    """A start and an end score per position, through the prediction head and `classifier`."""

    def span_logits(self, outputs) -> tuple[torch.Tensor, torch.Tensor]:
        return split_span_logits(self._classify(outputs.last_hidden_state))
