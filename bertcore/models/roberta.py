"""RoBERTa (Liu et al. 2019) and XLM-RoBERTa (Conneau et al. 2020): BERT's encoder, trained differently.

The layers are BERT's, block for block (`bertcore.models.bert.BertEncoder` and `BertPooler`, reused as they are).
What differs is the input side and the head: positions are counted from `padding_idx + 1` over the real tokens
only, as fairseq did (a pad token keeps the padding row, so the first real token is at position pad + 1 and the
table holds `max_position_embeddings - pad - 1` usable positions); there is one segment type; and the MLM head is
`lm_head` (dense -> GELU -> layer_norm -> decoder tied to the word embeddings, with its own bias). XLM-RoBERTa is
the same model with a larger vocabulary; only model_type and the class names in config.json differ.

Class and parameter names are those of transformers' `modeling_roberta.py`, so its `state_dict`s load as they are:
config -> embeddings -> RobertaModel -> LM head -> RobertaForMaskedLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from bertcore.models.bert import (
    BertEmbeddings,
    BertEncoder,
    BertModelOutput,
    BertPooler,
    BertPreTrainedModel,
    MaskedLMForward,
)
from bertcore.models.config import BertConfig
from bertcore.models.parts import PretrainingHeads, prepare_encoder_inputs
from bertcore.models.task_heads import (
    EncoderForQuestionAnswering,
    EncoderForTokenClassification,
    FirstTokenSequenceClassification,
)

ROBERTA_MODEL_TYPES = ("roberta", "xlm-roberta")
_CLASS_PREFIX = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta"}  # what transformers calls each one's classes


@dataclass(frozen=True)
class RobertaConfig(BertConfig):
    """BERT's fields (validated as BertConfig validates them) with roberta-base's defaults, and which of the two
    model types it is (they write different class names into config.json)."""

    vocab_size: int = 50265  # byte-level BPE vocabulary (XLM-R's SentencePiece one has 250002)
    max_position_embeddings: int = 514  # 512 usable positions after the pad offset
    type_vocab_size: int = 1  # one segment type: no sentence-pair embedding
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1  # <pad>; positions are counted from pad_token_id + 1
    model_type: str = "roberta"  # or "xlm-roberta"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model_type not in ROBERTA_MODEL_TYPES:
            raise ValueError(f"model_type is {self.model_type!r}; RobertaConfig reads "
                             f"{' or '.join(ROBERTA_MODEL_TYPES)}")
        if self.max_position_embeddings <= self.pad_token_id + 1:
            raise ValueError(f"max_position_embeddings {self.max_position_embeddings} leaves no position after the "
                             f"padding offset (pad_token_id {self.pad_token_id} + 1); RoBERTa uses 514")

    @property
    def max_length(self) -> int:
        """The longest input: the position table less the rows at and below the padding index."""
        return self.max_position_embeddings - self.pad_token_id - 1

    def architecture(self, suffix: str) -> str:
        """transformers' class name for this model type: "Roberta" or "XLMRoberta" + suffix ("ForMaskedLM")."""
        return _CLASS_PREFIX[self.model_type] + suffix

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RobertaConfig:
        model_type = values.get("model_type", "roberta")
        if model_type not in ROBERTA_MODEL_TYPES:
            raise ValueError(f"model_type is {model_type!r}; RobertaConfig reads {' or '.join(ROBERTA_MODEL_TYPES)} "
                             "configs — build this model from the config class of its own family")
        config = super().from_dict({key: value for key, value in values.items() if key != "model_type"})
        return config.replace(model_type=model_type)


def position_ids_from_input_ids(input_ids: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """(B, T) positions: padding_idx + 1, + 2, … over the tokens that are not padding; padding_idx at padding."""
    is_token = input_ids.ne(padding_idx).long()  # (B, T)
    return is_token.cumsum(dim=1) * is_token + padding_idx


class RobertaEmbeddings(BertEmbeddings):
    """BERT's embeddings with positions counted over the real tokens from padding_idx + 1."""

    def __init__(self, config: RobertaConfig):
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size,
                                                padding_idx=config.pad_token_id)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        position_ids = position_ids_from_input_ids(input_ids, self.padding_idx)  # (B, T)
        embeddings = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )  # (B, T, D)
        return self.dropout(self.LayerNorm(embeddings))


class RobertaModel(nn.Module):
    """The encoder: embeddings, BERT's layers, and (for sequence classification) BERT's pooler."""

    def __init__(self, config: RobertaConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = RobertaEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertModelOutput:
        """head_mask (L, nh): each head's output is multiplied by its entry (0 removes the head). With one segment
        type, token_type_ids are ignored: a BERT-style pair encoding (segment ids 0/1) reads as one sequence."""
        if input_ids.dim() == 2 and input_ids.size(1) > self.config.max_length:
            raise ValueError(f"the input has {input_ids.size(1)} positions; this model accepts at most "
                             f"{self.config.max_length} — truncate it (tokenizer.encode(max_length=...))")
        if self.config.type_vocab_size == 1:
            token_type_ids = None
        token_type_ids, key_padding_mask, head_mask = prepare_encoder_inputs(
            self.config, input_ids, token_type_ids, attention_mask, head_mask, self.config.num_hidden_layers,
            self.embeddings.word_embeddings.weight.dtype,
        )
        hidden_states = self.embeddings(input_ids, token_type_ids)  # (B, T, D)
        last_hidden_state, hidden_states, attentions = self.encoder(
            hidden_states, key_padding_mask, head_mask, output_attentions, output_hidden_states
        )
        pooler_output = None if self.pooler is None else self.pooler(last_hidden_state)
        return BertModelOutput(last_hidden_state, pooler_output, hidden_states, attentions)


class RobertaLMHead(nn.Module):
    """dense -> GELU (the exact erf form, whatever hidden_act says) -> layer_norm -> decoder tied to the word
    embeddings, with its own bias."""

    def __init__(self, config: RobertaConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.decoder.bias = self.bias  # one tensor under both standard names

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.layer_norm(F.gelu(self.dense(features))))  # (..., V)


class RobertaForMaskedLM(MaskedLMForward, PretrainingHeads, BertPreTrainedModel):
    """RoBERTa with its masked-LM head (no pooler): what roberta-base and xlm-roberta-base are published as."""

    PRETRAINING_HEADS = frozenset({"mlm"})
    base_model_prefix = "roberta"

    def __init__(self, config: RobertaConfig):
        super().__init__(config)
        self.config = self.config.replace(architectures=(config.architecture("ForMaskedLM"),))
        self.roberta = RobertaModel(self.config, add_pooling_layer=False)
        self.lm_head = RobertaLMHead(self.config)
        self.apply(self._init_weights)
        self.lm_head.decoder.weight = self.roberta.embeddings.word_embeddings.weight  # tied

    def mlm_logits(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Vocabulary scores (..., V) of final hidden states (..., D)."""
        return self.lm_head(sequence_output)


class RobertaForSequenceClassification(FirstTokenSequenceClassification, BertPreTrainedModel):
    """RoBERTa with its sentence head on <s> (dense + tanh, then out_proj), no pooler."""

    base_model_prefix = "roberta"
    encoder_class = RobertaModel
    head_activation = "tanh"


class RobertaForTokenClassification(EncoderForTokenClassification, BertPreTrainedModel):
    """RoBERTa with a tag per position: dropout and a linear classifier."""

    base_model_prefix = "roberta"
    encoder_class = RobertaModel


class RobertaForQuestionAnswering(EncoderForQuestionAnswering, BertPreTrainedModel):
    """RoBERTa with a start and an end score per position (qa_outputs)."""

    base_model_prefix = "roberta"
    encoder_class = RobertaModel
