"""BERT (Devlin et al. 2019) for MLM + NSP pretraining, in reading order.

Class and parameter names are those of the standard BERT checkpoint layout (and of HuggingFace
`transformers`), so `state_dict`s load without a mapping table:
embeddings -> token rows -> self-attention -> attention output -> feed-forward -> layer -> encoder -> pooler ->
MLM/NSP heads -> BertModel -> BertPreTrainedModel (what every head model shares) -> BertForPreTraining ->
BertForMaskedLM (the MLM head alone, as fill-mask checkpoints are published).

Attention probabilities are only materialised when the caller asks for them (`output_attentions=True`);
otherwise the fused `scaled_dot_product_attention` kernel runs. Inside the encoder the hidden states are a flat
(N, D) stack of token rows (`bertcore.models.parts.TokenRows`): all B × T positions, or, when a head says which
positions it reads (`query_positions`), only the real tokens, so that the dense layers skip padding.
The task heads (classification, tagging, QA) are in `bertcore.models.task_heads`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.models.config import BertConfig
from bertcore.models.parts import (
    ACTIVATION_FUNCTIONS,
    IGNORE_INDEX,
    Dropout,
    ModelHeads,
    PretrainingHeads,
    TokenRows,
    prepare_encoder_inputs,
)


class BertEmbeddings(nn.Module):
    """Token + segment + learned position embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        seq_len = input_ids.size(1)
        position_ids = torch.arange(seq_len, device=input_ids.device)  # (T,), broadcast over the batch
        embeddings = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )  # (B, T, D)
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention over the whole (unmasked) sequence."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.head_dim
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout_prob = config.attention_probs_dropout_prob
        self.dropout = Dropout(config.attention_probs_dropout_prob)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch_size, seq_len, _ = x.shape
        return x.view(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hs)

    def forward(
        self,
        hidden_states: torch.Tensor,
        rows: TokenRows,
        key_padding_mask: torch.Tensor | None,
        head_mask: torch.Tensor | None,
        output_attentions: bool,
        query_states: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states (N, D) placed by `rows`; returns the context (N, D), or (B, M, D) for query_states."""
        # Queries may come from a subset of positions (B, M, D); keys and values always cover all T.
        if query_states is None:
            query = self.split_heads(rows.pad(self.query(hidden_states)))  # (B, nh, T, hs)
        else:
            query = self.split_heads(self.query(query_states))  # (B, nh, M, hs)
        key = self.split_heads(rows.pad(self.key(hidden_states)))  # (B, nh, T, hs)
        value = self.split_heads(rows.pad(self.value(hidden_states)))
        attention_probs = None
        # The explicit path when the caller wants to see the probabilities, and in CPU training with dropout: there
        # SDPA's fused kernel refuses dropout and falls back to the same computation with torch's slower mask.
        if output_attentions or (self.training and self.dropout_prob > 0 and query.device.type == "cpu"):
            # The queries are scaled before the product, a pass over (M, hs) instead of over the (M, T) scores.
            scores = (query * (1.0 / math.sqrt(self.head_dim))) @ key.transpose(-2, -1)  # (B, nh, M, T)
            if key_padding_mask is not None:
                scores = scores.masked_fill(~key_padding_mask, torch.finfo(scores.dtype).min)
            attention_probs = scores.softmax(dim=-1)
            if head_mask is not None:
                attention_probs = attention_probs * head_mask  # what an ablated head contributes: nothing
            context = self.dropout(attention_probs) @ value  # (B, nh, M, hs)
        else:
            context = F.scaled_dot_product_attention(
                query, key, value,
                attn_mask=key_padding_mask,
                dropout_p=self.dropout_prob if self.training else 0.0,
            )  # (B, nh, M, hs)
            if head_mask is not None:
                context = context * head_mask  # scaling a head's probabilities scales its output alike
        context = context.transpose(1, 2).flatten(2)  # (B, M, D)
        context = context if query_states is not None else rows.unpad(context)
        return context, (attention_probs if output_attentions else None)


class BertSelfOutput(nn.Module):
    """Output projection of the attention, dropout, residual, post-LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, rows, key_padding_mask, head_mask, output_attentions, query_states=None):
        context, attention_probs = self.self(
            hidden_states, rows, key_padding_mask, head_mask, output_attentions, query_states
        )
        residual = hidden_states if query_states is None else query_states
        return self.output(context, residual), attention_probs


class BertIntermediate(nn.Module):
    """First half of the feed-forward block: widen to intermediate_size, then GELU."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = ACTIVATION_FUNCTIONS[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(hidden_states))


class BertOutput(nn.Module):
    """Second half of the feed-forward block: project back, dropout, residual, post-LayerNorm."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + residual)


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, rows, key_padding_mask, head_mask, output_attentions, query_states=None):
        attention_output, attention_probs = self.attention(
            hidden_states, rows, key_padding_mask, head_mask, output_attentions, query_states
        )
        layer_output = self.output(self.intermediate(attention_output), attention_output)
        return layer_output, attention_probs


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(
        self, hidden_states, key_padding_mask, head_mask, output_attentions, output_hidden_states, query_positions=None
    ):
        batch_size, seq_len, _ = hidden_states.shape
        kept = None
        if query_positions is not None and key_padding_mask is not None and not (
                output_attentions or output_hidden_states):
            # Only the heads' positions are read at the end, and padding is never a key: padding that no head
            # reads needs no projection or feed-forward in any layer. Exact, not approximate.
            kept = key_padding_mask.view(batch_size, seq_len).scatter(1, query_positions, True)  # (B, T)
        rows = TokenRows(batch_size, seq_len, kept)
        hidden_states = rows.unpad(hidden_states)  # (N, D)
        all_hidden_states = [rows.pad(hidden_states)] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for index, layer in enumerate(self.layer):
            layer_head_mask = None if head_mask is None else head_mask[index].view(1, -1, 1, 1)  # (1, nh, 1, 1)
            query_states = None
            if query_positions is not None and index == len(self.layer) - 1:
                # The last layer only at the positions a head reads: its output is (B, M, D).
                query_states = rows.at(hidden_states, query_positions)  # (B, M, D)
            hidden_states, attention_probs = layer(
                hidden_states, rows, key_padding_mask, layer_head_mask, output_attentions, query_states
            )
            if output_hidden_states:
                all_hidden_states.append(hidden_states if query_states is not None else rows.pad(hidden_states))
            if output_attentions:
                all_attentions.append(attention_probs)
        return (
            hidden_states if query_positions is not None else rows.pad(hidden_states),  # (B, M, D) or (B, T, D)
            tuple(all_hidden_states) if output_hidden_states else None,
            tuple(all_attentions) if output_attentions else None,
        )


class BertPooler(nn.Module):
    """The sentence vector for NSP: a dense layer + tanh on the [CLS] position."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))  # (B, D)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACTIVATION_FUNCTIONS[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.activation(self.dense(hidden_states)))


class BertLMPredictionHead(nn.Module):
    """MLM head: transform, then a decoder tied to the word embeddings with its own output bias."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias  # one tensor under both standard names

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(hidden_states))  # (..., V)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)  # logits of (IsNext, NotNext)

    def forward(self, sequence_output: torch.Tensor, pooled_output: torch.Tensor):
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


@dataclass
class BertModelOutput:
    last_hidden_state: torch.Tensor  # (B, T, D); (B, M, D) at query_positions
    pooler_output: torch.Tensor | None  # (B, D); None for a model built without a pooler
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


@dataclass
class BertPreTrainingOutput:
    loss: torch.Tensor | None  # () mlm_loss + nsp_loss, for the labels given
    mlm_loss: torch.Tensor | None  # () mean cross-entropy over labelled positions
    nsp_loss: torch.Tensor | None  # () mean cross-entropy of IsNext / NotNext
    prediction_logits: torch.Tensor  # (B, T, V) without labels; (N_labelled, V) with labels
    seq_relationship_logits: torch.Tensor  # (B, 2): index 0 = IsNext, 1 = NotNext
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D)
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


class BertModel(nn.Module):
    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None  # tagging and QA heads have none

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        query_positions: torch.Tensor | None = None,
    ) -> BertModelOutput:
        """query_positions (B, M), if given, limits the last layer's output to those positions; the
        first of each row must be 0 ([CLS]) for the pooler. Padding is then left out of every layer's dense
        work. Used by the training heads, never for inspection."""
        token_type_ids, key_padding_mask, head_mask = prepare_encoder_inputs(
            self.config, input_ids, token_type_ids, attention_mask, head_mask, self.config.num_hidden_layers,
            self.embeddings.word_embeddings.weight.dtype,
        )
        hidden_states = self.embeddings(input_ids, token_type_ids)
        last_hidden_state, hidden_states, attentions = self.encoder(
            hidden_states, key_padding_mask, head_mask, output_attentions, output_hidden_states, query_positions
        )
        pooler_output = None if self.pooler is None else self.pooler(last_hidden_state)
        return BertModelOutput(last_hidden_state, pooler_output, hidden_states, attentions)


class BertPreTrainedModel(ModelHeads, nn.Module):
    """What every model around a `bert` encoder shares: a config that names its class, weight init, size."""

    def __init__(self, config: BertConfig):
        super().__init__()
        # config.json's "architectures" says which class these weights belong to; a saved model writes its own.
        self.config = config.replace(architectures=(type(self).__name__,))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
            if module.padding_idx is not None:
                nn.init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        return sum(parameter.numel() for parameter in self.parameters())  # tied tensors count once

class BertForPreTraining(PretrainingHeads, BertPreTrainedModel):
    """BERT with its two pretraining heads: masked-LM and next-sentence prediction."""

    PRETRAINING_HEADS = frozenset({"mlm", "nsp"})

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(self.config)
        self.cls = BertPreTrainingHeads(self.config)
        self.apply(self._init_weights)
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight  # tied

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.cls.predictions(sequence_output)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        next_sentence_label: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertPreTrainingOutput:
        mlm_loss = nsp_loss = loss = None
        labelled = None if labels is None else labels != IGNORE_INDEX  # (B, T)
        if labelled is not None and not (output_hidden_states or output_attentions):
            # With labels the heads read only [CLS] and the masked positions (~15%), so the last layer's
            # queries, feed-forward and the vocabulary projection run there alone. Exact, not approximate.
            query_positions, is_label = _positions_read_by_heads(labelled)  # (B, M), (B, M)
            outputs = self.bert(input_ids, token_type_ids, attention_mask, head_mask, query_positions=query_positions)
            # Rows ascend by position within each row, so this is the order of labels[labelled].
            prediction_logits = self.cls.predictions(outputs.last_hidden_state[is_label])  # (N, V)
        else:
            outputs = self.bert(
                input_ids, token_type_ids, attention_mask, head_mask, output_attentions, output_hidden_states
            )
            sequence_output = outputs.last_hidden_state  # (B, T, D)
            rows = sequence_output if labelled is None else sequence_output[labelled]  # (B, T, D) or (N, D)
            prediction_logits = self.cls.predictions(rows)  # (B, T, V) or (N, V)
        if labelled is not None:
            mlm_loss = F.cross_entropy(prediction_logits.float(), labels[labelled])
            loss = mlm_loss
        seq_relationship_logits = self.cls.seq_relationship(outputs.pooler_output)  # (B, 2)
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(seq_relationship_logits.float(), next_sentence_label.view(-1))
            loss = nsp_loss if loss is None else loss + nsp_loss
        return BertPreTrainingOutput(
            loss=loss,
            mlm_loss=mlm_loss,
            nsp_loss=nsp_loss,
            prediction_logits=prediction_logits,
            seq_relationship_logits=seq_relationship_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


@dataclass
class MaskedLMOutput:
    loss: torch.Tensor | None  # () mean cross-entropy over positions whose label is not -100
    logits: torch.Tensor  # (B, T, V)
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D)
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


class MaskedLMForward:
    """The forward every family's ...ForMaskedLM shares but ModernBERT's (its own sparse prediction): the encoder
    the class holds under `base_model_prefix`, its `mlm_logits`, and the masked-LM loss when labels are given."""

    base_model_prefix: ClassVar[str]

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> MaskedLMOutput:
        """labels: (B, T) token ids to predict, -100 where a position takes no part in the loss."""
        encoder = getattr(self, self.base_model_prefix)
        outputs = encoder(input_ids, token_type_ids, attention_mask, head_mask, output_attentions,
                          output_hidden_states)
        logits = self.mlm_logits(outputs.last_hidden_state)  # (B, T, V)
        loss = None if labels is None else masked_lm_loss(logits, labels)
        return MaskedLMOutput(loss, logits, outputs.hidden_states, outputs.attentions)


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        return self.predictions(sequence_output)


class BertForMaskedLM(MaskedLMForward, BertPreTrainedModel):
    """BERT with the masked-LM head alone (no pooler, no NSP head): what most fill-mask checkpoints are."""

    PRETRAINING_HEADS = frozenset({"mlm"})
    base_model_prefix = "bert"

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.bert = BertModel(self.config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(self.config)
        self.apply(self._init_weights)
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight  # tied

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.cls.predictions(sequence_output)


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of vocabulary scores (..., V) against token ids (...), over the positions whose label is
    not IGNORE_INDEX, in float32 whatever the logits' dtype: the MLM loss of every family's masked-LM head."""
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=IGNORE_INDEX)


def _positions_read_by_heads(labelled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, [CLS] then the labelled positions in ascending order, padded with 0.

    Returns positions (B, M) and which of them are labelled (B, M), M = the most any row needs.
    """
    batch_size, seq_len = labelled.shape
    needed = labelled.clone()
    needed[:, 0] = True  # [CLS], read by the pooler and the NSP head
    width = int(needed.sum(dim=1).max())
    arange = torch.arange(seq_len, device=labelled.device).expand(batch_size, -1)  # (B, T)
    positions = torch.where(needed, arange, seq_len).sort(dim=1).values[:, :width]  # (B, M), seq_len = filler
    is_filler = positions == seq_len
    positions = positions.masked_fill(is_filler, 0)
    is_label = labelled.gather(1, positions) & ~is_filler
    return positions, is_label
