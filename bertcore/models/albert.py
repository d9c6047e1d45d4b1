"""ALBERT (Lan et al. 2020, "A Lite BERT for Self-supervised Learning of Language Representations").

Two ways to fewer parameters than BERT at the same depth and width: the embeddings are narrow (embedding_size,
as in ELECTRA) and `embedding_hidden_mapping_in` widens them; and the layers share weights. The encoder holds
`num_hidden_groups` groups of `inner_group_num` layers; depth i runs group i * groups / layers (every depth the
same group when there is one), each time through all of that group's layers. So `num_hidden_layers` counts
passes through a group, and the model runs num_hidden_layers × inner_group_num attention layers: that many
attention maps come back, that many rows a head_mask has, and one hidden state after each. Pretraining pairs
masked-LM with sentence-order prediction (SOP: are the two segments in their original order?) instead of NSP.

Class and parameter names are those of transformers' `modeling_albert.py`, so its `state_dict`s load as they are:
config -> attention -> layer -> layer group -> transformer -> AlbertModel -> MLM and SOP heads ->
AlbertForPreTraining -> AlbertForMaskedLM. The attention is bert.py's BertSelfAttention (the same query, key and
value, the same fast and explicit paths) with ALBERT's output projection and LayerNorm inside the same module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.checks import check_int, check_number
from bertcore.models.bert import (
    BertModelOutput,
    BertPreTrainedModel,
    BertSelfAttention,
    MaskedLMForward,
    masked_lm_loss,
)
from bertcore.models.config import BertConfig
from bertcore.models.electra import ElectraEmbeddings
from bertcore.models.parts import (
    ACTIVATION_FUNCTIONS,
    Dropout,
    PretrainingHeads,
    TokenRows,
    fields_of_family,
    prepare_encoder_inputs,
)
from bertcore.models.task_heads import (
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
)


@dataclass(frozen=True)
class AlbertConfig(BertConfig):
    """BERT's fields (validated as BertConfig validates them) plus ALBERT's. The defaults are transformers'
    (albert-xxlarge); the released base, large and xlarge models change the sizes."""

    vocab_size: int = 30000  # the SentencePiece vocabulary
    hidden_size: int = 4096
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    hidden_act: str = "gelu_new"  # the tanh approximation of GELU
    hidden_dropout_prob: float = 0.0  # ALBERT v2 trains without dropout
    attention_probs_dropout_prob: float = 0.0
    embedding_size: int = 128  # width of the token, position and segment embeddings; mapped to hidden_size
    num_hidden_groups: int = 1  # groups of layers whose weights the depths share (1: every depth the same)
    inner_group_num: int = 1  # layers in each group, run in turn every time the group's depth comes
    classifier_dropout_prob: float = 0.1  # dropout before the SOP classifier

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("embedding_size", "num_hidden_groups", "inner_group_num"):
            check_int(name, getattr(self, name), minimum=1)
        check_number("classifier_dropout_prob", self.classifier_dropout_prob)
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ValueError(f"num_hidden_groups is {self.num_hidden_groups} but there are only "
                             f"{self.num_hidden_layers} hidden layers to share them; a group no depth runs would be "
                             f"weights that never act — use at most {self.num_hidden_layers} groups")
        if not 0.0 <= self.classifier_dropout_prob < 1.0:
            raise ValueError(f"classifier_dropout_prob must be in [0, 1), got {self.classifier_dropout_prob!r}")

    @property
    def num_attention_layers(self) -> int:
        """Attention layers run per forward pass: the rows of a head_mask, the number of attention maps."""
        return self.num_hidden_layers * self.inner_group_num

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "model_type": "albert"}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AlbertConfig:
        return super().from_dict(fields_of_family(cls, values, "albert"))


class AlbertEmbeddings(ElectraEmbeddings):
    """Token + segment + position embeddings embedding_size wide, LayerNorm, dropout (as ELECTRA's)."""


class AlbertAttention(BertSelfAttention):
    """BERT's self-attention, then ALBERT's output projection, dropout, residual and post-LayerNorm, which BERT
    keeps in a separate BertSelfOutput and ALBERT in this module (hence `attention.dense`, `attention.LayerNorm`)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.output_dropout = Dropout(config.hidden_dropout_prob)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states, rows, key_padding_mask, head_mask, output_attentions):
        """hidden_states (N, D) placed by `rows`; returns the attention output (N, D) and the probabilities."""
        context, attention_probs = super().forward(hidden_states, rows, key_padding_mask, head_mask,
                                                   output_attentions)
        return self.LayerNorm(hidden_states + self.output_dropout(self.dense(context))), attention_probs


class AlbertLayer(nn.Module):
    """Attention, then the feed-forward (`ffn`, activation, `ffn_output`), residual, post-LayerNorm."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.full_layer_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = AlbertAttention(config)
        self.ffn = nn.Linear(config.hidden_size, config.intermediate_size)
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = ACTIVATION_FUNCTIONS[config.hidden_act]

    def forward(self, hidden_states, rows, key_padding_mask, head_mask, output_attentions):
        attention_output, attention_probs = self.attention(
            hidden_states, rows, key_padding_mask, head_mask, output_attentions
        )
        # No dropout on the feed-forward output: transformers has none there (ALBERT v2 trains without dropout).
        ffn_output = self.ffn_output(self.activation(self.ffn(attention_output)))
        return self.full_layer_layer_norm(ffn_output + attention_output), attention_probs


class AlbertLayerGroup(nn.Module):
    """The layers one group holds; every depth that runs this group runs them all, in turn."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.albert_layers = nn.ModuleList(AlbertLayer(config) for _ in range(config.inner_group_num))


class AlbertTransformer(nn.Module):
    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.embedding_hidden_mapping_in = nn.Linear(config.embedding_size, config.hidden_size)
        self.albert_layer_groups = nn.ModuleList(AlbertLayerGroup(config) for _ in range(config.num_hidden_groups))

    def layers_in_order(self):
        """The AlbertLayer at each attention layer: num_hidden_layers × inner_group_num, weights shared."""
        layers, groups = self.config.num_hidden_layers, self.config.num_hidden_groups
        for depth in range(layers):
            # transformers' float arithmetic, so that a depth on a group boundary picks the group it picks.
            yield from self.albert_layer_groups[int(depth / (layers / groups))].albert_layers

    def forward(self, embeddings, key_padding_mask, head_mask, output_attentions, output_hidden_states):
        hidden_states = self.embedding_hidden_mapping_in(embeddings)  # (B, T, D)
        batch_size, seq_len, _ = hidden_states.shape
        rows = TokenRows(batch_size, seq_len)  # every position: pad and unpad are reshapes
        all_hidden_states = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        hidden_states = rows.unpad(hidden_states)  # (N, D)
        for index, layer in enumerate(self.layers_in_order()):
            layer_head_mask = None if head_mask is None else head_mask[index].view(1, -1, 1, 1)  # (1, nh, 1, 1)
            hidden_states, attention_probs = layer(
                hidden_states, rows, key_padding_mask, layer_head_mask, output_attentions
            )
            if output_hidden_states:
                all_hidden_states.append(rows.pad(hidden_states))
            if output_attentions:
                all_attentions.append(attention_probs)
        return (
            rows.pad(hidden_states),  # (B, T, D)
            tuple(all_hidden_states) if output_hidden_states else None,
            tuple(all_attentions) if output_attentions else None,
        )


class AlbertModel(nn.Module):
    def __init__(self, config: AlbertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = AlbertEmbeddings(config)
        self.encoder = AlbertTransformer(config)
        # The sentence vector for SOP: dense + tanh on [CLS]; ALBERT names the dense layer `pooler` itself.
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size) if add_pooling_layer else None

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertModelOutput:
        """head_mask (num_attention_layers, nh): each head's output is multiplied by its entry (0 removes it)."""
        token_type_ids, key_padding_mask, head_mask = prepare_encoder_inputs(
            self.config, input_ids, token_type_ids, attention_mask, head_mask, self.config.num_attention_layers,
            self.embeddings.word_embeddings.weight.dtype,
        )
        embeddings = self.embeddings(input_ids, token_type_ids)  # (B, T, E)
        last_hidden_state, hidden_states, attentions = self.encoder(
            embeddings, key_padding_mask, head_mask, output_attentions, output_hidden_states
        )
        pooler_output = None if self.pooler is None else torch.tanh(self.pooler(last_hidden_state[:, 0]))  # (B, D)
        return BertModelOutput(last_hidden_state, pooler_output, hidden_states, attentions)


class AlbertMLMHead(nn.Module):
    """Dense down to embedding_size, activation, LayerNorm, then a decoder tied to the word embeddings with its
    own output bias (`bias` and `decoder.bias` are one tensor)."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size)
        self.decoder.bias = self.bias
        self.activation = ACTIVATION_FUNCTIONS[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(self.activation(self.dense(hidden_states))))  # (..., V)


class AlbertSOPHead(nn.Module):
    """Sentence-order prediction on the pooled [CLS]: index 0 = in order, 1 = swapped."""

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.classifier_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)  # num_labels is 2 unless changed

    def forward(self, pooled_output: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled_output))  # (B, 2)


@dataclass
class AlbertForPreTrainingOutput:
    loss: torch.Tensor | None  # () mlm_loss + sop_loss, for the labels given
    mlm_loss: torch.Tensor | None  # () mean cross-entropy over positions whose label is not -100
    sop_loss: torch.Tensor | None  # () mean cross-entropy of in order / swapped
    prediction_logits: torch.Tensor  # (B, T, V)
    sop_logits: torch.Tensor  # (B, 2): index 0 = in order, 1 = swapped
    hidden_states: tuple[torch.Tensor, ...] | None  # L × inner_group_num + 1 of (B, T, D)
    attentions: tuple[torch.Tensor, ...] | None  # L × inner_group_num of (B, nh, T, T)




class AlbertForPreTraining(PretrainingHeads, BertPreTrainedModel):
    """ALBERT with its two pretraining heads: masked-LM and sentence-order prediction."""

    PRETRAINING_HEADS = frozenset({"mlm", "sop"})

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(self.config)
        self.predictions = AlbertMLMHead(self.config)
        self.sop_classifier = AlbertSOPHead(self.config)
        self.apply(self._init_weights)
        self.predictions.decoder.weight = self.albert.embeddings.word_embeddings.weight  # tied

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.predictions(sequence_output)

    def sentence_order_logits(self, pooled_output: torch.Tensor) -> torch.Tensor:
        """(B, 2) of the pooled [CLS] vectors (B, D): index 0 = the segments in their order, 1 = swapped."""
        return self.sop_classifier(pooled_output)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sentence_order_label: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> AlbertForPreTrainingOutput:
        """labels (B, T): token ids to predict, -100 elsewhere; sentence_order_label (B,): 0 in order, 1 swapped.
        Either alone gives its own loss (transformers gives a loss only for both; with both they agree)."""
        outputs = self.albert(input_ids, token_type_ids, attention_mask, head_mask, output_attentions,
                              output_hidden_states)
        prediction_logits = self.predictions(outputs.last_hidden_state)  # (B, T, V)
        sop_logits = self.sop_classifier(outputs.pooler_output)  # (B, 2)
        mlm_loss = None if labels is None else masked_lm_loss(prediction_logits, labels)
        sop_loss = None
        if sentence_order_label is not None:
            sop_loss = F.cross_entropy(sop_logits.float(), sentence_order_label.view(-1))
        loss = mlm_loss
        if sop_loss is not None:
            loss = sop_loss if loss is None else loss + sop_loss
        return AlbertForPreTrainingOutput(loss, mlm_loss, sop_loss, prediction_logits, sop_logits,
                                          outputs.hidden_states, outputs.attentions)


class AlbertForMaskedLM(MaskedLMForward, BertPreTrainedModel):
    """ALBERT with the masked-LM head alone (no pooler, no SOP head)."""

    PRETRAINING_HEADS = frozenset({"mlm"})
    base_model_prefix = "albert"

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.albert = AlbertModel(self.config, add_pooling_layer=False)
        self.predictions = AlbertMLMHead(self.config)
        self.apply(self._init_weights)
        self.predictions.decoder.weight = self.albert.embeddings.word_embeddings.weight  # tied

    @property
    def has_pretraining_heads(self) -> bool:
        return True  # its head is always built and saved with it

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.predictions(sequence_output)


class AlbertForSequenceClassification(EncoderForSequenceClassification, BertPreTrainedModel):
    """ALBERT with BERT's sentence head: dropout (classifier_dropout_prob) and a classifier on the pooled [CLS]."""

    base_model_prefix = "albert"
    encoder_class = AlbertModel

    def head_dropout(self) -> float:
        return self.config.classifier_dropout_prob


class AlbertForTokenClassification(EncoderForTokenClassification, BertPreTrainedModel):
    """ALBERT with a tag per position: dropout (classifier_dropout_prob) and a linear classifier."""

    base_model_prefix = "albert"
    encoder_class = AlbertModel

    def head_dropout(self) -> float:
        return self.config.classifier_dropout_prob


class AlbertForQuestionAnswering(EncoderForQuestionAnswering, BertPreTrainedModel):
    """ALBERT with a start and an end score per position (qa_outputs)."""

    base_model_prefix = "albert"
    encoder_class = AlbertModel
