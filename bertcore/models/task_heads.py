"""Fine-tuning heads on the shared `BertModel`, with transformers' class, parameter and output names.

A fine-tuned checkpoint from the HuggingFace hub (e.g. a `BertForSequenceClassification` folder with
`id2label`) loads without a mapping table, and ours load in transformers as the same class:
sequence classification (the pooled [CLS] vector) -> token classification (every position) -> extractive QA
(a start and an end score at every position) -> the architecture registry -> starting a task model from a
pretraining checkpoint.

Sequence classification reads only [CLS], so (when nobody asked for attentions or hidden states) its last layer
runs at [CLS] alone and padding is left out of every layer's dense work (`query_positions` in model.py). Token
classification and QA return logits at every position, padding included, exactly as transformers computes
them, so they run the whole padded batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.models.bert import IGNORE_INDEX, BertModel, BertPreTrainedModel
from bertcore.models.config import BertConfig
from bertcore.models.families import FAMILIES, resolve


@dataclass
class SequenceClassifierOutput:
    loss: torch.Tensor | None  # () for the labels given
    logits: torch.Tensor  # (B, num_labels)
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D): embeddings, then each layer
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


@dataclass
class TokenClassifierOutput:
    loss: torch.Tensor | None  # () mean cross-entropy over positions whose label is not -100
    logits: torch.Tensor  # (B, T, num_labels)
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D)
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


@dataclass
class QuestionAnsweringModelOutput:
    loss: torch.Tensor | None  # () mean of the start and end cross-entropies
    start_logits: torch.Tensor  # (B, T): score of each position as the answer's first token
    end_logits: torch.Tensor  # (B, T): score of each position as the answer's last token
    hidden_states: tuple[torch.Tensor, ...] | None  # L + 1 of (B, T, D)
    attentions: tuple[torch.Tensor, ...] | None  # L of (B, nh, T, T)


def _classifier_dropout(config: BertConfig) -> nn.Dropout:
    return nn.Dropout(config.hidden_dropout_prob if config.classifier_dropout is None else config.classifier_dropout)


class BertForSequenceClassification(BertPreTrainedModel):
    """A class (or several, or a number) per sequence or sentence pair, from the pooled [CLS] vector."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.num_labels = self.config.num_labels
        self.bert = BertModel(self.config)
        self.dropout = _classifier_dropout(self.config)
        self.classifier = nn.Linear(self.config.hidden_size, self.num_labels)
        self.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> SequenceClassifierOutput:
        """labels: (B,) class ids (long), (B, num_labels) 0/1 floats for multi-label, (B,) floats for regression."""
        # Only the pooled [CLS] vector is read: unless every position was asked for, compute [CLS] alone.
        full = output_attentions or output_hidden_states
        query_positions = None if full else torch.zeros_like(input_ids[:, :1])  # (B, 1)
        outputs = self.bert(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                            head_mask=head_mask, output_attentions=output_attentions,
                            output_hidden_states=output_hidden_states, query_positions=query_positions)
        logits = self.classifier(self.dropout(outputs.pooler_output))  # (B, num_labels)
        loss = None if labels is None else self._loss(logits, labels)
        return SequenceClassifierOutput(loss, logits, outputs.hidden_states, outputs.attentions)

    def problem_type_for(self, labels: torch.Tensor) -> str:
        """config.problem_type, else inferred from the labels as transformers does: one output is regression;
        integer labels are single-label classes; anything else is multi-label. (transformers also writes the
        inferred type into its config; a frozen config cannot, so it is inferred at every call.)"""
        if self.config.problem_type is not None:
            return self.config.problem_type
        if self.num_labels == 1:
            return "regression"
        if labels.dtype in (torch.long, torch.int):
            return "single_label_classification"
        return "multi_label_classification"

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        problem_type = self.problem_type_for(labels)
        if problem_type == "regression":
            if self.num_labels == 1:
                return F.mse_loss(logits.squeeze(), labels.squeeze().to(logits.dtype))
            return F.mse_loss(logits, labels.to(logits.dtype))
        if problem_type == "single_label_classification":
            return F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))  # -100 is ignored
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


class BertForTokenClassification(BertPreTrainedModel):
    """A class per position (e.g. BIO named-entity tags); positions labelled -100 take no part in the loss."""

    def __init__(self, config: BertConfig):
        super().__init__(config)
        self.num_labels = self.config.num_labels
        self.bert = BertModel(self.config, add_pooling_layer=False)
        self.dropout = _classifier_dropout(self.config)
        self.classifier = nn.Linear(self.config.hidden_size, self.num_labels)
        self.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> TokenClassifierOutput:
        """labels: (B, T) class ids, -100 where a position is not scored (padding, specials, later sub-tokens)."""
        outputs = self.bert(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                            head_mask=head_mask, output_attentions=output_attentions,
                            output_hidden_states=output_hidden_states)
        logits = self.classifier(self.dropout(outputs.last_hidden_state))  # (B, T, num_labels)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.float().view(-1, self.num_labels), labels.view(-1),
                                   ignore_index=IGNORE_INDEX)
        return TokenClassifierOutput(loss, logits, outputs.hidden_states, outputs.attentions)


class BertForQuestionAnswering(BertPreTrainedModel):
    """Extractive QA: a start and an end score at every position; the answer is the best span."""

    def __init__(self, config: BertConfig):
        if config.num_labels != 2:
            raise ValueError(f"a question-answering head has 2 outputs (start, end) but num_labels is "
                             f"{config.num_labels}; use config.replace(num_labels=2)")
        super().__init__(config)
        self.num_labels = 2
        self.bert = BertModel(self.config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(self.config.hidden_size, 2)
        self.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> QuestionAnsweringModelOutput:
        """start_positions, end_positions: (B,) token index of the answer's first and last token. An index
        outside the input (an answer cut off by the window) is clamped to T and takes no part in the loss."""
        outputs = self.bert(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                            head_mask=head_mask, output_attentions=output_attentions,
                            output_hidden_states=output_hidden_states)
        logits = self.qa_outputs(outputs.last_hidden_state)  # (B, T, 2)
        start_logits, end_logits = (part.squeeze(-1).contiguous() for part in logits.split(1, dim=-1))  # (B, T)
        loss = None
        if start_positions is not None and end_positions is not None:
            seq_len = start_logits.size(1)  # the "ignored" class, as transformers does
            start_positions = start_positions.view(-1).clamp(0, seq_len)
            end_positions = end_positions.view(-1).clamp(0, seq_len)
            start_loss = F.cross_entropy(start_logits.float(), start_positions, ignore_index=seq_len)
            end_loss = F.cross_entropy(end_logits.float(), end_positions, ignore_index=seq_len)
            loss = (start_loss + end_loss) / 2
        return QuestionAnsweringModelOutput(loss, start_logits, end_logits, outputs.hidden_states, outputs.attentions)


# config.json's "architectures" -> the class that loads those weights, for BERT (bertcore.models.families holds
# every family's table; this is BERT's, resolved). The bare-encoder name loads as BertForPreTraining (a checkpoint
# without MLM/NSP heads gets has_pretraining_heads = False).
ARCHITECTURES: dict[str, type[BertPreTrainedModel]] = {
    name: FAMILIES["bert"].model_class(name) for name in FAMILIES["bert"].architectures
}


def model_class_for(config: BertConfig) -> type[BertPreTrainedModel]:
    """The class for config.architectures' first name, in the family of its model_type; the family's default
    (BertForPreTraining) when it names none, and for a name of the family without a class here (e.g.
    BertForNextSentencePrediction): then its encoder loads. UnsupportedModelError (a ValueError) naming the
    architecture and the supported ones for any other name (a GPT2LMHeadModel config.json)."""
    family, name = resolve(config.to_dict())
    return family.model_class(name)


@dataclass(frozen=True)
class WeightTransfer:
    """What starting a model from another's weights did, by parameter name."""

    loaded: tuple[str, ...]  # copied from the source
    initialised: tuple[str, ...]  # new: not in the source (the task head; the pooler if the source had none)
    dropped: tuple[str, ...]  # in the source but not in this model (e.g. the pretraining heads cls.*)

    def __str__(self) -> str:
        return (f"{len(self.loaded)} tensors loaded; newly initialised: {_names(self.initialised)}; "
                f"dropped: {_names(self.dropped)}")


def start_from_pretrained(
    model_class: type[BertPreTrainedModel],
    config: BertConfig,
    source: nn.Module | Mapping[str, torch.Tensor],
) -> tuple[BertPreTrainedModel, WeightTransfer]:
    """A new `model_class` (a task head) whose encoder and pooler come from `source`.

    source: a model (e.g. a loaded BertForPreTraining) or its state dict, with this package's parameter names
    (`bert.embeddings...`, as `checkpoint.load_pretrained` gives). config: the task's config, usually the
    source's with the task fields set: `pretrained.config.replace(num_labels=3, id2label=...)`. The encoder
    must be complete and of the same shape; the head (and a missing pooler) is freshly initialised from
    torch's global RNG (seed it for a reproducible start).
    """
    state_dict = source.state_dict() if isinstance(source, nn.Module) else dict(source)
    model = model_class(config)
    own = model.state_dict()
    missing_encoder = sorted(name for name in own.keys() - state_dict.keys()
                             if name.startswith(("bert.embeddings.", "bert.encoder.")))
    if missing_encoder:
        raise ValueError(f"the source lacks {len(missing_encoder)} encoder tensor(s), e.g. {_names(missing_encoder)}; "
                         "start from a BERT checkpoint with the same number of layers")
    loaded = sorted(own.keys() & state_dict.keys())
    for name in loaded:
        if state_dict[name].shape != own[name].shape:
            raise ValueError(f"tensor {name} has shape {tuple(state_dict[name].shape)} in the source but "
                             f"{tuple(own[name].shape)} in the new model; build the task config from the "
                             "source's config (source.config.replace(num_labels=...))")
    with torch.no_grad():
        for name in loaded:
            own[name].copy_(state_dict[name])
    return model, WeightTransfer(
        loaded=tuple(loaded),
        initialised=tuple(sorted(own.keys() - state_dict.keys())),
        dropped=tuple(sorted(state_dict.keys() - own.keys())),
    )


def _names(names) -> str:
    names = list(names)
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "") if names else "none"
