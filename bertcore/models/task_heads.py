"""Fine-tuning heads for every family, with transformers' class, parameter and output names.

A fine-tuned checkpoint from the HuggingFace hub (e.g. a `RobertaForSequenceClassification` folder with
`id2label`) loads without a mapping table, and ours load in transformers as the same class. Reading order:
outputs -> losses -> what every task model shares (`TaskModel`: the family's encoder under its own name) ->
the three kinds of head (`EncoderForSequenceClassification`, `EncoderForTokenClassification`,
`EncoderForQuestionAnswering`), each with the head most families agree on -> the sentence head that RoBERTa and
ELECTRA share -> BERT's three classes -> the registry -> starting a task model from a pretrained model's
weights (`start_from_pretrained`).

A family's own classes live in its module and differ only where the family does: RoBERTa's and ELECTRA's
sequence head is `ClassificationHead` (dense + tanh or GELU on the first token); DistilBERT's is
`pre_classifier` + ReLU and its QA head drops out first; ALBERT's heads are BERT's with its own dropout field;
ModernBERT's run its `head` (dense, GELU, norm) before `classifier`, after pooling [CLS] or the mean. Each head's
arithmetic is one method (`sequence_logits`, `token_logits`, `span_logits`), which `forward` and the app's task
view (bertcore.tasks.outputs) both call.

BERT's sequence classification reads only [CLS], so (when nobody asked for attentions or hidden states) its last
layer runs at [CLS] alone and padding is left out of every layer's dense work (`query_positions` in bert.py).
Token classification and QA return logits at every position, padding included, exactly as transformers computes
them, so they run the whole padded batch.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.models.bert import BertModel, BertPreTrainedModel
from bertcore.models.config import BertConfig
from bertcore.models.families import FAMILIES, family_for, resolve
from bertcore.models.parts import ACTIVATION_FUNCTIONS, IGNORE_INDEX


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


def problem_type_of(config, labels: torch.Tensor) -> str:
    """config.problem_type, else inferred from the labels as transformers does: one output is regression;
    integer labels are single-label classes; anything else is multi-label. (transformers also writes the
    inferred type into its config; a frozen config cannot, so it is inferred at every call.)"""
    if config.problem_type is not None:
        return config.problem_type
    if config.num_labels == 1:
        return "regression"
    if labels.dtype in (torch.long, torch.int):
        return "single_label_classification"
    return "multi_label_classification"


def sequence_classification_loss(logits: torch.Tensor, labels: torch.Tensor, problem_type: str) -> torch.Tensor:
    """logits (B, C) against labels of the problem type: MSE, cross-entropy (-100 ignored) or per-label BCE."""
    logits = logits.float()
    num_labels = logits.size(-1)
    if problem_type == "regression":
        if num_labels == 1:
            return F.mse_loss(logits.squeeze(), labels.squeeze().to(logits.dtype))
        return F.mse_loss(logits, labels.to(logits.dtype))
    if problem_type == "single_label_classification":
        return F.cross_entropy(logits.view(-1, num_labels), labels.view(-1))
    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def token_classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """logits (B, T, C) against tags (B, T), -100 where a position is not scored."""
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1),
                           ignore_index=IGNORE_INDEX)


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, start_positions: torch.Tensor,
              end_positions: torch.Tensor) -> torch.Tensor:
    """The mean of the start and end cross-entropies over the positions (B, T). An index outside the input (an
    answer cut off by the window) is clamped to T, the "ignored" class, as transformers does."""
    seq_len = start_logits.size(1)
    start_positions = start_positions.view(-1).clamp(0, seq_len)
    end_positions = end_positions.view(-1).clamp(0, seq_len)
    start_loss = F.cross_entropy(start_logits.float(), start_positions, ignore_index=seq_len)
    end_loss = F.cross_entropy(end_logits.float(), end_positions, ignore_index=seq_len)
    return (start_loss + end_loss) / 2


class TaskModel(nn.Module):
    """What every task model shares, whatever its family: the encoder under the family's own name
    (`base_model_prefix`: "bert", "roberta", "model"…), built by the family's `encoder_class`, and called by
    keyword (ModernBERT's forward orders its arguments differently). Mixed in before the family's pretrained
    base (BertPreTrainedModel, ModernBertPreTrainedModel), which holds the config and the weight init."""

    base_model_prefix: ClassVar[str]  # the attribute holding the encoder, and its parameters' name prefix
    encoder_class: ClassVar[type]  # the family's bare encoder (BertModel, RobertaModel, ModernBertModel…)
    architecture_suffix: ClassVar[str]  # "ForSequenceClassification"…: transformers' class name after the family's
    uses_pooler: ClassVar[bool] = False  # whether the encoder is built with its pooler (BERT's, ALBERT's sentence head)

    def __init__(self, config):
        super().__init__(config)  # the family's pretrained base: self.config, naming this class in architectures
        if hasattr(self.config, "architecture"):  # XLM-RoBERTa's classes carry their own prefix
            self.config = self.config.replace(architectures=(self.config.architecture(self.architecture_suffix),))
        pooling = {"add_pooling_layer": self.uses_pooler} if _takes_pooling_flag(self.encoder_class) else {}
        setattr(self, self.base_model_prefix, self.encoder_class(self.config, **pooling))
        self._add_head()  # each kind of task head (and a family's own) adds its modules, under transformers' names
        self.apply(self._init_weights)

    def encode(self, input_ids, attention_mask, token_type_ids, head_mask, output_attentions, output_hidden_states):
        encoder = getattr(self, self.base_model_prefix)
        return encoder(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask, head_mask=head_mask,
                       output_attentions=output_attentions, output_hidden_states=output_hidden_states)


def _takes_pooling_flag(encoder_class: type) -> bool:
    return "add_pooling_layer" in inspect.signature(encoder_class.__init__).parameters


def classifier_dropout(config) -> float:
    """BERT's rule, which RoBERTa and ELECTRA share: classifier_dropout, else hidden_dropout_prob."""
    return config.hidden_dropout_prob if config.classifier_dropout is None else config.classifier_dropout


class EncoderForSequenceClassification(TaskModel):
    """A class (or several, or a number) per sequence or sentence pair. The head most families agree on (BERT,
    ALBERT): dropout and a linear classifier on the pooled [CLS] vector; a family whose head differs overrides
    `_add_head` and `sequence_logits`."""

    architecture_suffix = "ForSequenceClassification"
    uses_pooler = True

    def _add_head(self) -> None:
        self.dropout = nn.Dropout(self.head_dropout())
        self.classifier = nn.Linear(self.config.hidden_size, self.config.num_labels)

    def head_dropout(self) -> float:
        return classifier_dropout(self.config)

    def sequence_logits(self, outputs, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """(B, num_labels) from the encoder's outputs."""
        return self.classifier(self.dropout(outputs.pooler_output))

    @property
    def num_labels(self) -> int:
        return self.config.num_labels

    def problem_type_for(self, labels: torch.Tensor) -> str:
        return problem_type_of(self.config, labels)

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
        outputs = self.encode(input_ids, attention_mask, token_type_ids, head_mask, output_attentions,
                              output_hidden_states)
        logits = self.sequence_logits(outputs, attention_mask)  # (B, num_labels)
        loss = None if labels is None else sequence_classification_loss(logits, labels, self.problem_type_for(labels))
        return SequenceClassifierOutput(loss, logits, outputs.hidden_states, outputs.attentions)


class EncoderForTokenClassification(TaskModel):
    """A class per position (e.g. BIO named-entity tags); positions labelled -100 take no part in the loss. The
    head every family but ModernBERT has: dropout and a linear classifier at every position."""

    architecture_suffix = "ForTokenClassification"

    def _add_head(self) -> None:
        self.dropout = nn.Dropout(self.head_dropout())
        self.classifier = nn.Linear(self.config.hidden_size, self.config.num_labels)

    def head_dropout(self) -> float:
        return classifier_dropout(self.config)

    def token_logits(self, outputs) -> torch.Tensor:
        """(B, T, num_labels) from the encoder's outputs."""
        return self.classifier(self.dropout(outputs.last_hidden_state))

    @property
    def num_labels(self) -> int:
        return self.config.num_labels

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
        outputs = self.encode(input_ids, attention_mask, token_type_ids, head_mask, output_attentions,
                              output_hidden_states)
        logits = self.token_logits(outputs)  # (B, T, num_labels)
        loss = None if labels is None else token_classification_loss(logits, labels)
        return TokenClassifierOutput(loss, logits, outputs.hidden_states, outputs.attentions)


class EncoderForQuestionAnswering(TaskModel):
    """Extractive QA: a start and an end score at every position; the answer is the best span. The head BERT,
    RoBERTa, ELECTRA and ALBERT share: one linear layer `qa_outputs` (no dropout: `head_dropout` 0)."""

    architecture_suffix = "ForQuestionAnswering"

    def __init__(self, config):
        if config.num_labels != 2:
            raise ValueError(f"a question-answering head has 2 outputs (start, end) but num_labels is "
                             f"{config.num_labels}; use config.replace(num_labels=2)")
        super().__init__(config)

    def _add_head(self) -> None:
        self.qa_outputs = nn.Linear(self.config.hidden_size, 2)

    def span_logits(self, outputs) -> tuple[torch.Tensor, torch.Tensor]:
        """start and end logits, (B, T) each, from the encoder's outputs."""
        return split_span_logits(self.qa_outputs(outputs.last_hidden_state))

    @property
    def num_labels(self) -> int:
        return 2

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
        outputs = self.encode(input_ids, attention_mask, token_type_ids, head_mask, output_attentions,
                              output_hidden_states)
        start_logits, end_logits = self.span_logits(outputs)  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        return QuestionAnsweringModelOutput(loss, start_logits, end_logits, outputs.hidden_states, outputs.attentions)


def split_span_logits(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    start_logits, end_logits = (part.squeeze(-1).contiguous() for part in logits.split(1, dim=-1))  # (B, T)
    return start_logits, end_logits


class ClassificationHead(nn.Module):
    """RoBERTa's and ELECTRA's sentence head, on the first token (<s> or [CLS]) instead of a pooler: dropout,
    dense, activation (tanh for RoBERTa, GELU for ELECTRA), dropout, `out_proj`."""

    def __init__(self, config, activation: str):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = torch.tanh if activation == "tanh" else ACTIVATION_FUNCTIONS[activation]
        self.dropout = nn.Dropout(classifier_dropout(config))
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        first = self.dropout(hidden_states[:, 0])  # (B, D)
        return self.out_proj(self.dropout(self.activation(self.dense(first))))  # (B, num_labels)


class FirstTokenSequenceClassification(EncoderForSequenceClassification):
    """Sequence classification through `ClassificationHead` (RoBERTa: tanh; ELECTRA: GELU); no pooler."""

    uses_pooler = False
    head_activation: ClassVar[str]

    def _add_head(self) -> None:
        self.classifier = ClassificationHead(self.config, self.head_activation)

    def sequence_logits(self, outputs, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return self.classifier(outputs.last_hidden_state)


# ---- BERT ------------------------------------------------------------------------------------------------------

class BertForSequenceClassification(EncoderForSequenceClassification, BertPreTrainedModel):
    """A class (or several, or a number) per sequence or sentence pair, from the pooled [CLS] vector."""

    base_model_prefix = "bert"
    encoder_class = BertModel

    def encode(self, input_ids, attention_mask, token_type_ids, head_mask, output_attentions, output_hidden_states):
        # Only the pooled [CLS] vector is read: unless every position was asked for, compute [CLS] alone.
        full = output_attentions or output_hidden_states
        query_positions = None if full else torch.zeros_like(input_ids[:, :1])  # (B, 1)
        return self.bert(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                         head_mask=head_mask, output_attentions=output_attentions,
                         output_hidden_states=output_hidden_states, query_positions=query_positions)


class BertForTokenClassification(EncoderForTokenClassification, BertPreTrainedModel):
    """A class per position (e.g. BIO named-entity tags); positions labelled -100 take no part in the loss."""

    base_model_prefix = "bert"
    encoder_class = BertModel


class BertForQuestionAnswering(EncoderForQuestionAnswering, BertPreTrainedModel):
    """Extractive QA: a start and an end score at every position; the answer is the best span."""

    base_model_prefix = "bert"
    encoder_class = BertModel


# ---- the registry ----------------------------------------------------------------------------------------------

# config.json's "architectures" -> the class that loads those weights, for BERT (bertcore.models.families holds
# every family's table; this is BERT's, resolved). The bare-encoder name loads as BertForPreTraining (a checkpoint
# without MLM/NSP heads gets has_pretraining_heads = False).
ARCHITECTURES: dict[str, type[BertPreTrainedModel]] = {
    name: FAMILIES["bert"].model_class(name) for name in FAMILIES["bert"].architectures
}
TASK_HEAD_KINDS = (EncoderForSequenceClassification, EncoderForTokenClassification, EncoderForQuestionAnswering)


def model_class_for(config: BertConfig) -> type[BertPreTrainedModel]:
    """The class for config.architectures' first name, in the family of its model_type; the family's default
    (BertForPreTraining) when it names none, and for a name of the family without a class here (e.g.
    BertForNextSentencePrediction): then its encoder loads. UnsupportedModelError (a ValueError) naming the
    architecture and the supported ones for any other name (a GPT2LMHeadModel config.json)."""
    family, name = resolve(config.to_dict())
    return family.model_class(name)


def task_model_class(config: Any, kind: type[TaskModel]) -> type[TaskModel]:
    """The class of config's family for a kind of task head (one of TASK_HEAD_KINDS): for a RoBERTa config and
    EncoderForTokenClassification, RobertaForTokenClassification."""
    family = family_for(config.to_dict())
    return family.model_class(family.class_prefix + kind.architecture_suffix)


# ---- starting a task model from a pretrained model's weights: the encoder (and pooler) copied over, the head
# new, and a WeightTransfer saying which tensors were loaded, newly initialised and dropped

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
    model_class: type[TaskModel],
    config: Any,
    source: nn.Module | Mapping[str, torch.Tensor],
) -> tuple[TaskModel, WeightTransfer]:
    """A new `model_class` (a task head) whose encoder (and pooler) come from `source`.

    source: a model (e.g. a loaded BertForPreTraining or RobertaForMaskedLM) or its state dict, with this
    package's parameter names (`bert.embeddings...`, `roberta.encoder...`, as `checkpoint.load_pretrained`
    gives). config: the task's config, usually the source's with the task fields set:
    `pretrained.config.replace(num_labels=3, id2label=...)`. The encoder must be complete and of the same shape;
    the head (and a missing pooler) is freshly initialised from torch's global RNG (seed it for a reproducible
    start).
    """
    state_dict = source.state_dict() if isinstance(source, nn.Module) else dict(source)
    model = model_class(config)
    own = model.state_dict()
    prefix = model_class.base_model_prefix + "."
    missing_encoder = sorted(name for name in own.keys() - state_dict.keys()
                             if name.startswith(prefix) and ".pooler" not in name)
    if missing_encoder:
        raise ValueError(f"the source lacks {len(missing_encoder)} encoder tensor(s), e.g. {_names(missing_encoder)}; "
                         f"start from a {model_class.__name__.split('For')[0]} checkpoint with the same number of "
                         "layers")
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
