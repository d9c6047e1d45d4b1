"""DistilBERT (Sanh et al. 2019): a 6-layer BERT distilled from bert-base, in reading order.

The block is BERT's (post-LayerNorm attention, then a GELU feed-forward), with other names and without segments
or a pooler: `attention.q_lin/k_lin/v_lin/out_lin`, `sa_layer_norm`, `ffn.lin1/lin2`, `output_layer_norm`. The
attention itself is BERT's (`bertcore.models.bert.BertSelfAttention.forward`, the explicit and the fused path,
head_mask included), run on DistilBERT's projections. Positions are learned, or fixed sinusoids when
`sinusoidal_pos_embds` is set. config.json uses DistilBERT's own field names (dim, n_layers, n_heads, hidden_dim,
activation, dropout, attention_dropout); DistilBertConfig reads and writes them and holds BERT's names inside.

Class and parameter names are those of transformers' `modeling_distilbert.py`, so its `state_dict`s load as they
are: config -> embeddings -> attention -> feed-forward -> block -> DistilBertModel -> DistilBertForMaskedLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from bertcore.checks import check_number
from bertcore.models.bert import BertModelOutput, BertPreTrainedModel, BertSelfAttention, MaskedLMForward
from bertcore.models.config import BertConfig
from bertcore.models.parts import (
    ACTIVATION_FUNCTIONS,
    PretrainingHeads,
    TokenRows,
    fields_of_family,
    prepare_encoder_inputs,
)
from bertcore.models.task_heads import (
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    split_span_logits,
)

LAYER_NORM_EPS = 1e-12  # fixed in DistilBERT: config.json has no field for it
# config.json's DistilBERT field -> the BertConfig field that holds it
_FIELD_NAMES = {"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
                "hidden_dim": "intermediate_size", "activation": "hidden_act", "dropout": "hidden_dropout_prob",
                "attention_dropout": "attention_probs_dropout_prob"}


@dataclass(frozen=True)
class DistilBertConfig(BertConfig):
    """BERT's fields under BERT's names (validated as BertConfig validates them), with distilbert-base's defaults;
    config.json is read and written with DistilBERT's names."""

    num_hidden_layers: int = 6
    sinusoidal_pos_embds: bool = False  # fixed sin/cos positions instead of learned ones
    seq_classif_dropout: float = 0.2  # dropout before a sequence classifier (after pre_classifier)
    qa_dropout: float = 0.1  # dropout before the question-answering head

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.sinusoidal_pos_embds, bool):
            raise ValueError(f"sinusoidal_pos_embds must be true or false, got {self.sinusoidal_pos_embds!r}")
        for name in ("seq_classif_dropout", "qa_dropout"):
            check_number(name, getattr(self, name))
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        values = super().to_dict()
        for ours in ("type_vocab_size", "layer_norm_eps"):  # DistilBERT has neither
            values.pop(ours)
        renamed = {distil: values.pop(bert) for distil, bert in _FIELD_NAMES.items()}
        return {**values, **renamed, "model_type": "distilbert"}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DistilBertConfig:
        values = fields_of_family(cls, values, "distilbert")
        renamed = {_FIELD_NAMES.get(name, name): value for name, value in values.items()
                   if name not in _FIELD_NAMES.values()}  # a stray BERT-named field never overrides DistilBERT's
        return super().from_dict(renamed)


def sinusoidal_positions(num_positions: int, dim: int) -> torch.Tensor:
    """(P, dim): sin at even columns, cos at odd ones, of pos / 10000^(2⌊j/2⌋ / dim) (Vaswani et al. 2017)."""
    position = torch.arange(num_positions, dtype=torch.float64)[:, None]  # (P, 1)
    rate = torch.pow(10000.0, 2 * (torch.arange(dim) // 2) / dim)  # (dim,)
    angles = position / rate  # (P, dim)
    table = torch.empty(num_positions, dim, dtype=torch.float64)
    table[:, 0::2], table[:, 1::2] = angles[:, 0::2].sin(), angles[:, 1::2].cos()
    return table.float()


class Embeddings(nn.Module):
    """Token + position embeddings (no segments), then LayerNorm and dropout."""

    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=LAYER_NORM_EPS)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        position_ids = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,), broadcast over the batch
        embeddings = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)  # (B, T, D)
        return self.dropout(self.LayerNorm(embeddings))


class DistilBertSelfAttention(BertSelfAttention):
    """BERT's attention under DistilBERT's names: q_lin, k_lin, v_lin, and the output projection out_lin."""

    def __init__(self, config: DistilBertConfig):
        nn.Module.__init__(self)  # BertSelfAttention's own projections would be named query/key/value
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.q_lin = nn.Linear(config.hidden_size, config.hidden_size)
        self.k_lin = nn.Linear(config.hidden_size, config.hidden_size)
        self.v_lin = nn.Linear(config.hidden_size, config.hidden_size)
        self.out_lin = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    # BertSelfAttention.forward reads its projections by these names.
    query = property(lambda self: self.q_lin)
    key = property(lambda self: self.k_lin)
    value = property(lambda self: self.v_lin)

    def forward(self, hidden_states, rows, key_padding_mask, head_mask, output_attentions):
        context, attention_probs = super().forward(hidden_states, rows, key_padding_mask, head_mask,
                                                   output_attentions)
        return self.out_lin(context), attention_probs  # (N, D)


class FFN(nn.Module):
    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.lin1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.lin2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = ACTIVATION_FUNCTIONS[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.lin2(self.activation(self.lin1(hidden_states))))


class TransformerBlock(nn.Module):
    """Attention, residual, sa_layer_norm; feed-forward, residual, output_layer_norm (post-LN, as BERT)."""

    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.attention = DistilBertSelfAttention(config)
        self.sa_layer_norm = nn.LayerNorm(config.hidden_size, eps=LAYER_NORM_EPS)
        self.ffn = FFN(config)
        self.output_layer_norm = nn.LayerNorm(config.hidden_size, eps=LAYER_NORM_EPS)

    def forward(self, hidden_states, rows, key_padding_mask, head_mask, output_attentions):
        attention_output, attention_probs = self.attention(
            hidden_states, rows, key_padding_mask, head_mask, output_attentions
        )
        attention_output = self.sa_layer_norm(attention_output + hidden_states)  # (N, D)
        return self.output_layer_norm(self.ffn(attention_output) + attention_output), attention_probs


class Transformer(nn.Module):
    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.layer = nn.ModuleList(TransformerBlock(config) for _ in range(config.num_hidden_layers))

    def forward(self, hidden_states, key_padding_mask, head_mask, output_attentions, output_hidden_states):
        batch_size, seq_len, _ = hidden_states.shape
        rows = TokenRows(batch_size, seq_len)  # every position: pad and unpad are reshapes
        hidden_states = rows.unpad(hidden_states)  # (N, D)
        all_hidden_states = [rows.pad(hidden_states)] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for index, layer in enumerate(self.layer):
            layer_head_mask = None if head_mask is None else head_mask[index].view(1, -1, 1, 1)  # (1, nh, 1, 1)
            hidden_states, attention_probs = layer(hidden_states, rows, key_padding_mask, layer_head_mask,
                                                   output_attentions)
            if output_hidden_states:
                all_hidden_states.append(rows.pad(hidden_states))
            if output_attentions:
                all_attentions.append(attention_probs)
        return (rows.pad(hidden_states),  # (B, T, D)
                tuple(all_hidden_states) if output_hidden_states else None,
                tuple(all_attentions) if output_attentions else None)


class DistilBertModel(nn.Module):
    def __init__(self, config: DistilBertConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.transformer = Transformer(config)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertModelOutput:
        """token_type_ids are accepted for BERT's callers and ignored: DistilBERT has no segments. head_mask
        (L, nh): each head's output is multiplied by its entry (0 removes the head). No pooler."""
        _, key_padding_mask, head_mask = prepare_encoder_inputs(
            self.config, input_ids, None, attention_mask, head_mask, self.config.num_hidden_layers,
            self.embeddings.word_embeddings.weight.dtype,
        )
        last_hidden_state, hidden_states, attentions = self.transformer(
            self.embeddings(input_ids), key_padding_mask, head_mask, output_attentions, output_hidden_states
        )
        return BertModelOutput(last_hidden_state, None, hidden_states, attentions)


class DistilBertPreTrainedModel(BertPreTrainedModel):
    """BERT's weight init, and the fixed sinusoids in place of learned positions when the config says so."""

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, Embeddings) and self.config.sinusoidal_pos_embds:
            positions = module.position_embeddings.weight
            with torch.no_grad():
                if positions.device.type != "meta":
                    positions.copy_(sinusoidal_positions(*positions.shape))
            positions.requires_grad_(False)  # fixed, as transformers keeps them


class DistilBertForMaskedLM(MaskedLMForward, PretrainingHeads, DistilBertPreTrainedModel):
    """DistilBERT with its masked-LM head: vocab_transform -> activation -> vocab_layer_norm -> vocab_projector
    (tied to the word embeddings, with its own bias)."""

    PRETRAINING_HEADS = frozenset({"mlm"})
    base_model_prefix = "distilbert"

    def __init__(self, config: DistilBertConfig):
        super().__init__(config)
        self.distilbert = DistilBertModel(self.config)
        self.activation = ACTIVATION_FUNCTIONS[self.config.hidden_act]
        self.vocab_transform = nn.Linear(self.config.hidden_size, self.config.hidden_size)
        self.vocab_layer_norm = nn.LayerNorm(self.config.hidden_size, eps=LAYER_NORM_EPS)
        self.vocab_projector = nn.Linear(self.config.hidden_size, self.config.vocab_size)
        self.apply(self._init_weights)
        self.vocab_projector.weight = self.distilbert.embeddings.word_embeddings.weight  # tied

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.vocab_projector(self.vocab_layer_norm(self.activation(self.vocab_transform(sequence_output))))


class DistilBertForSequenceClassification(EncoderForSequenceClassification, DistilBertPreTrainedModel):
    """DistilBERT's own sentence head (it has no pooler): pre_classifier + ReLU on [CLS], dropout
    (seq_classif_dropout), classifier."""

    base_model_prefix = "distilbert"
    encoder_class = DistilBertModel
    uses_pooler = False

    def _add_head(self) -> None:
        self.pre_classifier = nn.Linear(self.config.hidden_size, self.config.hidden_size)
        self.classifier = nn.Linear(self.config.hidden_size, self.config.num_labels)
        self.dropout = nn.Dropout(self.config.seq_classif_dropout)

    def sequence_logits(self, outputs, attention_mask: torch.Tensor | None) -> torch.Tensor:
        pooled = torch.relu(self.pre_classifier(outputs.last_hidden_state[:, 0]))  # (B, D)
        return self.classifier(self.dropout(pooled))


class DistilBertForTokenClassification(EncoderForTokenClassification, DistilBertPreTrainedModel):
    """DistilBERT with a tag per position: dropout (the model's own rate) and a linear classifier."""

    base_model_prefix = "distilbert"
    encoder_class = DistilBertModel

    def head_dropout(self) -> float:
        return self.config.hidden_dropout_prob


class DistilBertForQuestionAnswering(EncoderForQuestionAnswering, DistilBertPreTrainedModel):
    """DistilBERT's QA head drops out (qa_dropout) before qa_outputs, which BERT's does not."""

    base_model_prefix = "distilbert"
    encoder_class = DistilBertModel

    def _add_head(self) -> None:
        super()._add_head()
        self.dropout = nn.Dropout(self.config.qa_dropout)

    def span_logits(self, outputs) -> tuple[torch.Tensor, torch.Tensor]:
        return split_span_logits(self.qa_outputs(self.dropout(outputs.last_hidden_state)))
