"""Extractive QA's answers: a model's start/end logits back to answer text (BERT's run_squad post-processing). The
windows the logits are read from are `bertcore.tasks.qa_windows`.

In every window of a question, the top-`n_best_size` start and end positions are paired; a pair is a candidate when
both lie in that window's context, start <= end, the span is at most `max_answer_length` tokens, and the start token
has its "maximum context" in this window (of the windows holding a token, the one where it sits farthest from an
edge). The best candidate by start + end logit is mapped back to the context text through the tokens' character
offsets. With unanswerable questions (`allow_no_answer`), the null score (start = end = 0, the smallest over the
question's windows) wins when it beats the best span by more than `null_score_diff_threshold`, and the answer is "".
A window's logits reduce to a `WindowAnswer` (its null score and best span) as soon as they are seen, so evaluation
need not keep them. `best_spans` ranks the spans of one typed input, for the inspector.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bertcore.tasks.qa_windows import QAWindow, WindowLayout
from bertcore.tasks.task_files import QAExample

MAX_ANSWER_LENGTH = 30  # tokens; BERT's run_squad and HF's run_qa
N_BEST_SIZE = 20


@dataclass(frozen=True)
class SpanCandidate:
    score: float  # start logit + end logit
    start: int  # token positions in the window
    end: int


def best_spans(
    start_logits: np.ndarray, end_logits: np.ndarray, allowed_starts: Sequence[bool], allowed_ends: Sequence[bool],
    *, max_answer_length: int = MAX_ANSWER_LENGTH, n_best_size: int = N_BEST_SIZE,
) -> list[SpanCandidate]:
    """Valid spans of one input, best first: top-n starts × top-n ends, start <= end, length within the limit,
    start and end where allowed (the context part). Also what the inspector needs for one typed input."""
    scores, starts, ends = _span_scores(start_logits, end_logits, allowed_starts, allowed_ends,
                                        max_answer_length, n_best_size)
    order = np.argsort(-scores, kind="stable")  # best first; equal scores in (start rank, end rank) order
    return [SpanCandidate(float(scores[i]), int(starts[i]), int(ends[i])) for i in order]


def _span_scores(start_logits, end_logits, allowed_starts, allowed_ends, max_answer_length: int, n_best_size: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(score, start, end) of every valid pair of the top-n starts × top-n ends, in that nested order."""
    start_logits = np.asarray(start_logits, dtype=np.float64)
    end_logits = np.asarray(end_logits, dtype=np.float64)
    starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
    ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
    pair_starts = np.repeat(starts, len(ends))
    pair_ends = np.tile(ends, len(starts))
    valid = (np.asarray(allowed_starts, dtype=bool)[pair_starts] & np.asarray(allowed_ends, dtype=bool)[pair_ends]
             & (pair_starts <= pair_ends) & (pair_ends < pair_starts + max_answer_length))
    pair_starts, pair_ends = pair_starts[valid], pair_ends[valid]
    return start_logits[pair_starts] + end_logits[pair_ends], pair_starts, pair_ends


@dataclass(frozen=True)
class WindowAnswer:
    """What one window's logits say, all that choosing a question's answer needs (BERT's run_squad rule)."""

    null_score: float  # start + end logit at [CLS]: "no answer in this window"
    score: float | None  # start + end logit of the window's best valid span; None when it has none
    start_char: int  # that span's characters in the context, [start_char, end_char)
    end_char: int


def window_answer(
    layout: WindowLayout, start_logits: np.ndarray, end_logits: np.ndarray, *,
    max_answer_length: int = MAX_ANSWER_LENGTH, n_best_size: int = N_BEST_SIZE,
) -> WindowAnswer:
    """The best span of one window (`QAWindow.layout`, `QAWindows.layout(i)`) and its null score, from its logits
    (at least as long as the window; padding beyond it is ignored). Keeping this instead of the logits lets an
    evaluation hold a few numbers per window."""
    length, context_start, offsets = layout.length, layout.context_start, layout.offsets
    starts = np.asarray(start_logits)[:length]
    ends = np.asarray(end_logits)[:length]
    null = float(starts[0] + ends[0])
    in_context = np.zeros(length, dtype=bool)
    in_context[context_start : context_start + len(offsets)] = True
    allowed_starts = np.zeros(length, dtype=bool)
    allowed_starts[context_start : context_start + len(offsets)] = layout.is_max_context
    scores, span_starts, span_ends = _span_scores(starts, ends, allowed_starts, in_context, max_answer_length,
                                                  n_best_size)
    if not len(scores):
        return WindowAnswer(null, None, 0, 0)
    best = int(np.argmax(scores))  # the first of equal scores, as a stable sort puts it
    return WindowAnswer(null, float(scores[best]), int(offsets[span_starts[best] - context_start, 0]),
                        int(offsets[span_ends[best] - context_start, 1]))


def choose_answers(
    examples: Sequence[QAExample], window_examples: Sequence[int], answers: Sequence[WindowAnswer], *,
    allow_no_answer: bool = False, null_score_diff_threshold: float = 0.0,
) -> dict[str, str]:
    """{question id: answer text} ("" for no answer) from every window's `WindowAnswer`; `window_examples[i]` is
    the question of window i. The best span over a question's windows wins (the first on a tie); with
    `allow_no_answer`, "" wins when the smallest null score beats it by more than the threshold."""
    by_example: dict[int, list[int]] = {}
    for window_index, example_index in enumerate(window_examples):
        by_example.setdefault(int(example_index), []).append(window_index)
    predictions: dict[str, str] = {}
    for example_index, example in enumerate(examples):
        best: WindowAnswer | None = None
        null_score = None
        for window_index in by_example.get(example_index, []):
            answer = answers[window_index]
            null_score = answer.null_score if null_score is None else min(null_score, answer.null_score)
            if answer.score is not None and (best is None or answer.score > best.score):
                best = answer
        if best is None:
            predictions[example.id] = ""
        elif allow_no_answer and null_score is not None and null_score - best.score > null_score_diff_threshold:
            predictions[example.id] = ""
        else:
            predictions[example.id] = example.context[best.start_char : best.end_char]
    return predictions


def postprocess_qa_predictions(
    examples: Sequence[QAExample], windows: Sequence[QAWindow], start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray], *, allow_no_answer: bool = False, null_score_diff_threshold: float = 0.0,
    max_answer_length: int = MAX_ANSWER_LENGTH, n_best_size: int = N_BEST_SIZE,
) -> dict[str, str]:
    """{question id: answer text} ("" for no answer) from each window's logits (one array per window, at least
    as long as the window; padding beyond it is ignored)."""
    if not len(windows) == len(start_logits) == len(end_logits):
        raise ValueError(f"{len(windows)} windows but {len(start_logits)} start and {len(end_logits)} end logit "
                         "arrays; give one of each per window")
    answers = []
    window_examples = []
    for window, starts, ends in zip(windows, start_logits, end_logits, strict=True):
        answers.append(window_answer(window.layout, starts, ends, max_answer_length=max_answer_length,
                                     n_best_size=n_best_size))
        window_examples.append(window.example_index)
    return choose_answers(examples, window_examples, answers, allow_no_answer=allow_no_answer,
                          null_score_diff_threshold=null_score_diff_threshold)
