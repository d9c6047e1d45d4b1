"""ELECTRA (Clark et al. 2020, "Pre-training Text Encoders as Discriminators Rather Than Generators").

The encoder is BERT's, block for block (`bertcore.models.bert.BertEncoder`, reused as it is); what differs:
the embeddings may be narrower than the encoder (`embedding_size`), and a linear `embeddings_project` widens
them; there is no pooler; and pretraining has two models. A small generator (ElectraForMaskedLM) fills masked
positions with plausible tokens; the discriminator (ElectraForPreTraining) reads the result and gives every
position one logit: was this token replaced (> 0) or is it the original (< 0)? The discriminator is the model
people fine-tune.

Class and parameter names are those of transformers' `modeling_electra.py`, so its `state_dict`s load as they
are: config -> embeddings -> ElectraModel -> discriminator head -> ElectraForPreTraining -> generator head ->
ElectraForMaskedLM. The embeddings are shared with ALBERT (`bertcore.models.albert`), which factorises its
embeddings the same way; what every family shares is in bertcore.models.parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.checks import check_int
from bertcore.models.bert import BertEmbeddings, BertEncoder, BertModelOutput, BertPreTrainedModel, MaskedLMForward
from bertcore.models.config import BertConfig
from bertcore.models.parts import (
    ACTIVATION_FUNCTIONS,
    Dropout,
    PretrainingHeads,
    fields_of_family,
    prepare_encoder_inputs,
)
from bertcore.models.task_heads import (
    EncoderForQuestionAnswering,
    EncoderForTokenClassification,
    FirstTokenSequenceClassification,
)


@dataclass(frozen=True)
class ElectraConfig(BertConfig):
    """BERT's fields (validated as BertConfig validates them) plus the embedding width. The defaults are
    transformers' (the electra-small discriminator)."""

    hidden_size: int = 256  # width of the encoder's residual stream
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    embedding_size: int = 128  # width of the token, position and segment embeddings; projected to hidden_size

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("embedding_size", self.embedding_size, minimum=1)

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "model_type": "electra"}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ElectraConfig:
        return super().from_dict(fields_of_family(cls, values, "electra"))


class ElectraEmbeddings(BertEmbeddings):
    """BERT's embeddings (the same sum, LayerNorm and dropout), with tables embedding_size wide instead of
    hidden_size: BertEmbeddings sizes everything by hidden_size, so only the construction differs."""

    def __init__(self, config: ElectraConfig):
        nn.Module.__init__(self)
        width = config.embedding_size
        self.word_embeddings = nn.Embedding(config.vocab_size, width, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, width)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, width)
        self.LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)


@dataclass
class ElectraForPreTrainingOutput:
    loss: torch.Tensor | None  # () mean binary cross-entropy over the real (unpadded) positions, given labels
    logits: torch.Tensor  # (B, T): > 0 says "replaced", < 0 says "original"
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D): projected embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


class ElectraModel(nn.Module):
    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.config = config
        self.embeddings = ElectraEmbeddings(config)
        if config.embedding_size != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size)
        self.encoder = BertEncoder(config)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertModelOutput:
        """head_mask (L, nh): each head's output is multiplied by its entry (0 removes the head)."""
        token_type_ids, key_padding_mask, head_mask = prepare_encoder_inputs(
            self.config, input_ids, token_type_ids, attention_mask, head_mask, self.config.num_hidden_layers,
            self.embeddings.word_embeddings.weight.dtype,
        )
        hidden_states = self.embeddings(input_ids, token_type_ids)  # (B, T, E)
        if hasattr(self, "embeddings_project"):
            hidden_states = self.embeddings_project(hidden_states)  # (B, T, D)
        last_hidden_state, hidden_states, attentions = self.encoder(
            hidden_states, key_padding_mask, head_mask, output_attentions, output_hidden_states
        )
        return BertModelOutput(last_hidden_state, None, hidden_states, attentions)  # ELECTRA has no pooler


class ElectraDiscriminatorPredictions(nn.Module):
    """Replaced-token detection: dense + activation, then one logit per position."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = ACTIVATION_FUNCTIONS[config.hidden_act]
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(self.activation(self.dense(hidden_states))).squeeze(-1)  # (B, T)


class ElectraForPreTraining(PretrainingHeads, BertPreTrainedModel):
    """The discriminator: ELECTRA with its replaced-token-detection head."""

    PRETRAINING_HEADS = frozenset({"rtd"})

    def __init__(self, config: ElectraConfig):
        super().__init__(config)
        self.electra = ElectraModel(self.config)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(self.config)
        self.apply(self._init_weights)

    def replaced_token_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """One logit per position (B, T) of final hidden states (B, T, D): > 0 says "replaced"."""
        return self.discriminator_predictions(sequence_output)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> ElectraForPreTrainingOutput:
        """labels (B, T): 1 where the token was replaced, 0 where it is the original."""
        outputs = self.electra(input_ids, token_type_ids, attention_mask, head_mask, output_attentions,
                               output_hidden_states)
        logits = self.discriminator_predictions(outputs.last_hidden_state)  # (B, T)
        loss = None
        if labels is not None:
            # Padding is neither replaced nor original: only the positions attention_mask keeps are scored.
            real = torch.ones_like(labels, dtype=torch.bool) if attention_mask is None else attention_mask == 1
            loss = F.binary_cross_entropy_with_logits(logits[real].float(), labels[real].float())
        return ElectraForPreTrainingOutput(loss, logits, outputs.hidden_states, outputs.attentions)


class ElectraGeneratorPredictions(nn.Module):
    """The generator's MLM transform: dense down to embedding_size, GELU, LayerNorm."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.activation = ACTIVATION_FUNCTIONS["gelu"]  # GELU whatever hidden_act says, as ELECTRA's code has it

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.activation(self.dense(hidden_states)))  # (B, T, E)


class ElectraForMaskedLM(MaskedLMForward, BertPreTrainedModel):
    """The generator: ELECTRA with a masked-LM head whose decoder is the word-embedding matrix."""

    PRETRAINING_HEADS = frozenset({"mlm"})
    base_model_prefix = "electra"

    def __init__(self, config: ElectraConfig):
        super().__init__(config)
        self.electra = ElectraModel(self.config)
        self.generator_predictions = ElectraGeneratorPredictions(self.config)
        self.generator_lm_head = nn.Linear(self.config.embedding_size, self.config.vocab_size)
        self.apply(self._init_weights)
        self.generator_lm_head.weight = self.electra.embeddings.word_embeddings.weight  # tied; the bias is its own

    @property
    def has_pretraining_heads(self) -> bool:
        return True  # its head is always built and saved with it

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.generator_lm_head(self.generator_predictions(sequence_output))


class ElectraForSequenceClassification(FirstTokenSequenceClassification, BertPreTrainedModel):
    """ELECTRA with its sentence head on [CLS]: RoBERTa's head with GELU where RoBERTa has tanh (as the ELECTRA
    authors' code has it), no pooler."""

    base_model_prefix = "electra"
    encoder_class = ElectraModel
    head_activation = "gelu"


class ElectraForTokenClassification(EncoderForTokenClassification, BertPreTrainedModel):
    """ELECTRA with a tag per position: dropout and a linear classifier."""

    base_model_prefix = "electra"
    encoder_class = ElectraModel


class ElectraForQuestionAnswering(EncoderForQuestionAnswering, BertPreTrainedModel):
    """ELECTRA with a start and an end score per position (qa_outputs)."""

    base_model_prefix = "electra"
    encoder_class = ElectraModel
