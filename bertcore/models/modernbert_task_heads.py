"""ModernBERT's fine-tuning heads, named as in transformers' `modeling_modernbert.py`: sequence classification
([CLS] or mean pooling), token classification and question answering, each the prediction head, dropout and a
`classifier` over `ModernBertModel`; the task logic they share with every family is in `bertcore.models.task_heads`.
"""

from __future__ import annotations

import torch
from torch import nn

from bertcore.models.modernbert import ModernBertModel, ModernBertPredictionHead, ModernBertPreTrainedModel
from bertcore.models.task_heads import (
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
    split_span_logits,
)


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
