"""What a task head says about one input, as numpy: the `task_output` of an Inspection (bertcore.analysis.inspection).

One frozen record per kind of head, computed from the encoder outputs the inspection already has (so a head
mask ablates the task output too):
- `SequenceTaskOutput` (any family's ForSequenceClassification): a probability per label and the predicted label.
- `TokenTaskOutput` (any family's ForTokenClassification): a probability per label at every position, the predicted
  tag of each, and which positions are scored (not [CLS]/[SEP]/[PAD]) and which start a word.
- `QuestionAnsweringTaskOutput` (any family's ForQuestionAnswering): start and end probabilities over the positions,
  the best valid span inside sentence B (the context; sentence A is the question), its text, and the null score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from bertcore.models.task_heads import (
    EncoderForQuestionAnswering,
    EncoderForSequenceClassification,
    EncoderForTokenClassification,
)
from bertcore.tasks.kinds import QA_TASK, SEQUENCE_TASK, TOKEN_TASK
from bertcore.tasks.qa import MAX_ANSWER_LENGTH, best_spans
from bertcore.tokenization.pieces import continues_word


@dataclass(frozen=True)
class SequenceTaskOutput:
    kind = SEQUENCE_TASK
    problem_type: str  # "single_label_classification", "multi_label_classification" or "regression"
    labels: tuple[str, ...]  # label names in class-id order (config.id2label)
    logits: np.ndarray  # (C,) float32
    probabilities: np.ndarray  # (C,) float32: softmax; a sigmoid per label for multi-label; the value for regression
    chosen: np.ndarray  # (C,) bool: the predicted label; each label above 0.5 for multi-label; all for regression
    predicted_label: str  # its name; multi-label: the chosen names joined by ", "; regression: the value(s)


@dataclass(frozen=True)
class TokenTaskOutput:
    kind = TOKEN_TASK
    labels: tuple[str, ...]  # tag names in class-id order
    logits: np.ndarray  # (T, C) float32
    probabilities: np.ndarray  # (T, C) float32, softmax at each position
    predicted_ids: np.ndarray  # (T,) int64, argmax at each position
    predicted_labels: list[str]  # (T,) the predicted tag; "" where not scored
    scored: np.ndarray  # (T,) bool: False at [CLS], [SEP] and [PAD]
    word_starts: np.ndarray  # (T,) bool: scored and a word's first piece: where a word's tag is read (as in training)
    piece_style: str = "wordpiece"  # the tokenizer's word marks (bertcore.tokenization.pieces), to join pieces


@dataclass(frozen=True)
class QuestionAnsweringTaskOutput:
    kind = QA_TASK
    start_logits: np.ndarray  # (T,) float32
    end_logits: np.ndarray  # (T,) float32
    start_probabilities: np.ndarray  # (T,) float32, softmax over the positions
    end_probabilities: np.ndarray  # (T,) float32
    context: np.ndarray  # (T,) bool: sentence B's positions, where an answer may lie
    span: tuple[int, int] | None  # first and last position of the best valid span; None without one
    answer: str  # the span's text in sentence B (from the offsets); "" without a span
    span_score: float | None  # start logit + end logit of the span
    null_score: float  # start logit + end logit at [CLS]: the score of "no answer"


TaskOutput = SequenceTaskOutput | TokenTaskOutput | QuestionAnsweringTaskOutput


def task_output(model, tokenizer, encoding, outputs, context_text: str | None = None) -> TaskOutput | None:
    """The task head's output for one encoded input, from `outputs` = model.bert(...) on it (batch of one);
    None for a model without a task head. `context_text` is sentence B's text, to cut a QA answer from (without
    it the answer is the span's tokens decoded)."""
    # Each family's head computes its logits itself (BERT's classifier on the pooler, RoBERTa's on <s>, …).
    if isinstance(model, EncoderForSequenceClassification):
        logits = model.sequence_logits(outputs, None)[0].float().cpu().numpy()  # (C,)
        return _sequence_output(model.config, logits)
    if isinstance(model, EncoderForTokenClassification):
        logits = model.token_logits(outputs)[0].float()  # (T, C)
        return _token_output(model.config, encoding, logits)
    if isinstance(model, EncoderForQuestionAnswering):
        start_logits, end_logits = model.span_logits(outputs)  # (1, T) each
        return _qa_output(tokenizer, encoding, start_logits[0].float(), end_logits[0].float(), context_text)
    return None


def _sequence_output(config, logits: np.ndarray) -> SequenceTaskOutput:
    labels = tuple(config.id2label.values())
    problem_type = config.problem_type or ("regression" if config.num_labels == 1 else "single_label_classification")
    if problem_type == "regression":
        probabilities, chosen = logits.copy(), np.ones_like(logits, dtype=bool)
        predicted = ", ".join(f"{value:.4g}" for value in logits)
    elif problem_type == "multi_label_classification":
        probabilities = 1.0 / (1.0 + np.exp(-logits))
        chosen = probabilities > 0.5
        predicted = ", ".join(label for label, on in zip(labels, chosen, strict=True) if on)
    else:
        probabilities = torch.from_numpy(logits).softmax(-1).numpy()
        chosen = np.arange(len(logits)) == int(logits.argmax())
        predicted = labels[int(logits.argmax())]
    return SequenceTaskOutput(problem_type, labels, logits, probabilities.astype(np.float32), chosen, predicted)


def _token_output(config, encoding, logits: torch.Tensor) -> TokenTaskOutput:
    labels = tuple(config.id2label.values())
    predicted_ids = logits.argmax(-1).cpu().numpy()
    scored = np.array([not special for special in encoding.special_tokens_mask], dtype=bool)
    glued = np.array([continues_word(token, encoding.piece_style) for token in encoding.tokens], dtype=bool)
    after_text = np.concatenate([[False], scored[:-1]])  # a text's first piece has no space mark, yet starts a word
    word_starts = scored & ~(glued & after_text)
    return TokenTaskOutput(
        labels=labels, logits=logits.cpu().numpy(), probabilities=logits.softmax(-1).cpu().numpy(),
        predicted_ids=predicted_ids.astype(np.int64),
        predicted_labels=[labels[i] if on else "" for i, on in zip(predicted_ids, scored, strict=True)],
        scored=scored, word_starts=word_starts, piece_style=encoding.piece_style)


def _qa_output(tokenizer, encoding, start_logits: torch.Tensor, end_logits: torch.Tensor,
               context_text: str | None) -> QuestionAnsweringTaskOutput:
    context = np.array([sequence == 1 for sequence in encoding.sequence_ids], dtype=bool)
    starts, ends = start_logits.cpu().numpy(), end_logits.cpu().numpy()
    candidates = best_spans(starts, ends, context, context, max_answer_length=MAX_ANSWER_LENGTH)
    span = answer = span_score = None
    if candidates:
        best = candidates[0]
        span, span_score = (best.start, best.end), best.score
        if context_text is not None:
            answer = context_text[encoding.offsets[best.start][0] : encoding.offsets[best.end][1]]
        else:
            answer = tokenizer.decode(encoding.input_ids[best.start : best.end + 1])
    return QuestionAnsweringTaskOutput(
        start_logits=starts, end_logits=ends, start_probabilities=start_logits.softmax(-1).cpu().numpy(),
        end_probabilities=end_logits.softmax(-1).cpu().numpy(), context=context, span=span, answer=answer or "",
        span_score=span_score, null_score=float(starts[0] + ends[0]))
