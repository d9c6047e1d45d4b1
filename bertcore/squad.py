"""Extractive QA: SQuAD questions cut into model windows, and the model's start/end logits back to answer text.

Windows (BERT's run_squad, HF's run_qa): each input is `[CLS] question [SEP] context-window [SEP]`; the question
keeps at most `max_query_length` tokens; a context too long for one input is cut into windows that overlap by
`doc_stride` tokens (HF's meaning of stride: 128 of overlap at seq_len 384). A window's target is the token
span of the (first) gold answer when the whole answer lies inside it, else start = end = 0, the [CLS] position,
which is also the target of an unanswerable (v2.0) question.

Post-processing (BERT's run_squad): in every window of a question, the top-`n_best_size` start and end
positions are paired; a pair is a candidate when both lie in that window's context, start <= end, the span is
at most `max_answer_length` tokens, and the start token has its "maximum context" in this window (of the
windows holding a token, the one where it sits farthest from an edge). The best candidate by start + end
logit is mapped back to the context text through the tokens' character offsets. With unanswerable questions
(`allow_no_answer`), the null score (start = end = 0, the smallest over the question's windows) wins when it
beats the best span by more than `null_score_diff_threshold`, and the answer is "".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from bertcore.task_files import QAExample, TaskDataError
from bertcore.tokenizer import TokenizerError

MAX_QUERY_LENGTH = 64  # BERT's run_squad default, capped for short sequence lengths (see default_qa_lengths)
MAX_ANSWER_LENGTH = 30  # tokens; BERT's run_squad and HF's run_qa
N_BEST_SIZE = 20


def default_qa_lengths(seq_len: int) -> tuple[int, int]:
    """(max_query_length, doc_stride) for a sequence length: 64 and 128 at 384 as in HF's run_qa; for shorter
    inputs the question gets at most half the positions and the overlap a third of the sequence length."""
    return min(MAX_QUERY_LENGTH, (seq_len - 3) // 2), seq_len // 3


@dataclass(frozen=True)
class QAWindow:
    """One model input for one question: `[CLS] question [SEP] context[a:b] [SEP]`, with what decoding needs."""

    example_index: int  # into the list of QAExamples the windows were made from
    input_ids: list[int]
    token_type_ids: list[int]
    context_start: int  # position of the window's first context token
    offsets: list[tuple[int, int] | None]  # per position: character span in the context; None off the context
    token_is_max_context: list[bool]  # per position: this window gives the token its widest context
    start_position: int  # target token span of the first gold answer; 0, 0 ([CLS]) when not inside
    end_position: int

    def __len__(self) -> int:
        return len(self.input_ids)


def check_qa_lengths(seq_len: int, max_query_length: int, doc_stride: int) -> None:
    """ValueError naming the fix when the lengths leave no room for windows that move forward."""
    if max_query_length < 1:
        raise ValueError(f"max_query_length is {max_query_length}; it must be at least 1 token")
    room = seq_len - max_query_length - 3
    if room < 1:
        raise ValueError(
            f"seq_len={seq_len} leaves no room for the context after a question of up to {max_query_length} "
            f"tokens and [CLS]/[SEP]/[SEP]; use a longer seq_len or a smaller max_query_length"
        )
    if not 0 <= doc_stride < room:
        raise ValueError(
            f"doc_stride={doc_stride} (the overlap between context windows) must be in [0, {room - 1}]: at "
            f"seq_len={seq_len} with questions of up to {max_query_length} tokens a window holds {room} context "
            "tokens and each next window must start at least one token later"
        )


def make_qa_windows(
    examples: Sequence[QAExample], tokenizer, *, seq_len: int, max_query_length: int, doc_stride: int,
) -> list[QAWindow]:
    """Every window of every question, in question order."""
    check_qa_lengths(seq_len, max_query_length, doc_stride)
    question_ids = tokenizer.encode_ids([example.question for example in examples])
    context_cache: dict[str, tuple[list[int], list[tuple[int, int]]]] = {}
    windows: list[QAWindow] = []
    for example_index, example in enumerate(examples):
        query = question_ids[example_index][:max_query_length]
        if not query:
            raise TaskDataError(f"{example.where}: the question has no tokens after normalisation; write it out")
        if example.context not in context_cache:
            context_cache[example.context] = _context_tokens(example, tokenizer)
        context_ids, context_offsets = context_cache[example.context]
        answer_span = _answer_token_span(example, context_offsets)
        room = seq_len - len(query) - 3
        spans = _window_spans(len(context_ids), room, doc_stride)
        owner = _max_context_owners(tuple(spans), len(context_ids))
        for span_index, (first, last) in enumerate(spans):
            prefix = [tokenizer.cls_token_id, *query, tokenizer.sep_token_id]
            context_start = len(prefix)
            input_ids = prefix + context_ids[first:last] + [tokenizer.sep_token_id]
            token_type_ids = [0] * context_start + [1] * (len(input_ids) - context_start)
            offsets: list[tuple[int, int] | None] = [None] * len(input_ids)
            offsets[context_start : context_start + last - first] = context_offsets[first:last]
            max_context = [False] * len(input_ids)
            max_context[context_start : context_start + last - first] = [o == span_index for o in owner[first:last]]
            start_position = end_position = 0
            if answer_span is not None and first <= answer_span[0] and answer_span[1] < last:
                start_position = context_start + answer_span[0] - first
                end_position = context_start + answer_span[1] - first
            windows.append(QAWindow(example_index, input_ids, token_type_ids, context_start, offsets, max_context,
                                    start_position, end_position))
    return windows


def _context_tokens(example: QAExample, tokenizer) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids and character offsets of the whole context (no specials); never truncated."""
    try:
        # the public encoder, given room for every token (a WordPiece token covers at least one character)
        encoding = tokenizer.encode(example.context, max_length=2 * len(example.context) + 8)
    except TokenizerError as error:
        raise TaskDataError(f"{example.where}: the context cannot be tokenized ({error})") from None
    return encoding.input_ids[1:-1], encoding.offsets[1:-1]


def _answer_token_span(example: QAExample, offsets: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """First and last context token overlapping the first gold answer's characters; None if unanswerable."""
    if not example.answers:
        return None
    answer = example.answers[0]
    begin, end = answer.answer_start, answer.answer_start + len(answer.text)
    overlapping = [i for i, (token_begin, token_end) in enumerate(offsets) if token_begin < end and token_end > begin]
    if not overlapping:
        raise TaskDataError(
            f"{example.where}: the answer {answer.text!r} covers no token of the context (only spaces or "
            "ignored characters?); give an answer that contains words"
        )
    return overlapping[0], overlapping[-1]


def _window_spans(num_tokens: int, room: int, doc_stride: int) -> list[tuple[int, int]]:
    """[first, last) context token ranges: `room` tokens each, the next starting `room - doc_stride` later."""
    spans = []
    first = 0
    while True:
        last = min(first + room, num_tokens)
        spans.append((first, last))
        if last >= num_tokens:
            return spans
        first += room - doc_stride


@lru_cache(maxsize=1024)  # questions over one context share their windows
def _max_context_owners(spans: tuple[tuple[int, int], ...], num_tokens: int) -> tuple[int, ...]:
    """For each context token, the window that gives it the most context (BERT's rule: score =
    min(tokens to the left, tokens to the right) + 0.01 * window length; the first window wins a tie)."""
    best_scores = np.full(num_tokens, -np.inf)
    owners = np.zeros(num_tokens, dtype=np.int64)
    for index, (first, last) in enumerate(spans):
        tokens = np.arange(first, last)
        scores = np.minimum(tokens - first, last - 1 - tokens) + 0.01 * (last - first)
        better = scores > best_scores[first:last]
        best_scores[first:last][better] = scores[better]
        owners[first:last][better] = index
    return tuple(owners.tolist())


# ---- from logits back to text -------------------------------------------------------------------------------


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
    start_logits = np.asarray(start_logits, dtype=np.float64)
    end_logits = np.asarray(end_logits, dtype=np.float64)
    starts = np.argsort(-start_logits, kind="stable")[:n_best_size]
    ends = np.argsort(-end_logits, kind="stable")[:n_best_size]
    candidates = [
        SpanCandidate(float(start_logits[s] + end_logits[e]), int(s), int(e))
        for s in starts for e in ends
        if allowed_starts[s] and allowed_ends[e] and s <= e < s + max_answer_length
    ]
    return sorted(candidates, key=lambda c: -c.score)


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
    by_example: dict[int, list[int]] = {}
    for window_index, window in enumerate(windows):
        by_example.setdefault(window.example_index, []).append(window_index)
    predictions: dict[str, str] = {}
    for example_index, example in enumerate(examples):
        best: tuple[SpanCandidate, QAWindow] | None = None
        null_score = None
        for window_index in by_example.get(example_index, []):
            window = windows[window_index]
            length = len(window)
            starts = np.asarray(start_logits[window_index])[:length]
            ends = np.asarray(end_logits[window_index])[:length]
            null = float(starts[0] + ends[0])
            null_score = null if null_score is None else min(null_score, null)
            in_context = [offset is not None for offset in window.offsets]
            allowed_starts = [c and m for c, m in zip(in_context, window.token_is_max_context, strict=True)]
            candidates = best_spans(starts, ends, allowed_starts, in_context,
                                    max_answer_length=max_answer_length, n_best_size=n_best_size)
            if candidates and (best is None or candidates[0].score > best[0].score):
                best = (candidates[0], window)
        if best is None:
            predictions[example.id] = ""
            continue
        if allow_no_answer and null_score is not None and null_score - best[0].score > null_score_diff_threshold:
            predictions[example.id] = ""
            continue
        span, window = best
        predictions[example.id] = example.context[window.offsets[span.start][0] : window.offsets[span.end][1]]
    return predictions
