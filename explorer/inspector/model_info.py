"""What the window knows of a loaded model: `ModelInfo` (name, size, heads, task, for the title and the model
label), `describe_model` that reads it off a model of any family, and `LoadedModel` (model, tokenizer, info)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bertcore.analysis.inspection import max_input_length
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TOKEN_TASK
from bertcore.tokenization.wordpiece import BertTokenizer


@dataclass(frozen=True)
class ModelInfo:
    """What the window title and the model label say about the loaded model."""

    name: str  # "mini", "all-MiniLM-L6-v2", a checkpoint folder's name
    path: str | None  # checkpoint folder it was loaded from; None for a model built in memory
    untrained: bool  # randomly initialised: its predictions and attention patterns mean nothing yet
    num_parameters: int
    device: str
    has_pretraining_heads: bool  # an MLM or an NSP head (False for a bare encoder and for a fine-tuned task model)
    num_layers: int
    num_heads: int
    max_positions: int
    task: str | None = None  # a fine-tuned model's head: "sequence", "token" or "qa" (bertcore.models.task_heads)
    task_labels: tuple[str, ...] = ()  # its labels in class-id order (config.id2label); () for qa
    problem_type: str | None = None  # sequence: single_label_classification, multi_label_classification, regression
    has_mlm_head: bool = False  # masked-token predictions are the model's own (BertForMaskedLM has this alone)
    has_nsp_head: bool = False  # the is-next probability is the model's own (BertForPreTraining only)
    has_sop_head: bool = False  # ALBERT's sentence-order head (AlbertForPreTraining), shown where NSP would be
    has_replaced_token_head: bool = False  # ELECTRA's discriminator: the token table's "replaced?" row
    local_layers: tuple[int, ...] = ()  # ModernBERT's layers that attend within a window (the rest: global)
    # The tokenizer's ids against the embedding's rows where they differ: "400 tokens for 403 embedding rows (3
    # unused)", as bertcore read the checkpoint (its tokenizer's vocabulary_note); None where they agree.
    vocabulary_note: str | None = None

    @property
    def task_description(self) -> str:
        """The task head in words, e.g. "sequence classification: exclamation, question, statement"."""
        if self.task is None:
            return ""
        if self.task == QA_TASK:
            return "question answering (start/end of a span)"
        if self.task == TOKEN_TASK:
            kind = "token classification"
        else:
            kind = {"regression": "regression", "multi_label_classification": "multi-label classification"}.get(
                self.problem_type or "", "sequence classification")
        shown = ", ".join(self.task_labels[:6]) + (f" and {len(self.task_labels) - 6} more"
                                                    if len(self.task_labels) > 6 else "")
        return f"{kind}: {shown}" if kind != "regression" else kind

    @property
    def label(self) -> str:
        """One line, e.g. "mini (untrained) · 11.2M parameters · cpu"."""
        name = f"{self.name} (untrained)" if self.untrained else self.name
        parts = [name, f"{_human_count(self.num_parameters)} parameters",
                 f"{self.num_layers} layers × {self.num_heads} heads", self.device]
        if self.local_layers:
            parts.append(f"{self.num_layers - len(self.local_layers)} global, {len(self.local_layers)} local layers")
        if self.task is not None:
            parts.append(self.task_description)
        elif self.has_replaced_token_head:
            parts.append("replaced-token detection head (ELECTRA's discriminator)")
        elif self.has_sop_head:
            parts.append("MLM and sentence-order (SOP) heads")
        elif not self.has_pretraining_heads:
            parts.append("no MLM or NSP head")
        elif not self.has_nsp_head:
            parts.append("MLM head, no NSP head")
        if self.vocabulary_note:
            parts.append(self.vocabulary_note)
        return " · ".join(parts)


@dataclass(frozen=True)
class LoadedModel:
    """A model the window can show: the model (in eval mode), its tokenizer and what the window says of it."""

    model: Any
    tokenizer: BertTokenizer
    info: ModelInfo


def task_of(model: Any) -> str | None:
    """"sequence", "token" or "qa" for a fine-tuned model of any family (bertcore.models.task_heads); None for
    any other."""
    from bertcore.models.task_heads import (
        EncoderForQuestionAnswering,
        EncoderForSequenceClassification,
        EncoderForTokenClassification,
    )

    kinds = {EncoderForSequenceClassification: SEQUENCE_TASK, EncoderForTokenClassification: TOKEN_TASK,
             EncoderForQuestionAnswering: QA_TASK}
    return next((kind for head, kind in kinds.items() if isinstance(model, head)), None)


def describe_model(model: Any, name: str, *, path: str | None = None, untrained: bool = False,
                   tokenizer: Any = None) -> ModelInfo:
    """What the window says of `model`; `tokenizer` (its own, as loaded with it) adds what bertcore noted of its
    vocabulary against the embedding table."""
    config = model.config
    parameter = next(model.parameters(), None)
    task = task_of(model)
    problem_type = None
    if task == SEQUENCE_TASK:  # as transformers infers it when config.json does not say
        problem_type = config.problem_type or (
            "regression" if config.num_labels == 1 else "single_label_classification")
    return ModelInfo(
        name=name,
        path=str(path) if path is not None else None,
        untrained=untrained,
        num_parameters=int(model.num_parameters()),
        device=str(parameter.device) if parameter is not None else "cpu",
        has_pretraining_heads=model.has_mlm_head or model.has_nsp_head,
        has_mlm_head=model.has_mlm_head,
        has_nsp_head=model.has_nsp_head,
        has_sop_head=model.has_sop_head,
        has_replaced_token_head=model.has_replaced_token_head,
        local_layers=tuple(config.local_layers()) if hasattr(config, "local_layers") else (),
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        max_positions=max_input_length(config),
        task=task,
        task_labels=tuple(config.id2label.values()) if task in (SEQUENCE_TASK, TOKEN_TASK) else (),
        problem_type=problem_type,
        vocabulary_note=tokenizer.vocabulary_note if tokenizer is not None else None,
    )


def _human_count(count: int) -> str:
    if count >= 1_000_000_000:
        return f"{count / 1e9:.2f}B"
    if count >= 1_000_000:
        return f"{count / 1e6:.1f}M"
    if count >= 1_000:
        return f"{count / 1e3:.1f}k"
    return str(count)
